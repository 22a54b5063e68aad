//! Any bytes in: a packet or a counted drop out, never a panic; and every
//! packet built parses back to itself.

use marrow_roce::frame::{self, Addrs};
use marrow_roce::packet::{Aeth, AtomicEth, Packet, Reth};
use marrow_roce::raw::{AethType, BthOpcode};
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn addrs() -> Addrs {
    Addrs {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::new(10, 0, 0, 2),
        src_port: 0xc123,
        dst_port: 4791,
    }
}

fn any_packet(payload: &[u8]) -> impl Strategy<Value = Packet<'_>> {
    let ops: Vec<BthOpcode> =
        BthOpcode::ALL.iter().copied().filter(|&o| marrow_roce::opcode::describe(o).is_some()).collect();
    (
        proptest::sample::select(ops),
        any::<bool>(),
        any::<u16>(),
        0u32..1 << 24,
        any::<bool>(),
        0u32..1 << 24,
        any::<(u64, u32, u32, u64, u64)>(),
        (0u8..4, 0u8..32, 0u32..1 << 24, any::<u32>()),
        0..=payload.len(),
    )
        .prop_map(move |(opcode, se, p_key, dest_qp, ack_req, psn, (va, rkey, len, a, b), (t, v, msn, imm), n)| {
            let l = marrow_roce::opcode::describe(opcode).unwrap().2;
            Packet {
                opcode,
                se,
                p_key,
                dest_qp,
                ack_req,
                psn,
                reth: l.reth.then_some(Reth { va, rkey, len }),
                atomic: l.atmeth.then_some(AtomicEth { va, rkey, swap_add: a, comp: b }),
                aeth: l.aeth.then_some(Aeth { ack_type: AethType(t), value: v, msn }),
                atomic_ack: l.atmack.then_some(a),
                imm: l.immdt.then_some(imm),
                payload: if l.payload { &payload[..n] } else { &[] },
            }
        })
}

static PAYLOAD: [u8; 97] = {
    let mut p = [0u8; 97];
    let mut i = 0;
    while i < 97 {
        p[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    p
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn transport_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Packet::parse(&bytes);
    }

    #[test]
    fn frame_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = frame::parse(&bytes);
        let _ = frame::parse_datagram(&addrs(), &bytes);
    }

    #[test]
    fn mutated_frames_never_panic(p in any_packet(&PAYLOAD), at in any::<usize>(), to in any::<u8>()) {
        let mut f = frame::build(&addrs(), &p);
        let i = at % f.len();
        f[i] = to;
        let _ = frame::parse(&f);
        f.truncate(i);
        let _ = frame::parse(&f);
    }

    #[test]
    fn built_frames_parse_back(p in any_packet(&PAYLOAD)) {
        let f = frame::build(&addrs(), &p);
        match frame::parse(&f) {
            Ok(frame::Frame::Roce { addrs: a, packet }) => {
                prop_assert_eq!(a, addrs());
                prop_assert_eq!(packet, p);
            }
            other => prop_assert!(false, "{:?}", other),
        }
        let d = frame::datagram(&addrs(), &p);
        prop_assert_eq!(frame::parse_datagram(&addrs(), &d), Ok(p));
    }

    #[test]
    fn one_flipped_bit_fails_the_icrc(p in any_packet(&PAYLOAD), bit in any::<usize>()) {
        let mut d = frame::datagram(&addrs(), &p);
        // Flip any bit of the transport part except the masked BTH byte 4.
        let n = d.len() * 8;
        let mut b = bit % n;
        if b / 8 == 4 { b += 8; }
        let at = (b / 8) % d.len();
        d[at] ^= 1 << (b % 8);
        prop_assert!(frame::parse_datagram(&addrs(), &d).is_err());
    }
}
