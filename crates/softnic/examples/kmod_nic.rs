//! The NIC outside the VM, for `cargo xtask kmod test`: a softnic whose send
//! queue, doorbell record, UAR (doorbell) page and CQ live in the host file
//! behind a QEMU ivshmem-plain BAR. A process in the guest maps those pages
//! through `/dev/marrow`, posts an mlx5 RDMA_WRITE and rings the doorbell;
//! this program finds the doorbell, executes the WQE and writes the CQE the
//! guest polls.
//!
//! Usage: `kmod_nic FILE [TIMEOUT_SECONDS]`. FILE must be at least 1 MiB. It
//! prints `kmod_nic: ready ...` once the queues exist and the info page is
//! written (QEMU may start then), and exits 0 when the guest reports success
//! in the status word, 1 on a guest failure report, 2 on timeout or error.
//!
//! The layout is `kmod/guest/src/layout.rs`, shared with the guest program.

#[path = "../../../kmod/guest/src/layout.rs"]
mod layout;

use marrow_softnic::{Access, CqMode, ModifyQp, QpCaps, QpMemory, QpState, Shm, SoftNic};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("kmod_nic: error: {e}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<i32, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: kmod_nic FILE [TIMEOUT_SECONDS]")?;
    let timeout = Duration::from_secs(args.next().map(|s| s.parse()).transpose()?.unwrap_or(300));
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
    let shm = Arc::new(Shm::from_file(file, layout::BAR_BYTES)?);
    let bar = shm.region();
    let q = |off: usize, len: usize| bar.sub(layout::bar_offset(off) as usize, len);

    let nic = SoftNic::new();
    let (qpn, lkey, rkey, cqn) = {
        let mut hca = nic.hca();
        let pd = hca.alloc_pd();
        // The whole BAR is one memory region based at 0: a WQE's addresses
        // are BAR offsets, the only addresses guest and host share.
        let (lkey, rkey) = hca.reg_mr(pd, 0, bar, Access::all());
        let cq_ring = q(layout::CQ_OFF, layout::CQ_NCQE as usize * 64)?;
        let cq_dbrec = q(layout::CQ_DBREC_OFF, 8)?;
        let cqn = hca.create_cq_in(layout::CQ_NCQE, CqMode::Normal, shm.clone(), cq_ring, cq_dbrec)?;
        let caps = QpCaps { sq_wqebbs: layout::SQ_WQEBBS, rq_wqes: layout::RQ_WQES, rq_stride: layout::RQ_STRIDE };
        let sq_off = layout::bar_offset(layout::SQ_OFF) as usize;
        let rq_off = layout::bar_offset(layout::RQ_OFF) as usize;
        let db_off = layout::bar_offset(layout::QP_DBREC_OFF) as usize;
        let mem = QpMemory {
            sq: q(layout::SQ_OFF, layout::SQ_WQEBBS as usize * 64)?,
            rq: q(layout::RQ_OFF, (layout::RQ_WQES * layout::RQ_STRIDE) as usize)?,
            dbrec: q(layout::QP_DBREC_OFF, 8)?,
            uar: bar.sub(layout::UAR_PAGE as usize * layout::PAGE, layout::PAGE)?,
            queues: shm.clone(),
            uar_page: shm.clone(),
            offsets: (sq_off, rq_off, db_off),
        };
        // Fresh queues: doorbell record and UAR registers zero, no stale status.
        mem.dbrec.fill(0, 8, 0)?;
        mem.uar.fill(0, layout::PAGE, 0)?;
        q(layout::STATUS_OFF, 8)?.fill(0, 8, 0)?;
        let qpn = hca.create_qp_in(pd, cqn, cqn, caps, mem)?;
        // The responder: an ordinary softnic QP in host memory.
        let peer_cq = hca.create_cq(16, CqMode::Normal)?;
        let peer = hca.create_qp(pd, peer_cq, peer_cq, QpCaps::default())?;
        for (a, b) in [(qpn, peer), (peer, qpn)] {
            hca.modify_qp(a, ModifyQp::to(QpState::Init))?;
            hca.modify_qp(a, ModifyQp::rtr(b))?;
            hca.modify_qp(a, ModifyQp::to(QpState::Rts))?;
        }
        (qpn, lkey, rkey, cqn)
    };
    // The info page last, magic last of all: the guest waits for the magic.
    let info = bar.sub(layout::INFO_PAGE as usize * layout::PAGE, layout::PAGE)?;
    info.write_bytes(layout::INFO_QPN, &qpn.to_le_bytes())?;
    info.write_bytes(layout::INFO_LKEY, &lkey.to_le_bytes())?;
    info.write_bytes(layout::INFO_RKEY, &rkey.to_le_bytes())?;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    info.write_bytes(layout::INFO_MAGIC, &layout::MAGIC.to_le_bytes())?;
    println!("kmod_nic: ready qpn={qpn:#x} cqn={cqn:#x} lkey={lkey:#x} rkey={rkey:#x} file={path}");

    let status = q(layout::STATUS_OFF, 8)?;
    let start = Instant::now();
    let mut executed = 0usize;
    loop {
        let n = nic.scan();
        if n > 0 {
            executed += n;
            let hca = nic.hca();
            let sq_ci = hca.qp(qpn)?.sq_ci;
            println!(
                "kmod_nic: executed {n} WQE(s) (total {executed}), sq_ci={sq_ci}, CQEs written={}",
                hca.cq(cqn)?.pi
            );
        }
        for ev in nic.hca().take_events() {
            println!("kmod_nic: event {ev:?}");
        }
        let word = u64::from_le_bytes(status.read_array::<8>(0)?);
        if word == layout::DONE_MAGIC {
            println!("kmod_nic: guest reports success after {executed} WQE(s)");
            return Ok(0);
        }
        if word == layout::FAIL_MAGIC {
            println!("kmod_nic: guest reports failure after {executed} WQE(s)");
            return Ok(1);
        }
        if start.elapsed() > timeout {
            println!("kmod_nic: timeout after {:?}, {executed} WQE(s) executed", timeout);
            return Ok(2);
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
