//! A port: where a softnic's RoCEv2 packets meet the wire.
//!
//! - [`PortKind::Udp`]: the transport packet and its ICRC in one UDP
//!   datagram, from this port's socket to the peer's IP at the same UDP
//!   port. This links softnic processes on one machine (on loopback
//!   addresses, 127.0.0.0/8) or on several. The kernel owns the datagram's
//!   IP and UDP headers; the ICRC, and the frames the pcap shows, use the
//!   headers the packet has on a RoCEv2 wire: the sockets' IP addresses,
//!   source port from the QP pair's flow label, destination port 4791,
//!   ID 0, DF, TTL 64.
//! - [`PortKind::Frames`]: whole Ethernet frames (Ethernet II, IPv4, UDP
//!   4791, transport, ICRC), each one UDP datagram to and from one peer
//!   socket: the form QEMU's `-netdev dgram` carries a virtual NIC's frames
//!   in, so a virtual machine's virtio-net NIC is the other end of the
//!   cable. ARP requests for this port's IP are answered, and peers' MACs
//!   learnt from what they send.
//!
//! One thread sends (applying the seeded [`WireFaults`]), one receives;
//! both write every frame to the pcap, if one is asked for, and count
//! what they drop in [`PortStats`].

use marrow_roce::frame::{self, Addrs, Arp, Frame, Mac};
use marrow_roce::packet::Packet;
use marrow_roce::raw::{ArpOper, ROCE_V2_UDP_DPORT};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a port reaches the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// RoCEv2 datagrams on a UDP socket bound to `bind`; peers are reached
    /// at their IP and the same UDP port (4791 on a real network).
    Udp {
        /// The local address and port.
        bind: SocketAddrV4,
    },
    /// Ethernet frames in UDP datagrams exchanged with one `peer` socket
    /// (QEMU `-netdev dgram`); this port is `ip` at `mac` on that Ethernet.
    Frames {
        /// The local socket.
        bind: SocketAddrV4,
        /// The peer's socket (QEMU's `local` address).
        peer: SocketAddrV4,
        /// This port's MAC.
        mac: Mac,
        /// This port's IPv4 address.
        ip: Ipv4Addr,
    },
}

impl PortKind {
    /// This port's IPv4 address.
    pub fn ip(&self) -> Ipv4Addr {
        match self {
            PortKind::Udp { bind } => *bind.ip(),
            PortKind::Frames { ip, .. } => *ip,
        }
    }
}

/// Faults a port applies to what it sends, each at a rate in [0, 1], from
/// a seeded generator so a run can be repeated.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WireFaults {
    /// Seed of the generator.
    pub seed: u64,
    /// Packets not sent.
    pub drop: f64,
    /// Packets sent twice.
    pub duplicate: f64,
    /// Packets held back and sent after the next one.
    pub reorder: f64,
    /// Packets sent `delay` late.
    pub delay_rate: f64,
    /// How late a delayed packet goes.
    pub delay: Duration,
    /// Packets sent with one bit of the transport flipped (a bad ICRC).
    pub corrupt: f64,
    /// Drop the next this many packets, then go on (a one-shot loss).
    pub drop_next: u32,
}

impl WireFaults {
    /// Whether no fault is armed: every packet goes out as it is, in order.
    pub fn is_clean(&self) -> bool {
        self.drop == 0.0
            && self.duplicate == 0.0
            && self.reorder == 0.0
            && self.delay_rate == 0.0
            && self.corrupt == 0.0
            && self.drop_next == 0
    }
}

/// What a port did, counted.
#[derive(Debug, Default)]
pub struct PortStats {
    /// Frames sent (each copy of a duplicate counts).
    pub tx: AtomicU64,
    /// Frames received.
    pub rx: AtomicU64,
    /// Received and dropped: the ICRC did not verify.
    pub rx_bad_icrc: AtomicU64,
    /// Received and dropped: not a RoCEv2 packet this model accepts.
    pub rx_malformed: AtomicU64,
    /// Received and ignored: well-formed traffic that is not RoCEv2 or ARP
    /// (a guest's IPv6 neighbour discovery, other EtherTypes, protocols or
    /// UDP ports).
    pub rx_not_roce: AtomicU64,
    /// Received and dropped: no QP of this port is connected to the sender.
    pub rx_no_qp: AtomicU64,
    /// ARP replies sent.
    pub arp_replies: AtomicU64,
    /// Sends the socket refused.
    pub tx_errors: AtomicU64,
    /// Faults applied: dropped, duplicated, reordered, delayed, corrupted.
    pub faults: [AtomicU64; 5],
}

