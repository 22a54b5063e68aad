//! perftest's tables as perftest printed them: the interop run's log
//! (`docs/runs/2026-12-01-interop-daf886a.txt`), where rdma-core's
//! perftest on Linux rxe in the QEMU guest ran against the softnic, each
//! line prefixed `# ` by the test harness. Nothing here wrote those tables.

use marrow_bench::perftest::{peer_series, tables};
use marrow_bench::plot;

fn log() -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/runs/2026-12-01-interop-daf886a.txt");
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn every_table_of_the_interop_run_is_read_with_its_test_and_device() {
    let t = tables(&log()).unwrap();
    // Each of the log's result tables, by the header perftest printed.
    let headers = log().lines().filter(|l| l.contains("#bytes")).count();
    assert_eq!(t.len(), headers);
    assert!(t.iter().all(|t| t.device == "rxe0"), "{t:?}");
    // The server side of step 7, `ib_write_bw -s 65536 -n 200`:
    // `65536 200 7.12 7.12 0.000114`.
    let write_bw: Vec<_> = t.iter().filter(|t| t.title == "RDMA_Write BW Test" && !t.points().is_empty()).collect();
    assert!(write_bw.iter().any(|t| t.points() == [(65536, 7.12)]), "{write_bw:?}");
    assert!(write_bw.iter().all(|t| t.quantity == plot::BANDWIDTH && t.column == "BW average[MB/sec]"));
    // The latency tests printed `inf` and `-nan` (the guest's clock could
    // not be calibrated under TCG): read as rows, left out of the curves.
    let lat: Vec<_> = t.iter().filter(|t| t.title == "RDMA_Write Latency Test").collect();
    assert!(!lat.is_empty());
    for l in &lat {
        assert_eq!((l.quantity, l.column.as_str()), (plot::LATENCY, "t_typical[usec]"));
        assert!(l.points().is_empty() && l.unmeasured() == 1, "{l:?}");
    }
}

#[test]
fn peer_series_name_the_test_the_device_and_the_file() {
    let s = peer_series(&log(), "interop.txt").unwrap();
    assert!(s.iter().any(|s| s.name == "perftest RDMA_Write BW Test, rxe0 (interop.txt)"), "{s:?}");
}
