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

use crate::raw::{bth, ipv4_hdr, udp_hdr};

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = table();

/// The CRC register after `bytes`, from register value `crc`.
fn update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// CRC-32 (IEEE 802.3) of `bytes`, as zlib's `crc32` computes it.
pub fn crc32(bytes: &[u8]) -> u32 {
    !update(!0, bytes)
}

/// The ICRC of a packet whose IPv4 header is `ip`, UDP header `udp`, and
/// whose transport part from the BTH to the end of the pad is `transport`
/// (at least the 12 bytes of a BTH; shorter input is hashed as it is).
pub fn icrc(ip: &[u8; ipv4_hdr::SIZE], udp: &[u8; udp_hdr::SIZE], transport: &[u8]) -> u32 {
    let mut ip = *ip;
    ip[1] = 0xff; // tos
    ip[8] = 0xff; // ttl
    ip[10..12].copy_from_slice(&[0xff, 0xff]); // check
    let mut udp = *udp;
    udp[6..8].copy_from_slice(&[0xff, 0xff]); // check
    let split = transport.len().min(bth::SIZE);
    let mut head = [0u8; bth::SIZE];
    head[..split].copy_from_slice(&transport[..split]);
    if split > 4 {
        head[4] = 0xff; // FECN, BECN, resv6
    }
    let mut crc = update(!0, &[0xff; 8]);
    crc = update(crc, &ip);
    crc = update(crc, &udp);
    crc = update(crc, &head[..split]);
    crc = update(crc, &transport[split..]);
    !crc
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
        // rxe_icrc.c starts from 0xdebb20e3: the register after 8 bytes of ones.
        assert_eq!(update(!0, &[0xff; 8]), 0xdebb_20e3);
    }
}
