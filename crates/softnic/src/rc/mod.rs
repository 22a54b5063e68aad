//! The RC transport on a RoCEv2 wire (InfiniBand Architecture
//! Specification vol. 1 ch. 9, Annex A17), between softnic instances or
//! with any RoCEv2 peer. A WQE's path:
//!
//! 1. the engine (`crate::hca`) finds the doorbell and fetches and decodes
//!    the WQE once;
//! 2. the requester ([`requester`]) turns it into packets, segmented at the
//!    path MTU, numbers them with PSNs, keeps it outstanding and
//!    retransmits on timeout, sequence NAK or RNR NAK;
//! 3. the port ([`port`]) puts each packet on the wire (a UDP socket, or
//!    whole Ethernet frames for a virtual machine's NIC), with its ICRC,
//!    records it in the pcap and applies the wire faults;
//! 4. at the far end the responder ([`responder`]) checks the PSN, moves
//!    the data into memory or a receive buffer, answers with ACK, NAK, read
//!    response or atomic acknowledge, and keeps the results duplicates need;
//! 5. back at the requester, the answer completes WQEs in order, each with
//!    the CQE a ConnectX writes.
//!
//! The masked atomics of mlx5 have no RoCEv2 wire form (IBA defines only
//! COMPARE_SWAP and FETCH_ADD); on a wire QP they complete with
//! LOCAL_QP_OP_ERR, the QP goes to ERR, and the trace says why.

pub mod port;
pub mod requester;
pub mod responder;

use std::net::Ipv4Addr;
use std::time::Duration;

/// What `modify_qp` sets on a QP that reaches its peer over a RoCEv2 wire
/// (the attributes `ibv_modify_qp` carries for RoCE: `ah_attr.grh.dgid`,
/// `dest_qp_num`, `rq_psn`, `sq_psn`, `path_mtu`, `timeout`, `retry_cnt`,
/// `rnr_retry`, `min_rnr_timer`, `max_rd_atomic`, `max_dest_rd_atomic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WireAttrs {
    /// The port ([`crate::SoftNic::attach_port`]) the peer is reached through.
    pub port: u32,
    /// Destination GID: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
    pub dgid: [u8; 16],
    /// The first PSN this QP expects as responder.
    pub rq_psn: u32,
    /// The first PSN this QP sends as requester.
    pub sq_psn: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub path_mtu: u32,
    /// Local ACK timeout: 4.096 µs × 2^timeout; 0 waits forever (IBA 9.7.6.1.3).
    pub timeout: u8,
    /// Retransmissions on ACK timeout before TRANSPORT_RETRY_EXC_ERR (0..=7).
    pub retry_cnt: u8,
    /// Retransmissions on RNR NAK before RNR_RETRY_EXC_ERR (0..=6; 7 retries forever).
    pub rnr_retry: u8,
    /// The RNR timer code this QP's responder asks requesters to wait (0..=31).
    pub min_rnr_timer: u8,
    /// RDMA READs and atomics this QP keeps outstanding as requester (1..=16).
    pub max_rd_atomic: u8,
    /// RDMA READs and atomics this QP remembers as responder, for duplicates (1..=16).
    pub max_dest_rd_atomic: u8,
    /// Packets this QP sends beyond the last one acknowledged (16..=8192;
    /// [`requester::WINDOW`] by default). Not an IBA attribute: a NIC's line
    /// rate and the fabric's flow control bound what it has in flight. A peer
    /// behind a short receive ring (a virtual machine's virtio-net queue, 256
    /// frames) drops a longer burst every time it is resent; such a link
    /// wants a window inside the ring.
    #[serde(default = "default_window")]
    pub send_window: u32,
}

fn default_window() -> u32 {
    requester::WINDOW
}

impl WireAttrs {
    /// Attributes with rdma-core's usual values (`ibv_rc_pingpong`'s and
    /// perftest's): MTU 1024, timeout 14 (67 ms), 7 retries, RNR retry 7,
    /// min RNR timer 12 (0.64 ms), 16 reads and atomics.
    pub fn new(port: u32, dest: Ipv4Addr) -> WireAttrs {
        WireAttrs {
            port,
            dgid: ipv4_mapped(dest),
            rq_psn: 0,
            sq_psn: 0,
            path_mtu: 1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            send_window: requester::WINDOW,
        }
    }

