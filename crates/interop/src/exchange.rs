//! The connection exchange of rdma-core's pingpong examples
//! (`libibverbs/examples/rc_pingpong.c`, `pp_client_exch_dest` and
//! `pp_server_exch_dest`): each side writes one fixed-size message,
//! `printf("%04x:%06x:%06x:%s", lid, qpn, psn, gid)` with its terminating
//! NUL, 52 bytes in all. The GID is 32 hex digits: `gid_to_wire_gid` prints
//! each of its four 32-bit words after `htobe32`, which is the GID's 16
//! bytes in memory order. After the server's answer the client writes
//! `"done"` with its NUL.

use crate::InteropError;
use marrow_roce::raw::{BTH_PSN_MASK, bth};

/// Bytes of one message: `sizeof "0000:000000:000000:" + 32 hex digits`, NUL included.
pub const MSG_LEN: usize = 52;

/// The client's closing word, NUL included (`sizeof "done"`).
pub const DONE: &[u8; 5] = b"done\0";

/// One side's address as the examples exchange it (`struct pingpong_dest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// LID: 0 on RoCE.
    pub lid: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN this side sends (24 bits).
    pub psn: u32,
    /// GID: on RoCEv2 over IPv4, `::ffff:a.b.c.d`.
    pub gid: [u8; 16],
}

impl Dest {
    /// The 52-byte message.
    pub fn to_wire(&self) -> [u8; MSG_LEN] {
        let gid = hex::encode(self.gid);
        let text =
            format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn & bth::DEST_QP_MASK, self.psn & BTH_PSN_MASK);
        let mut out = [0u8; MSG_LEN];
        out[..text.len()].copy_from_slice(text.as_bytes());
        out
    }

    /// Parse a message as `sscanf("%x:%x:%x:%s")` reads it, strictly: the
    /// tool always writes the widths above.
    pub fn parse(msg: &[u8]) -> Result<Dest, InteropError> {
        let bad = |why: &str| InteropError::Exchange(format!("{why} in {:?}", String::from_utf8_lossy(msg)));
        let end = msg.iter().position(|&b| b == 0).ok_or_else(|| bad("no terminating NUL"))?;
        // ASCII only: the GID is sliced two bytes at a time below.
        let text = std::str::from_utf8(&msg[..end]).ok().filter(|t| t.is_ascii()).ok_or_else(|| bad("not ASCII"))?;
        let parts: Vec<&str> = text.split(':').collect();
        let [lid, qpn, psn, gid] = parts[..] else { return Err(bad("not LID:QPN:PSN:GID")) };
        let hex = |s: &str, digits: usize, what: &str| {
            if s.len() != digits {
                return Err(bad(&format!("{what} is not {digits} hex digits")));
            }
            u32::from_str_radix(s, 16).map_err(|_| bad(&format!("{what} is not hex")))
        };
        let mut g = [0u8; 16];
        if gid.len() != 32 {
            return Err(bad("GID is not 32 hex digits"));
        }
        hex::decode_to_slice(gid, &mut g).map_err(|_| bad("GID is not hex"))?;
        Ok(Dest { lid: hex(lid, 4, "LID")? as u16, qpn: hex(qpn, 6, "QPN")?, psn: hex(psn, 6, "PSN")?, gid: g })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_the_examples_write_them() {
        // What rc_pingpong on rxe with GID index 1 (::ffff:10.77.0.2) sends.
        let mut m = *b"0000:000011:3e1a2b:00000000000000000000ffff0a4d0002\0";
        let d = Dest::parse(&m).unwrap();
        assert_eq!(d.qpn, 0x11);
        assert_eq!(d.psn, 0x3e1a2b);
        assert_eq!(d.gid[10..], [0xff, 0xff, 10, 77, 0, 2]);
        assert_eq!(d.to_wire(), m);
        m[4] = b'-';
        assert!(Dest::parse(&m).is_err());
        assert!(Dest::parse(b"0000:11:22:33\0").is_err());
        assert!(Dest::parse(&[b'0'; 52]).unwrap_err().to_string().contains("NUL"));
    }
}
