//! The connection-exchange parsers read bytes a TCP peer chose: any bytes
//! give a parsed message or an error, never a panic; and what marrow writes
//! parses back to itself.

use marrow_interop::exchange::{Dest, MSG_LEN};
use marrow_interop::perftest::{KEY_LEN, Keys};
use proptest::prelude::*;

proptest! {
    #[test]
    fn pingpong_messages_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = Dest::parse(&bytes);
    }

    #[test]
    fn pingpong_messages_of_any_printable_text_never_panic(text in "[0-9a-f:é€]{0,51}") {
        let mut m = text.into_bytes();
        m.push(0);
        let _ = Dest::parse(&m);
    }

    /// A GID field of the right byte length with a two-byte character in
    /// it: slicing it two bytes at a time would cut the character.
    #[test]
    fn a_gid_with_a_multibyte_character_is_an_error(hex in "[0-9a-f]{30}", at in 0usize..31) {
        let mut gid = hex;
        gid.insert(at, 'é');
        let mut m = format!("0000:000011:000022:{gid}").into_bytes();
        m.push(0);
        prop_assert!(Dest::parse(&m).is_err());
    }

    #[test]
    fn perftest_keys_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..140)) {
        let _ = Keys::parse(&bytes);
    }

    #[test]
    fn written_messages_parse_back(lid: u16, qpn in 0u32..1 << 24, psn in 0u32..1 << 24, gid: [u8; 16], rkey: u32, vaddr: u64) {
        let d = Dest { lid, qpn, psn, gid };
        prop_assert_eq!(d.to_wire().len(), MSG_LEN);
        prop_assert_eq!(Dest::parse(&d.to_wire()).unwrap(), d);
        let k = Keys { lid, out_reads: 16, qpn, psn, rkey, vaddr, gid, srqn: 0 };
        prop_assert_eq!(k.to_wire().len(), KEY_LEN);
        prop_assert_eq!(Keys::parse(&k.to_wire()).unwrap(), k);
    }
}