    /// The destination's IPv4 address, or why the GID is not IPv4-mapped.
    pub fn dest_ip(&self) -> Result<Ipv4Addr, String> {
        let g = self.dgid;
        match std::net::Ipv6Addr::from(g).to_ipv4_mapped() {
            Some(ip) => Ok(ip),
            None => Err(format!("destination GID {g:02x?} is not an IPv4-mapped address (::ffff:a.b.c.d)")),
        }
    }

    /// Why these attributes are refused, if they are.
    pub fn check(&self) -> Result<(), String> {
        self.dest_ip()?;
        if !matches!(self.path_mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(format!("path_mtu {} is not 256, 512, 1024, 2048 or 4096", self.path_mtu));
        }
        let fits = |what: &str, v: u8, max: u8| {
            if v > max { Err(format!("{what} {v} exceeds {max}")) } else { Ok(()) }
        };
        fits("timeout", self.timeout, 31)?;
        fits("retry_cnt", self.retry_cnt, 7)?;
        fits("rnr_retry", self.rnr_retry, 7)?;
        fits("min_rnr_timer", self.min_rnr_timer, 31)?;
        for (what, v) in [("max_rd_atomic", self.max_rd_atomic), ("max_dest_rd_atomic", self.max_dest_rd_atomic)] {
            if !(1..=16).contains(&v) {
                return Err(format!("{what} {v} is not in 1..=16"));
            }
        }
        if !(16..=8192).contains(&self.send_window) {
            return Err(format!("send_window {} is not in 16..=8192", self.send_window));
        }
        if self.rq_psn > marrow_roce::raw::BTH_PSN_MASK || self.sq_psn > marrow_roce::raw::BTH_PSN_MASK {
            return Err("PSNs are 24 bits".into());
        }
        Ok(())
    }

    /// The local ACK timeout, `None` for "wait forever".
    pub fn ack_timeout(&self) -> Option<Duration> {
        (self.timeout != 0).then(|| Duration::from_nanos(4096 << self.timeout))
    }
}

/// `a.b.c.d` as the IPv4-mapped GID `::ffff:a.b.c.d`.
pub fn ipv4_mapped(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

/// The time an RNR NAK's timer code asks for (IBA 9.7.5.2.8 Table 45;
/// Linux rxe's `rnrnak_usec`).
pub fn rnr_timer(code: u8) -> Duration {
    const MICROS: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10_240,
        15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
    ];
    Duration::from_micros(MICROS[usize::from(code) % MICROS.len()])
}

/// Where this end of a wire QP sits and what it is connected to.
#[derive(Clone, Copy, Debug)]
pub struct Path {
    /// The attributes it was given.
    pub attrs: WireAttrs,
    /// The peer's IPv4 address (from the GID).
    pub dest_ip: Ipv4Addr,
    /// The peer QP.
    pub dest_qpn: u32,
}

/// A QP's wire state: its path and both halves of the transport.
#[derive(Debug)]
pub struct WireQp {
    /// Where it goes.
    pub path: Path,
    /// The requester half.
    pub req: requester::Requester,
    /// The responder half.
    pub resp: responder::Responder,
}

impl WireQp {
    /// A QP connected at INIT→RTR with `attrs` to `dest_qpn`.
    pub fn new(attrs: WireAttrs, dest_qpn: u32) -> Result<WireQp, String> {
        attrs.check()?;
        let dest_ip = attrs.dest_ip()?;
        Ok(WireQp {
            path: Path { attrs, dest_ip, dest_qpn },
            req: requester::Requester::new(&attrs),
            resp: responder::Responder::new(&attrs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_follow_the_spec_tables() {
        assert_eq!(rnr_timer(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer(12), Duration::from_micros(640));
        assert_eq!(rnr_timer(31), Duration::from_micros(491_520));
        let mut a = WireAttrs::new(0, Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(a.ack_timeout(), Some(Duration::from_nanos(4096 << 14)));
        a.timeout = 0;
        assert_eq!(a.ack_timeout(), None);
    }

    #[test]
    fn attributes_out_of_range_are_refused_by_name() {
        let good = WireAttrs::new(0, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(good.check(), Ok(()));
        assert_eq!(good.dest_ip(), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        let e = WireAttrs { path_mtu: 1500, ..good }.check().unwrap_err();
        assert!(e.contains("path_mtu 1500"), "{e}");
        let e = WireAttrs { dgid: [0xfe; 16], ..good }.check().unwrap_err();
        assert!(e.contains("IPv4-mapped"), "{e}");
        let e = WireAttrs { max_rd_atomic: 0, ..good }.check().unwrap_err();
        assert!(e.contains("max_rd_atomic 0"), "{e}");
    }
}
