//! Whole RoCEv2 frames: Ethernet II, IPv4, UDP to port 4791, the transport
//! packet and its ICRC (InfiniBand Architecture Specification vol. 1,
//! Annex A17.4), and the ARP a frame port answers. Also the UDP-socket
//! form, where the kernel owns the IP and UDP headers and the datagram is
//! the transport packet and its ICRC.

use crate::icrc::icrc;
use crate::packet::{Packet, ParseError};
use crate::raw::{
    ArpOper, ETH_P_ARP, ETH_P_IP, IPPROTO_UDP, ROCE_UDP_SPORT_MIN, ROCE_V2_UDP_DPORT, arp_ipv4, eth_hdr,
    icrc as icrc_hdr, ipv4_hdr, udp_hdr,
};
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// A MAC address.
pub type Mac = [u8; 6];

/// The broadcast MAC address.
pub const BROADCAST: Mac = [0xff; 6];

/// Where a frame goes and comes from: the fields of its Ethernet, IPv4 and UDP headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addrs {
    /// Source MAC.
    pub src_mac: Mac,
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (the flow's entropy).
    pub src_port: u16,
    /// UDP destination port (4791 on a RoCEv2 wire).
    pub dst_port: u16,
}

/// Why a frame or datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than a header needs.
    Truncated {
        /// The header.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes there are.
        have: usize,
    },
    /// An EtherType other than IPv4 or ARP.
    EtherType(u16),
    /// Not version 4, options present, or a fragment.
    Ipv4(&'static str),
    /// The IPv4 header checksum does not verify.
    Ipv4Checksum {
        /// What the header says.
        found: u16,
        /// What its bytes sum to.
        computed: u16,
    },
    /// IPv4 carries another protocol than UDP.
    Protocol(u8),
    /// A UDP destination port other than 4791.
    NotRoce(u16),
    /// IPv4 or UDP lengths disagree with the frame.
    Length(&'static str),
    /// The ICRC does not verify.
    Icrc {
        /// The ICRC on the wire.
        found: u32,
        /// The ICRC of the bytes.
        computed: u32,
    },
    /// The transport packet itself is malformed.
    Packet(ParseError),
    /// An ARP packet that is not IPv4 over Ethernet.
    Arp,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated { what, need, have } => write!(f, "{what} needs {need} bytes, {have} left"),
            FrameError::EtherType(t) => write!(f, "EtherType {t:#06x} is neither IPv4 nor ARP"),
            FrameError::Ipv4(why) => write!(f, "IPv4: {why}"),
            FrameError::Ipv4Checksum { found, computed } => {
                write!(f, "IPv4 header checksum {found:#06x}, the header sums to {computed:#06x}")
            }
            FrameError::Protocol(p) => write!(f, "IPv4 protocol {p}, not UDP"),
            FrameError::NotRoce(p) => write!(f, "UDP port {p}, not RoCEv2's {ROCE_V2_UDP_DPORT}"),
            FrameError::Length(why) => write!(f, "length: {why}"),
            FrameError::Icrc { found, computed } => write!(f, "ICRC {found:#010x}, the packet's is {computed:#010x}"),
            FrameError::Packet(e) => write!(f, "{e}"),
            FrameError::Arp => write!(f, "ARP for another hardware or protocol type"),
        }
    }
}

impl From<ParseError> for FrameError {
    fn from(e: ParseError) -> Self {
        FrameError::Packet(e)
    }
}

fn take<T: FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
    what: &'static str,
    bytes: &mut &[u8],
) -> Result<T, FrameError> {
    crate::take(bytes).map_err(|(need, have)| FrameError::Truncated { what, need, have })
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub fn inet_checksum(bytes: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    // Carries folded back in: ones' complement arithmetic on 16-bit words.
    while sum > u32::from(u16::MAX) {
        sum = (sum & u32::from(u16::MAX)) + (sum >> u16::BITS);
    }
    !(sum as u16)
}

/// The UDP source port a RoCEv2 sender uses for the QP pair (`lqpn`,
/// `rqpn`): Linux's flow label (`rdma_calc_flow_label`) folded into
/// 14 bits above `ROCE_UDP_SPORT_MIN` (`rdma_flow_label_to_udp_sport`).
pub fn udp_sport(lqpn: u32, rqpn: u32) -> u16 {
    let mut fl = u64::from(lqpn) * u64::from(rqpn);
    // Linux's arithmetic, step for step: a 20-bit flow label, folded to 14 bits.
    fl ^= fl >> 20; // layout-ok: rdma_calc_flow_label
    fl ^= fl >> 40; // layout-ok: rdma_calc_flow_label
    let fl = (fl & 0xf_ffff) as u32; // layout-ok: IPv6's 20-bit flow label
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14); // layout-ok: rdma_flow_label_to_udp_sport
    (low | ROCE_UDP_SPORT_MIN) as u16
}