impl PortStats {
    /// A plain copy of the counters.
    pub fn snapshot(&self) -> PortCounters {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PortCounters {
            tx: g(&self.tx),
            rx: g(&self.rx),
            rx_bad_icrc: g(&self.rx_bad_icrc),
            rx_malformed: g(&self.rx_malformed),
            rx_not_roce: g(&self.rx_not_roce),
            rx_no_qp: g(&self.rx_no_qp),
            arp_replies: g(&self.arp_replies),
            tx_errors: g(&self.tx_errors),
            dropped: g(&self.faults[0]),
            duplicated: g(&self.faults[1]),
            reordered: g(&self.faults[2]),
            delayed: g(&self.faults[3]),
            corrupted: g(&self.faults[4]),
        }
    }
}

/// [`PortStats`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[allow(missing_docs)]
pub struct PortCounters {
    pub tx: u64,
    pub rx: u64,
    pub rx_bad_icrc: u64,
    pub rx_malformed: u64,
    pub rx_not_roce: u64,
    pub rx_no_qp: u64,
    pub arp_replies: u64,
    pub tx_errors: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub delayed: u64,
    pub corrupted: u64,
}

/// One packet for the wire.
#[derive(Debug)]
pub struct Outgoing {
    /// The peer's IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// The sending QP (for the flow label).
    pub src_qpn: u32,
    /// The receiving QP.
    pub dst_qpn: u32,
    /// BTH to pad.
    pub transport: Vec<u8>,
}

/// A pcap file, written frame by frame (LINKTYPE_ETHERNET, nanoseconds).
#[derive(Debug)]
pub struct Pcap(Mutex<PcapWriter<File>>);

