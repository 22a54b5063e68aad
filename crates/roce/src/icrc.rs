//! The invariant CRC of a RoCEv2 packet (InfiniBand Architecture
//! Specification vol. 1, Annex A17.8).
//!
//! CRC-32 with the IEEE 802.3 polynomial, reflected, initial value all ones,
//! final complement (the same CRC as an Ethernet FCS), over:
//! 1. 8 bytes of ones, standing for the LRH a RoCEv2 packet does not have;
//! 2. the IPv4 header with `tos`, `ttl` and `check` set to ones;
//! 3. the UDP header with `check` set to ones;
//! 4. the BTH with its byte 4 (FECN, BECN, resv6) set to ones;
//! 5. the rest of the transport headers, the payload and its pad.
//!
//! It goes on the wire least significant byte first. Linux's rxe computes the
//! same (`rxe_icrc.c`: seed `0xdebb20e3` is the CRC register after step 1).
//! The CRC itself is `crc32fast`'s (PCLMULQDQ where the CPU has it).

use crate::raw::{bth, ipv4_hdr, udp_hdr};

/// CRC-32 (IEEE 802.3) of `bytes`, as zlib's `crc32` computes it.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The ICRC of a packet whose IPv4 header is `ip`, UDP header `udp`, and
/// whose transport part from the BTH to the end of the pad is `transport`
/// (at least the 12 bytes of a BTH; shorter input is hashed as it is).
pub fn icrc(ip: &[u8; ipv4_hdr::SIZE], udp: &[u8; udp_hdr::SIZE], transport: &[u8]) -> u32 {
    // The fields a router may change are hashed as all ones.
    let mut ip = *ip;
    ip[ipv4_hdr::TOS_OFF] = !0;
    ip[ipv4_hdr::TTL_OFF] = !0;
    ip[ipv4_hdr::CHECK_OFF..][..2].fill(!0);
    let mut udp = *udp;
    udp[udp_hdr::CHECK_OFF..][..2].fill(!0);
    let split = transport.len().min(bth::SIZE);
    let mut head = [0u8; bth::SIZE];
    head[..split].copy_from_slice(&transport[..split]);
    // FECN, BECN and resv6: the top byte of the BTH's QPN word.
    if split > bth::QPN_OFF {
        head[bth::QPN_OFF] = !0;
    }
    let mut h = crc32fast::Hasher::new();
    // In place of the LRH that RoCEv2 does not carry: eight bytes of ones.
    h.update(&[!0u8; 8]);
    h.update(&ip);
    h.update(&udp);
    h.update(&head[..split]);
    h.update(&transport[split..]);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        // The CRC-32 catalogue's check value for "123456789".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn the_lrh_placeholder_gives_rxes_seed() {
        // rxe_icrc.c starts from 0xdebb20e3: the register (not complemented)
        // after 8 bytes of ones, which is the complement of their CRC.
        assert_eq!(!crc32(&[0xff; 8]), 0xdebb_20e3);
    }
}