/// The IPv4 and UDP headers of a RoCEv2 packet of `transport_len` bytes
/// (BTH to pad) between `a`'s addresses: no options, DF, TTL 64, ID 0, UDP
/// checksum 0.
pub fn ip_udp_headers(a: &Addrs, transport_len: usize) -> ([u8; ipv4_hdr::SIZE], [u8; udp_hdr::SIZE]) {
    let udp_len = udp_hdr::SIZE + transport_len + icrc_hdr::SIZE;
    let mut ip = ipv4_hdr::new_zeroed();
    // 4 and 5 fit their 4 bits.
    let _ = ip.set_version(4);
    let _ = ip.set_ihl(5);
    ip.set_tot_len((ipv4_hdr::SIZE + udp_len) as u16)
        .set_df(true)
        .set_ttl(64)
        .set_protocol(IPPROTO_UDP as u8)
        .set_saddr(a.src_ip.to_bits())
        .set_daddr(a.dst_ip.to_bits());
    let sum = inet_checksum(ip.as_bytes());
    ip.set_check(sum);
    let mut udp = udp_hdr::new_zeroed();
    udp.set_source(a.src_port).set_dest(a.dst_port).set_len(udp_len as u16);
    let mut ipb = [0u8; ipv4_hdr::SIZE];
    ipb.copy_from_slice(ip.as_bytes());
    let mut udpb = [0u8; udp_hdr::SIZE];
    udpb.copy_from_slice(udp.as_bytes());
    (ipb, udpb)
}

/// A whole Ethernet frame carrying `p` from `a.src` to `a.dst`, ICRC included.
pub fn build(a: &Addrs, p: &Packet<'_>) -> Vec<u8> {
    let mut transport = Vec::with_capacity(p.wire_len() + 4);
    p.encode(&mut transport);
    build_encoded(a, &transport)
}

/// A whole Ethernet frame around an already encoded transport packet (BTH to pad).
pub fn build_encoded(a: &Addrs, transport: &[u8]) -> Vec<u8> {
    let (ip, udp) = ip_udp_headers(a, transport.len());
    let mut eth = eth_hdr::new_zeroed();
    eth.set_dst_mac(&a.dst_mac).set_src_mac(&a.src_mac).set_ether_type(ETH_P_IP as u16);
    let mut f = Vec::with_capacity(eth_hdr::SIZE + ip.len() + udp.len() + transport.len() + 4);
    f.extend_from_slice(eth.as_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f.extend_from_slice(transport);
    f.extend_from_slice(&icrc(&ip, &udp, transport).to_le_bytes());
    f
}

/// The datagram a UDP socket sends for `p`: the transport packet and an ICRC
/// computed over the IPv4 and UDP headers [`ip_udp_headers`] gives for `a`,
/// which are the headers a frame port would put on the wire and the ones a
/// capture of the datagram shows.
pub fn datagram(a: &Addrs, p: &Packet<'_>) -> Vec<u8> {
    let mut d = Vec::with_capacity(p.wire_len() + 4);
    p.encode(&mut d);
    let (ip, udp) = ip_udp_headers(a, d.len());
    let c = icrc(&ip, &udp, &d);
    d.extend_from_slice(&c.to_le_bytes());
    d
}

/// Check a received datagram's ICRC against the headers [`ip_udp_headers`]
/// gives for `a`, and parse it.
pub fn parse_datagram<'a>(a: &Addrs, d: &'a [u8]) -> Result<Packet<'a>, FrameError> {
    let (transport, tail) = split_icrc(d)?;
    let (ip, udp) = ip_udp_headers(a, transport.len());
    check_icrc(&ip, &udp, transport, tail)?;
    Ok(Packet::parse(transport)?)
}

/// The transport part (BTH to pad) and the ICRC after it.
fn split_icrc(d: &[u8]) -> Result<(&[u8], &[u8]), FrameError> {
    let n = d.len().checked_sub(icrc_hdr::SIZE).ok_or(FrameError::Truncated {
        what: "ICRC",
        need: icrc_hdr::SIZE,
        have: d.len(),
    })?;
    Ok(d.split_at(n))
}

fn check_icrc(ip: &[u8; 20], udp: &[u8; 8], transport: &[u8], tail: &[u8]) -> Result<(), FrameError> {
    let found = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = icrc(ip, udp, transport);
    if found != computed {
        return Err(FrameError::Icrc { found, computed });
    }
    Ok(())
}

/// An ARP packet (IPv4 over Ethernet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arp {
    /// Request or reply.
    pub oper: ArpOper,
    /// Sender MAC.
    pub sha: Mac,
    /// Sender IPv4 address.
    pub spa: Ipv4Addr,
    /// Target MAC.
    pub tha: Mac,
    /// Target IPv4 address.
    pub tpa: Ipv4Addr,
}

/// What a received Ethernet frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A RoCEv2 packet whose ICRC verified.
    Roce {
        /// Its addresses.
        addrs: Addrs,
        /// The transport packet.
        packet: Packet<'a>,
    },
    /// An ARP packet.
    Arp {
        /// Source MAC of the Ethernet header.
        src_mac: Mac,
        /// The ARP packet.
        arp: Arp,
    },
}

