//! `DocaQueue::of`: the queue DOCA's device code is given is the channel's
//! own (every address and count from its GCRB), and a channel DOCA's code
//! could not run on is refused with the reason, before any GPU is touched.

use marrow_transport::gcrb_page::{config, edit_config, key};
use marrow_transport::gpu_doca::{DocaQueue, DocaWindow};
use marrow_transport::{World, WorldConfig};

fn world(cfg: WorldConfig) -> World {
    World::new(WorldConfig { sq_wqebbs: 64, ncqe: 256, ..cfg }).unwrap()
}

#[test]
fn a_queue_is_the_channels_rings_doorbells_and_cq() {
    let w = world(WorldConfig::default());
    let cfg = config(&w.channels[0].page()).unwrap();
    let q = DocaQueue::of(&cfg).unwrap();
    assert_eq!(
        (q.sq_base, q.dbrec_addr, q.db_addr, q.cq_base, q.cq_dbrec_addr),
        (cfg.sq_base(), cfg.dbrec_addr(), cfg.db_addr(), cfg.cq_base(), cfg.cq_dbrec_addr())
    );
    assert_eq!((q.qpn, q.sq_wqebbs, q.cq_ncqe), (w.channels[0].qpn, 64, 256));
    // Keys go to DOCA big-endian, addresses as the GCRB maps them.
    let k = key(&w.channels[0].page(), 1).unwrap();
    let win = DocaWindow::of(&cfg, &k, 8, 16);
    assert_eq!(
        (win.raddr, win.rkey_be, win.laddr, win.lkey_be),
        (k.raddr() + 8, k.rkey().to_be(), cfg.local_base() + 16, cfg.local_lkey().to_be())
    );
}

#[test]
fn a_cq_that_keeps_its_doorbell_record_is_refused() {
    // DOCA never writes the CQ's record: without oi the softnic (as a
    // ConnectX) would see the CQ overflow after ncqe CQEs.
    let w = world(WorldConfig { cq_overrun_ignore: false, ..WorldConfig::default() });
    let err = DocaQueue::of(&config(&w.channels[0].page()).unwrap()).unwrap_err().to_string();
    assert!(err.contains("oi"), "{err}");
}

#[test]
fn a_collapsed_cq_is_refused() {
    let w = world(WorldConfig { collapsed_cq: true, ..WorldConfig::default() });
    let err = DocaQueue::of(&config(&w.channels[0].page()).unwrap()).unwrap_err().to_string();
    assert!(err.contains("collapsed"), "{err}");
}

#[test]
fn counts_doca_cannot_hold_are_refused() {
    let w = world(WorldConfig::default());
    let page = w.channels[0].page();
    for (sq, ncqe) in [(65536u32, 65536u32), (64, 32), (48, 256)] {
        edit_config(&page, |c| {
            c.set_sq_wqebbs(sq);
            c.set_cq_ncqe(ncqe);
        })
        .unwrap();
        let err = DocaQueue::of(&config(&page).unwrap()).unwrap_err().to_string();
        assert!(err.contains(&format!("{sq} WQEBBs, {ncqe} CQEs")), "{err}");
    }
}