impl Pcap {
    /// Create (truncate) `path`.
    pub fn create(path: &std::path::Path) -> std::io::Result<Arc<Pcap>> {
        let f = File::create(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let header = PcapHeader {
            datalink: pcap_file::DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        // Unbuffered: a reader of the file sees every frame as soon as it is recorded.
        let w = PcapWriter::with_header(f, header).map_err(std::io::Error::other)?;
        Ok(Arc::new(Pcap(Mutex::new(w))))
    }

    /// Record one frame, stamped now.
    pub fn record(&self, frame: &[u8]) {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A capture that cannot be written loses frames, not the traffic.
        let _ = w.write_packet(&PcapPacket::new(t, frame.len() as u32, frame));
    }
}

/// What a port needs besides its kind.
#[derive(Clone, Debug, Default)]
pub struct PortOptions {
    /// Write every frame sent and received here.
    pub pcap: Option<PathBuf>,
    /// Faults on what this port sends.
    pub faults: WireFaults,
}

/// A MAC's first two bytes here: unicast, locally administered (IEEE 802's
/// U/L bit set), so no vendor's address is taken.
const LOCAL_MAC_PREFIX: [u8; 2] = [0x02, 0x00];

/// The MAC a UDP port's frames show in a capture: locally administered,
/// from the IPv4 address.
pub fn udp_mac(ip: Ipv4Addr) -> Mac {
    let o = ip.octets();
    [LOCAL_MAC_PREFIX[0], LOCAL_MAC_PREFIX[1], o[0], o[1], o[2], o[3]]
}

/// The frame's addresses for a packet from `src_qpn` at `src_ip` to `dst_qpn` at `dst_ip`.
pub fn addrs(src_ip: Ipv4Addr, src_mac: Mac, dst_ip: Ipv4Addr, dst_mac: Mac, src_qpn: u32, dst_qpn: u32) -> Addrs {
    Addrs {
        src_mac,
        dst_mac,
        src_ip,
        dst_ip,
        src_port: frame::udp_sport(src_qpn, dst_qpn),
        dst_port: ROCE_V2_UDP_DPORT as u16,
    }
}

/// The model side of a port: what the HCA holds to send.
#[derive(Debug)]
pub struct PortHandle {
    /// How it reaches the wire.
    pub kind: PortKind,
    /// Packets for the send thread.
    pub tx: Sender<Outgoing>,
    /// Its counters.
    pub stats: Arc<PortStats>,
    /// The faults its send thread applies; may change while it runs.
    pub faults: Arc<Mutex<WireFaults>>,
    /// The sending side, shared with the send thread.
    pub sender: Arc<PortSender>,
}

impl PortHandle {
    /// Put `o` on the wire. With no fault armed and nothing waiting in the
    /// send thread, the caller sends it at once: a packet then costs no
    /// hand-off between threads (on a 2-core machine, the switch costs as
    /// much as the send). Otherwise the send thread takes it, behind what
    /// it already holds, so packets never overtake each other.
    ///
    /// Returns the packet's buffer when it went out here, for reuse.
    pub fn send(&self, o: Outgoing) -> Option<Vec<u8>> {
        let direct = self.sender.pending.load(Ordering::Acquire) == 0
            && self.faults.lock().unwrap_or_else(|p| p.into_inner()).is_clean();
        if direct {
            let (bytes, shown, to, _) = self.sender.encode(o)?;
            self.sender.put(&bytes, &shown, to);
            return Some(bytes);
        }
        self.sender.pending.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(o).is_err() {
            self.sender.pending.fetch_sub(1, Ordering::AcqRel);
        }
        None
    }
}

/// The sending side of a port: its send thread, and the callers of
/// [`PortHandle::send`] when no fault is armed.
#[allow(missing_docs)]
pub struct PortSender {
    pub kind: PortKind,
    pub socket: UdpSocket,
    pub pcap: Option<Arc<Pcap>>,
    pub stats: Arc<PortStats>,
    pub faults: Arc<Mutex<WireFaults>>,
    pub macs: Arc<Mutex<HashMap<Ipv4Addr, Mac>>>,
    pub stop: Arc<AtomicBool>,
    /// Packets given to the send thread and not yet sent or dropped
    /// (held back and delayed ones included).
    pub pending: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for PortSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortSender")
            .field("kind", &self.kind)
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[derive(PartialEq, Eq)]
struct Delayed {
    due: Instant,
    seq: u64,
    bytes: Vec<u8>,
    shown: Vec<u8>,
    to: SocketAddr,
}

impl Ord for Delayed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Earliest first out of a max-heap.
        o.due.cmp(&self.due).then(o.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Delayed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl PortSender {
    /// The bytes to put on the socket for `o` and the frame a capture shows;
    /// `None` when a frame port does not know the peer's MAC yet (an ARP
    /// request goes out instead; the requester's timer sends again).
    fn encode(&self, o: Outgoing) -> Option<(Vec<u8>, Vec<u8>, SocketAddr, usize)> {
        match self.kind {
            PortKind::Udp { bind } => {
                let a = addrs(*bind.ip(), udp_mac(*bind.ip()), o.dst_ip, udp_mac(o.dst_ip), o.src_qpn, o.dst_qpn);
                // The frame a capture shows is built only when there is a capture.
                let shown = if self.pcap.is_some() { frame::build_encoded(&a, &o.transport) } else { Vec::new() };
                let (ip, udp) = frame::ip_udp_headers(&a, o.transport.len());
                let mut d = o.transport;
                let c = marrow_roce::icrc::icrc(&ip, &udp, &d);
                d.extend_from_slice(&c.to_le_bytes());
                Some((d, shown, SocketAddrV4::new(o.dst_ip, bind.port()).into(), 0))
            }
            PortKind::Frames { peer, mac, ip, .. } => {
                let Some(&dst_mac) = self.macs.lock().unwrap_or_else(|p| p.into_inner()).get(&o.dst_ip) else {
                    let req = Arp { oper: ArpOper::REQUEST, sha: mac, spa: ip, tha: [0; 6], tpa: o.dst_ip };
                    let f = frame::arp_frame(&req, frame::BROADCAST);
                    self.put(&f, &f, peer.into());
                    return None;
                };
                let a = addrs(ip, mac, o.dst_ip, dst_mac, o.src_qpn, o.dst_qpn);
                let f = frame::build_encoded(&a, &o.transport);
                let at = f.len() - o.transport.len() - 4;
                let shown = if self.pcap.is_some() { f.clone() } else { Vec::new() };
                Some((f, shown, peer.into(), at))
            }
        }
    }

    fn put(&self, bytes: &[u8], shown: &[u8], to: SocketAddr) {
        if let Some(p) = &self.pcap {
            p.record(shown);
        }
        match self.socket.send_to(bytes, to) {
            Ok(_) => self.stats.tx.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.tx_errors.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// One packet the send thread had is out or dropped: only then may a
    /// later one be sent directly without overtaking it.
    fn settled(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// Send until the model drops its end of the channel or the port stops.
    pub fn run(self: Arc<Self>, rx: Receiver<Outgoing>) {
        let lock = || self.faults.lock().unwrap_or_else(|p| p.into_inner());
        let mut rng = fastrand::Rng::with_seed(lock().seed);
        let mut held: Option<(Vec<u8>, Vec<u8>, SocketAddr)> = None;
        let mut later = BinaryHeap::<Delayed>::new();
        let mut seq = 0u64;
        let count = |i: usize| self.stats.faults[i].fetch_add(1, Ordering::Relaxed);
        while !self.stop.load(Ordering::Acquire) {
            let wait =
                later.peek().map_or(Duration::from_millis(20), |d| d.due.saturating_duration_since(Instant::now()));
            let o = match rx.recv_timeout(wait.min(Duration::from_millis(20))) {
                Ok(o) => Some(o),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            while later.peek().is_some_and(|d| d.due <= Instant::now()) {
                let d = later.pop().expect("peeked");
                self.put(&d.bytes, &d.shown, d.to);
                self.settled();
            }
            let Some(o) = o else {
                // Nothing new: a held packet goes now rather than wait forever.
                if let Some((b, s, to)) = held.take() {
                    self.put(&b, &s, to);
                    self.settled();
                }
                continue;
            };
            let tlen = o.transport.len();
            let Some((mut bytes, mut shown, to, at)) = self.encode(o) else {
                self.settled();
                continue;
            };
            let f = {
                let mut g = lock();
                let f = *g;
                g.drop_next = g.drop_next.saturating_sub(1);
                f
            };
            if f.drop_next > 0 || rng.f64() < f.drop {
                count(0);
                self.settled();
                continue;
            }
            if rng.f64() < f.corrupt {
                count(4);
                // One bit of the transport part; the ICRC no longer matches.
                let bit = rng.usize(..tlen * 8);
                let (i, m) = (bit / 8, 1u8 << (bit % 8));
                bytes[at + i] ^= m;
                if let Some(st) = shown.len().checked_sub(tlen + 4) {
                    shown[st + i] ^= m;
                }
            }
            if rng.f64() < f.delay_rate {
                count(3);
                seq += 1;
                later.push(Delayed { due: Instant::now() + f.delay, seq, bytes, shown, to });
                continue;
            }
            if held.is_none() && rng.f64() < f.reorder {
                count(2);
                held = Some((bytes, shown, to));
                continue;
            }
            self.put(&bytes, &shown, to);
            if rng.f64() < f.duplicate {
                count(1);
                self.put(&bytes, &shown, to);
            }
            self.settled();
            if let Some((b, s, to)) = held.take() {
                self.put(&b, &s, to);
                self.settled();
            }
        }
    }
}

/// A received RoCEv2 packet, for the model.
#[derive(Debug)]
pub struct Incoming<'a> {
    /// The sender's IPv4 address.
    pub src_ip: Ipv4Addr,
    /// The packet.
    pub packet: Packet<'a>,
}

/// Parse what the socket of a `kind` port received. Frame ports answer ARP
/// here (the reply goes out on `socket`) and learn the sender's MAC.
/// `peer_qpn` gives the QP a local QP is connected to (a UDP port needs it
/// for the flow label the ICRC covers). `None`: the datagram was counted
/// and dropped, or was ARP.
#[allow(clippy::too_many_arguments)]
pub fn receive<'a>(
    kind: &PortKind,
    socket: &UdpSocket,
    buf: &'a [u8],
    from: SocketAddr,
    stats: &PortStats,
    pcap: Option<&Pcap>,
    macs: &Mutex<HashMap<Ipv4Addr, Mac>>,
    peer_qpn: impl Fn(u32) -> Option<u32>,
) -> Option<Incoming<'a>> {
    stats.rx.fetch_add(1, Ordering::Relaxed);
    let bad = |e: &frame::FrameError| {
        use frame::FrameError as E;
        let c = match e {
            E::Icrc { .. } => &stats.rx_bad_icrc,
            E::EtherType(_) | E::Protocol(_) | E::NotRoce(_) => &stats.rx_not_roce,
            _ => &stats.rx_malformed,
        };
        c.fetch_add(1, Ordering::Relaxed);
    };
    match *kind {
        PortKind::Udp { bind } => {
            let SocketAddr::V4(from) = from else {
                stats.rx_malformed.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            // The BTH names the QP, whose peer gives the flow label; both are
            // checked again once the ICRC verifies.
            let dest_qp = buf
                .get(..marrow_roce::raw::bth::SIZE)
                .and_then(|b| <marrow_roce::raw::bth as zerocopy::FromBytes>::read_from_bytes(b).ok())
                .map(|b| b.dest_qp());
            let Some(src_qpn) = dest_qp.and_then(&peer_qpn) else {
                stats.rx_no_qp.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            let a = addrs(*from.ip(), udp_mac(*from.ip()), *bind.ip(), udp_mac(*bind.ip()), src_qpn, dest_qp?);
            if let Some(p) = pcap {
                let mut f = frame::build_encoded(&a, buf.get(..buf.len().saturating_sub(4)).unwrap_or(&[]));
                // Show the ICRC as it arrived.
                let n = f.len();
                if buf.len() >= 4 && n >= 4 {
                    f[n - 4..].copy_from_slice(&buf[buf.len() - 4..]);
                }
                p.record(&f);
            }
            match frame::parse_datagram(&a, buf) {
                Ok(packet) => Some(Incoming { src_ip: *from.ip(), packet }),
                Err(e) => {
                    bad(&e);
                    None
                }
            }
        }
        PortKind::Frames { peer, mac, ip, .. } => {
            if let Some(p) = pcap {
                p.record(buf);
            }
            match frame::parse(buf) {
                Ok(Frame::Arp { src_mac, arp }) => {
                    macs.lock().unwrap_or_else(|p| p.into_inner()).insert(arp.spa, src_mac);
                    if let Some(reply) = frame::arp_reply(&arp, mac, ip) {
                        if let Some(p) = pcap {
                            p.record(&reply);
                        }
                        if socket.send_to(&reply, peer).is_ok() {
                            stats.arp_replies.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    None
                }
                Ok(Frame::Roce { addrs, packet }) => {
                    macs.lock().unwrap_or_else(|p| p.into_inner()).insert(addrs.src_ip, addrs.src_mac);
                    if addrs.dst_ip != ip {
                        stats.rx_no_qp.fetch_add(1, Ordering::Relaxed);
                        return None;
                    }
                    Some(Incoming { src_ip: addrs.src_ip, packet })
                }
                Err(e) => {
                    bad(&e);
                    None
                }
            }
        }
    }
}

/// Socket buffers large enough for a READ's burst of responses: a 256 KiB
/// READ at MTU 1024 answers with 256 datagrams at once, more than Linux's
/// default receive buffer holds. Root may exceed `net.core.rmem_max`
/// (`SO_RCVBUFFORCE`); anyone else gets what the limit allows. A loss
/// here is not fatal: the requester asks again for what it lacks.
pub fn grow_buffers(socket: &UdpSocket) {
    use nix::sys::socket::{setsockopt, sockopt};
    const BYTES: usize = 8 << 20;
    if setsockopt(socket, sockopt::RcvBufForce, &BYTES).is_err() {
        let _ = setsockopt(socket, sockopt::RcvBuf, &BYTES);
    }
    if setsockopt(socket, sockopt::SndBufForce, &BYTES).is_err() {
        let _ = setsockopt(socket, sockopt::SndBuf, &BYTES);
    }
}
