//! Any bytes through the CQE decoder and the ownership check.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_mlx5::prelude::*;

fuzz_target!(|data: &[u8]| {
    let _ = decode_cqe(data);
    if data.len() >= 8 {
        let n = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let ncqe = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
        let _ = poll_cqe(&data[8..], n, ncqe);
    }
});
