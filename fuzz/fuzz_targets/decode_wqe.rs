//! Any bytes through the WQE decoder: the segment walk and the full parse
//! must return errors, never panic, never loop.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_mlx5::prelude::*;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = WqeView::new(data) {
        let walked = view.segments().take(128).count();
        assert!(walked <= 64, "a WQE has at most 63 segments after ds checks");
        if let Ok(p) = view.parse() {
            let _ = p.local_len();
        }
    }
});
