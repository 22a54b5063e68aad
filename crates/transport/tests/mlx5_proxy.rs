//! The CPU-proxy doorbell mode end to end on the softnic: the GCRB's
//! doorbell address is a host mailbox, a `DoorbellProxy` thread forwards
//! each doorbell to the softnic's UAR register, and the device code's puts,
//! gets and atomics complete as with a direct doorbell. This is the mode
//! the mlx5 backend falls back to when the GPU may not map the UAR.

use marrow_gcrb::{GCRB_OFF_CONFIG, gcrb_config};
use marrow_mlx5::raw::MLX5_BF_OFFSET;
use marrow_softnic::Shm;
use marrow_transport::cpu::Device;
use marrow_transport::{World, WorldConfig};
use marrow_verbs::proxy::DoorbellProxy;
use std::time::Duration;
use zerocopy::{FromBytes, IntoBytes};

#[test]
fn device_code_through_the_proxy_moves_data_on_the_softnic() {
    let w =
        World::new(WorldConfig { timeout: Duration::from_secs(5), sq_wqebbs: 16, ncqe: 16, ..WorldConfig::default() })
            .unwrap();
    let ch = &w.channels[0];
    let uar_db = w.nic.hca().qp(ch.qpn).unwrap().mem.uar.sub(MLX5_BF_OFFSET as usize, 8).unwrap();
    let mailbox = Shm::create("proxy-mailbox", 64).unwrap();
    // Point the channel's doorbell at the mailbox, as the backend does when
    // cudaHostRegister(IoMemory) of the UAR is refused.
    let page = ch.page();
    let mut b = vec![0u8; gcrb_config::SIZE];
    page.read_bytes(GCRB_OFF_CONFIG as usize, &mut b).unwrap();
    let mut c = gcrb_config::read_from_bytes(&b).unwrap();
    c.set_db_addr(mailbox.region().base_addr() as u64).set_db_size(8);
    page.write_bytes(GCRB_OFF_CONFIG as usize, c.as_bytes()).unwrap();
    let proxy = DoorbellProxy::start(mailbox.region().sub(0, 8).unwrap(), uar_db).unwrap();

    let d = Device::new(ch);
    d.check_config().unwrap();
    // More WQEs than the 16-WQEBB ring holds: the proxy must keep up across wraps.
    for round in 0..40u64 {
        let len = 256;
        for i in 0..len {
            w.bufs[0].write_u8(i, (i as u64 * 7 + round) as u8).unwrap();
        }
        d.put(1, 4096, 0, len as u32).unwrap_or_else(|e| panic!("round {round}: {e}\n{}", ch.report()));
        let mut got = vec![0u8; len];
        w.bufs[1].read_bytes(4096, &mut got).unwrap();
        assert!(got.iter().enumerate().all(|(i, b)| *b == (i as u64 * 7 + round) as u8), "round {round}");
    }
    let old = d.fetch_add(1, 8192, 5, 64).unwrap();
    assert_eq!(old, 0);
    assert_eq!(d.fetch_add(1, 8192, 5, 64).unwrap(), 5);
    d.get(1, 4096, 1024, 256).unwrap();
    d.quiet().unwrap();
    let n = proxy.stop();
    assert!(n >= 40, "{n} doorbells forwarded");
    // The UAR never saw anything but forwarded doorbells: the mailbox is idle.
    assert_eq!(mailbox.region().read_8bytes(0).unwrap(), marrow_verbs::proxy::EMPTY);
}
