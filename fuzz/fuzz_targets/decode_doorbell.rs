//! Any 8 bytes through the UAR doorbell decoder; where the bytes are a
//! canonical NVSHMEM/DOCA doorbell (opmod 0, reserved bits 0), re-encoding
//! gives them back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_mlx5::prelude::*;

fuzz_target!(|data: [u8; 8]| {
    let db = decode_uar_doorbell(data);
    if db.style == DoorbellStyle::IndexAndQpn && data[0] == 0 && data[7] & 0xc0 == 0 {
        assert_eq!(uar_doorbell_index_qpn(db.wqe_index, db.qpn), Ok(data));
    }
});
