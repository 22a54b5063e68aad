//! Memory regions backed by device memory (a GPU's), which the model reaches
//! only through copies: a fake device stands in for the GPU's copy engine.
//! Writes, reads and SENDs land in it and come out of it byte for byte;
//! atomics on it are refused as not modelled.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side};
use marrow_softnic::{Access, DeviceMemory};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

/// Device memory the test can inspect: copies only, like a GPU's.
#[derive(Debug)]
struct FakeDevice(Mutex<Vec<u8>>);

impl DeviceMemory for FakeDevice {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), String> {
        let m = self.0.lock().unwrap();
        out.copy_from_slice(m.get(off..off + out.len()).ok_or("out of range")?);
        Ok(())
    }
    fn write(&self, off: usize, data: &[u8]) -> Result<(), String> {
        let mut m = self.0.lock().unwrap();
        m.get_mut(off..off + data.len()).ok_or("out of range")?.copy_from_slice(data);
        Ok(())
    }
}

const DEV_ADDR: u64 = 0x7f00_0000_0000;

fn setup() -> (Pair, Arc<FakeDevice>, u32, u32) {
    let p = Pair::new(PairConfig::default()).unwrap();
    let dev = Arc::new(FakeDevice(Mutex::new(vec![0; 1 << 16])));
    let (lkey, rkey) = {
        let mut hca = p.nic.hca();
        let pd = hca.qp(p.b.qpn).unwrap().pd;
        hca.reg_device_mr(pd, DEV_ADDR, dev.clone(), Access::all())
    };
    (p, dev, lkey, rkey)
}

fn wait_ok(p: &mut Pair) -> Completion {
    let c = p.wait(Side::A, false, T).unwrap();
    assert!(matches!(c, Completion::Requester { .. }), "{c:?}");
    c
}

#[test]
fn writes_and_reads_move_bytes_through_device_memory() {
    let (mut p, dev, _, rkey) = setup();
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    p.a.buf.write_bytes(0, &data).unwrap();
    let s = [Sge { addr: p.a.addr, length: 5000, lkey: p.a.lkey }];
    p.a.sq
        .post(
            CtrlParams::signaled(0, 0),
            &WqeOp::RdmaWrite { remote: RemoteAddr { raddr: DEV_ADDR + 100, rkey }, sgl: &s },
        )
        .unwrap();
    p.a.sq.ring().unwrap();
    wait_ok(&mut p);
    assert_eq!(dev.0.lock().unwrap()[100..5100], data[..]);

    // And back out of device memory into host memory.
    let s = [Sge { addr: p.a.addr + 8192, length: 5000, lkey: p.a.lkey }];
    p.a.sq
        .post(
            CtrlParams::signaled(0, 0),
            &WqeOp::RdmaRead { remote: RemoteAddr { raddr: DEV_ADDR + 100, rkey }, sgl: &s },
        )
        .unwrap();
    p.a.sq.ring().unwrap();
    wait_ok(&mut p);
    let mut got = vec![0u8; 5000];
    p.a.buf.read_bytes(8192, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn a_send_scatters_into_a_device_receive_buffer() {
    let (mut p, dev, lkey, _) = setup();
    p.b.rq.post(&[Sge { addr: DEV_ADDR + 64, length: 64, lkey }]).unwrap();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::SendInline { data: b"into GPU memory" }).unwrap();
    p.a.sq.ring().unwrap();
    wait_ok(&mut p);
    assert!(matches!(p.wait(Side::B, true, T).unwrap(), Completion::Responder { byte_cnt: 15, .. }));
    assert_eq!(&dev.0.lock().unwrap()[64..79], b"into GPU memory");
}

#[test]
fn the_device_window_is_bounds_checked_and_atomics_on_it_are_refused() {
    let (mut p, _, _, rkey) = setup();
    let s = [Sge { addr: p.a.addr, length: 16, lkey: p.a.lkey }];
    p.a.sq
        .post(
            CtrlParams::signaled(0, 0),
            &WqeOp::RdmaWrite { remote: RemoteAddr { raddr: DEV_ADDR + (1 << 16) - 8, rkey }, sgl: &s },
        )
        .unwrap();
    p.a.sq.ring().unwrap();
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::REMOTE_ACCESS_ERR),
        c => panic!("{c:?}"),
    }
    let (mut p, _, _, rkey) = setup();
    let l = Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey };
    p.a.sq
        .post(
            CtrlParams::signaled(0, 0),
            &WqeOp::AtomicFa { remote: RemoteAddr { raddr: DEV_ADDR, rkey }, local: l, add: 1 },
        )
        .unwrap();
    p.a.sq.ring().unwrap();
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::REMOTE_INVAL_REQ_ERR),
        c => panic!("{c:?}"),
    }
}
