//! perftest's messages on its TCP socket: the version, the MTU, the QP
//! keys, the report values, each a fixed-size message each way.

use super::{CYCLE, KEY_LEN, VERSION};
use crate::InteropError;
use marrow_roce::raw::{BTH_PSN_MASK, bth};
use std::io::{Read, Write};
use std::net::TcpStream;

/// One side's keys (`struct pingpong_dest` in perftest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keys {
    /// LID: 0 on RoCE.
    pub lid: u16,
    /// RDMA READs and atomics this side accepts outstanding.
    pub out_reads: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// rkey of the buffer.
    pub rkey: u32,
    /// The buffer's address for the peer.
    pub vaddr: u64,
    /// GID.
    pub gid: [u8; 16],
    /// SRQ number (0: none).
    pub srqn: u32,
}

impl Keys {
    /// The 108-byte message.
    pub fn to_wire(&self) -> [u8; KEY_LEN] {
        let mut t = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & bth::DEST_QP_MASK,
            self.psn & BTH_PSN_MASK,
            self.rkey,
            self.vaddr
        );
        for b in self.gid {
            t.push_str(&format!("{b:02x}:"));
        }
        t.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_LEN];
        out[..t.len()].copy_from_slice(t.as_bytes());
        out
    }

    /// Parse a key message: 23 hex fields, each ended by `:`.
    pub fn parse(msg: &[u8]) -> Result<Keys, InteropError> {
        let bad =
            |why: &str| InteropError::Exchange(format!("perftest keys: {why} in {:?}", String::from_utf8_lossy(msg)));
        let end = msg.iter().position(|&b| b == 0).ok_or_else(|| bad("no terminating NUL"))?;
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| bad("not ASCII"))?;
        let f: Vec<&str> = text.split(':').collect();
        if f.len() != 24 || !f[23].is_empty() {
            return Err(bad("not 23 fields each ended by ':'"));
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad(&format!("field {s:?} is not hex")));
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::try_from(hex(f[6 + i])?).map_err(|_| bad("a GID byte exceeds 0xff"))?;
        }
        Ok(Keys {
            lid: hex(f[0])? as u16,
            out_reads: hex(f[1])? as u16,
            qpn: hex(f[2])? as u32,
            psn: hex(f[3])? as u32,
            rkey: hex(f[4])? as u32,
            vaddr: hex(f[5])?,
            gid,
            srqn: hex(f[22])? as u32,
        })
    }
}

pub(super) fn version_msg() -> [u8; 16] {
    let mut m = [0u8; 16];
    m[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    m
}

/// The `ibv_mtu` enum value of an MTU in bytes (1 = 256 … 5 = 4096).
pub fn mtu_enum(mtu: u32) -> u32 {
    match mtu {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    }
}

/// The socket, which end writes first, and the peer's version when the
/// connection attempt already exchanged it.
pub(super) struct Conn {
    pub(super) sock: TcpStream,
    pub(super) client: bool,
    pub(super) version: Option<[u8; 16]>,
}

impl Conn {
    pub(super) fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> Result<(), InteropError> {
        let e = |dir: &'static str| {
            let what = what.to_string();
            move |err: std::io::Error| InteropError::Exchange(format!("{dir} {what}: {err}"))
        };
        if self.client {
            self.sock.write_all(mine).map_err(e("writing"))?;
            self.sock.read_exact(theirs).map_err(e("reading"))?;
        } else {
            self.sock.read_exact(theirs).map_err(e("reading"))?;
            self.sock.write_all(mine).map_err(e("writing"))?;
        }
        Ok(())
    }

    pub(super) fn keys(&mut self, k: &Keys, what: &str) -> Result<Keys, InteropError> {
        let mut m = [0u8; KEY_LEN];
        self.xchg(&k.to_wire(), &mut m, what)?;
        Keys::parse(&m)
    }

    /// Versions, system data and MTU; returns the MTU both use.
    pub(super) fn preamble(&mut self, mtu: u32) -> Result<u32, InteropError> {
        let v = match self.version {
            Some(v) => v,
            None => {
                let mut v = [0u8; 16];
                self.xchg(&version_msg(), &mut v, "the version")?;
                v
            }
        };
        let theirs = String::from_utf8_lossy(&v[..v.iter().position(|&b| b == 0).unwrap_or(16)]).to_string();
        if theirs.parse::<f64>().map_or(true, |x| x < 5.70) {
            return Err(InteropError::Exchange(format!("perftest version {theirs:?}: marrow speaks 5.70 and later")));
        }
        let mut b4 = [0u8; 4];
        self.xchg(&(CYCLE as u32).to_be_bytes(), &mut b4, "the cycle buffer size")?;
        if u32::from_be_bytes(b4) as usize > CYCLE {
            return Err(InteropError::Exchange(format!("the peer's cycle buffer is {} bytes", u32::from_be_bytes(b4))));
        }
        self.xchg(&64u32.to_be_bytes(), &mut b4, "the cache line size")?;
        let mut m = [0u8; 2];
        let want = mtu_enum(mtu);
        self.xchg(&[b'0' + want as u8, 0], &mut m, "the MTU")?;
        let theirs = u32::from(m[0].wrapping_sub(b'0'));
        let got = if (1..=5).contains(&theirs) { want.min(theirs) } else { want };
        Ok(128 << got)
    }

    pub(super) fn reports(&mut self, mine: [u64; 5]) -> Result<[u64; 5], InteropError> {
        let mut out = [0u64; 5];
        for (i, v) in mine.iter().enumerate() {
            let mut b = [0u8; 8];
            self.xchg(&v.to_be_bytes(), &mut b, "a report value")?;
            out[i] = u64::from_be_bytes(b);
        }
        Ok(out)
    }

    pub(super) fn close(&mut self, k: &Keys) -> Result<(), InteropError> {
        self.keys(k, "the closing keys")?;
        self.sock.write_all(b"done\0").map_err(InteropError::io("writing \"done\""))?;
        // Read the peer's "done" before closing, so ours is not reset away.
        let mut d = [0u8; 5];
        let _ = self.sock.read_exact(&mut d);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_perftest_writes_them() {
        // What ib_write_bw on rxe printed in the guest as its local address
        // (QPN 0x0018, PSN 0x7bcd10, RKey 0x00093c, VAddr 0x007f05ddf5b000,
        // GID ::ffff:10.77.0.2), in KEY_PRINT_FMT_GID.
        let text = "0000:0080:000018:7bcd10:0000093c:00007f05ddf5b000:\
                    00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:";
        let mut m = [0u8; KEY_LEN];
        m[..text.len()].copy_from_slice(text.as_bytes());
        assert_eq!(text.len() + 1, KEY_LEN);
        let k = Keys::parse(&m).unwrap();
        assert_eq!((k.qpn, k.psn, k.rkey, k.vaddr, k.out_reads), (0x18, 0x7bcd10, 0x93c, 0x7f05_ddf5_b000, 0x80));
        assert_eq!(k.gid[10..], [0xff, 0xff, 10, 77, 0, 2]);
        assert_eq!(k.to_wire(), m);
        let mut short = m;
        short[text.len() - 1] = 0;
        assert!(Keys::parse(&short).is_err(), "the SRQ field must end with ':'");
        assert!(Keys::parse(&[b'0'; KEY_LEN]).is_err());
    }

    #[test]
    fn mtus_follow_perftest() {
        assert_eq!([256, 512, 1024, 2048, 4096].map(mtu_enum), [1, 2, 3, 4, 5]);
    }
}