/// Parse an Ethernet frame (no FCS), checking the IPv4 checksum and the ICRC.
pub fn parse(frame: &[u8]) -> Result<Frame<'_>, FrameError> {
    let mut rest = frame;
    let eth: eth_hdr = take("Ethernet header", &mut rest)?;
    match u32::from(eth.ether_type()) {
        ETH_P_ARP => {
            let a: arp_ipv4 = take("ARP", &mut rest)?;
            if a.htype() != 1 || u32::from(a.ptype()) != ETH_P_IP || a.hlen() != 6 || a.plen() != 4 {
                return Err(FrameError::Arp);
            }
            let arp = Arp {
                oper: a.oper_code(),
                sha: *a.sha(),
                spa: Ipv4Addr::from_bits(a.spa()),
                tha: *a.tha(),
                tpa: Ipv4Addr::from_bits(a.tpa()),
            };
            return Ok(Frame::Arp { src_mac: *eth.src_mac(), arp });
        }
        ETH_P_IP => {}
        t => return Err(FrameError::EtherType(t as u16)),
    }
    let ip_start = rest;
    let ip: ipv4_hdr = take("IPv4 header", &mut rest)?;
    if ip.version() != 4 {
        return Err(FrameError::Ipv4("version is not 4"));
    }
    if ip.ihl() != 5 {
        return Err(FrameError::Ipv4("options present (IHL is not 5)"));
    }
    if ip.mf() || ip.fragment_offset() != 0 {
        return Err(FrameError::Ipv4("a fragment"));
    }
    let mut unsummed = ip;
    unsummed.set_check(0);
    let computed = inet_checksum(unsummed.as_bytes());
    if computed != ip.check() {
        return Err(FrameError::Ipv4Checksum { found: ip.check(), computed });
    }
    if u32::from(ip.protocol()) != IPPROTO_UDP {
        return Err(FrameError::Protocol(ip.protocol()));
    }
    let tot = ip.tot_len() as usize;
    if tot > ip_start.len() || tot < ipv4_hdr::SIZE {
        return Err(FrameError::Length("IPv4 total length runs past the frame or inside its header"));
    }
    // Ethernet pads short frames: the IP length says where the datagram ends.
    rest = &ip_start[ipv4_hdr::SIZE..tot];
    let udp: udp_hdr = take("UDP header", &mut rest)?;
    if u32::from(udp.dest()) != ROCE_V2_UDP_DPORT {
        return Err(FrameError::NotRoce(udp.dest()));
    }
    if udp.len() as usize != udp_hdr::SIZE + rest.len() {
        return Err(FrameError::Length("UDP length disagrees with the IPv4 total length"));
    }
    let (transport, tail) = split_icrc(rest)?;
    let mut ipb = [0u8; 20];
    ipb.copy_from_slice(ip.as_bytes());
    let mut udpb = [0u8; 8];
    udpb.copy_from_slice(udp.as_bytes());
    check_icrc(&ipb, &udpb, transport, tail)?;
    let packet = Packet::parse(transport)?;
    let addrs = Addrs {
        src_mac: *eth.src_mac(),
        dst_mac: *eth.dst_mac(),
        src_ip: Ipv4Addr::from_bits(ip.saddr()),
        dst_ip: Ipv4Addr::from_bits(ip.daddr()),
        src_port: udp.source(),
        dst_port: udp.dest(),
    };
    Ok(Frame::Roce { addrs, packet })
}

/// The frame answering an ARP request for `my_ip` from `my_mac`; `None`
/// when `req` is not such a request.
pub fn arp_reply(req: &Arp, my_mac: Mac, my_ip: Ipv4Addr) -> Option<Vec<u8>> {
    if req.oper != ArpOper::REQUEST || req.tpa != my_ip {
        return None;
    }
    let reply = Arp { oper: ArpOper::REPLY, sha: my_mac, spa: my_ip, tha: req.sha, tpa: req.spa };
    Some(arp_frame(&reply, req.sha))
}

/// An Ethernet frame carrying `arp` to `dst_mac`.
pub fn arp_frame(arp: &Arp, dst_mac: Mac) -> Vec<u8> {
    let mut eth = eth_hdr::new_zeroed();
    eth.set_dst_mac(&dst_mac).set_src_mac(&arp.sha).set_ether_type(ETH_P_ARP as u16);
    let mut a = arp_ipv4::new_zeroed();
    a.set_htype(1)
        .set_ptype(ETH_P_IP as u16)
        .set_hlen(6)
        .set_plen(4)
        .set_oper_code(arp.oper)
        .set_sha(&arp.sha)
        .set_spa(arp.spa.to_bits())
        .set_tha(&arp.tha)
        .set_tpa(arp.tpa.to_bits());
    let mut f = Vec::with_capacity(eth_hdr::SIZE + arp_ipv4::SIZE);
    f.extend_from_slice(eth.as_bytes());
    f.extend_from_slice(a.as_bytes());
    f
}
