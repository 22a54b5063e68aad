//! Any bytes as a perftest output file (`marrow bench softnic --peer FILE`):
//! the table reader never panics, every row has a value per header cell,
//! and every point of a curve is a whole size with a finite value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_bench::perftest::{peer_series, tables};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(all) = tables(&text) {
        for t in &all {
            assert!(t.rows.iter().all(|r| r.len() == t.header.len()));
            assert!(t.points().iter().all(|p| p.0 >= 1 && p.1.is_finite()));
            assert!(t.points().len() + t.unmeasured() <= t.rows.len());
        }
    }
    let _ = peer_series(&text, "fuzz");
});
