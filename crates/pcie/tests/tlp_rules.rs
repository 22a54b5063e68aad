//! TLP header rules (PCIe 6.0 §2.2) and codec properties. Field-by-field
//! agreement with an independent codec is in tests/oracle/tests/tlp_cocotb.rs.

use marrow_pcie::tlp::{Malformed, TlpError, TlpHeader, TlpKind};
use proptest::prelude::*;

fn hdr(dws: &[u32]) -> TlpHeader {
    TlpHeader::decode(dws).unwrap()
}

#[test]
fn four_dw_request_below_4g_is_malformed_above_is_not() {
    // MWr 4DW, 1 DW, first BE 1111.
    assert_eq!(hdr(&[0x6000_0001, 0x0000_000f, 0, 0xfee0_0000]).malformed(), Malformed::FOUR_DW_BELOW_4G);
    assert_eq!(hdr(&[0x6000_0001, 0x0000_000f, 1, 0xfee0_0000]).malformed(), Malformed::empty());
    // The same address in 3DW form is fine.
    assert_eq!(hdr(&[0x4000_0001, 0x0000_000f, 0xfee0_0000]).malformed(), Malformed::empty());
}

#[test]
fn byte_enable_rules() {
    // MRd 3DW length 1 with Last BE set.
    assert_eq!(hdr(&[0x0000_0001, 0x0000_00ff, 0x1000]).malformed(), Malformed::LAST_BE_ON_ONE_DW);
    // MRd length 2 with Last BE 0.
    assert_eq!(hdr(&[0x0000_0002, 0x0000_000f, 0x1000]).malformed(), Malformed::ZERO_BE_ON_MULTI_DW);
    // Zero-length read (length 1, BEs 0) is legal.
    assert_eq!(hdr(&[0x0000_0001, 0, 0x1000]).malformed(), Malformed::empty());
}

#[test]
fn config_and_io_rules() {
    // CfgRd0 length 1, TC 0: fine; TC 1: malformed.
    assert_eq!(hdr(&[0x0400_0001, 0x0000_000f, 0x0100_0010]).malformed(), Malformed::empty());
    assert_eq!(hdr(&[0x0410_0001, 0x0000_000f, 0x0100_0010]).malformed(), Malformed::IO_CFG_FIELDS);
    assert_eq!(hdr(&[0x0200_0002, 0x0000_00ff, 0x0cf8]).malformed(), Malformed::IO_CFG_FIELDS);
}

#[test]
fn kinds_messages_and_reserved() {
    // Msg routed by ID (Type 10010), Fmt 001.
    assert_eq!(hdr(&[0x3200_0000, 0x0000_0030, 0, 0]).kind(), TlpKind::Msg { routing: 0b010 });
    assert_eq!(hdr(&[0x7000_0001, 0x0000_007f, 0, 0]).kind(), TlpKind::MsgData { routing: 0b000 });
    // Fmt 000 Type 00011 is reserved.
    let r = hdr(&[0x0300_0000, 0, 0]);
    assert_eq!(r.kind(), TlpKind::Reserved);
    assert_eq!(r.malformed(), Malformed::RESERVED_TYPE);
    // AtomicOp FetchAdd of 3 DW is not a legal operand size.
    assert_eq!(hdr(&[0x4c00_0003, 0x0000_00ff, 0x1000]).malformed(), Malformed::ATOMIC_LENGTH);
}

#[test]
fn truncated_headers_are_errors() {
    assert_eq!(TlpHeader::decode(&[]), Err(TlpError::Truncated { have: 0, need: 1 }));
    assert_eq!(TlpHeader::decode(&[0x6000_0001, 0, 0]), Err(TlpError::Truncated { have: 3, need: 4 }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]
    /// Any dwords decode or give an error; a decoded header re-encodes to the
    /// dwords it came from, except bits the format reserves.
    #[test]
    fn decode_encode_decode(dws in proptest::collection::vec(any::<u32>(), 0..6)) {
        if let Ok(h) = TlpHeader::decode(&dws) {
            let _ = h.malformed();
            let mut out = [0xA5A5_A5A5u32; 4];
            let n = h.encode(&mut out);
            prop_assert_eq!(TlpHeader::decode(&out[..n]).unwrap(), h);
        }
    }
}
