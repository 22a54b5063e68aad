//! The host's side of the cable: one softnic whose wire port 0 exchanges
//! whole Ethernet frames with a QEMU `-netdev dgram` NIC, and RC endpoints
//! on it for peers that are not softnic instances.

use crate::InteropError;
use marrow_mlx5::cqe::Completion;
use marrow_softnic::SoftNic;
use marrow_softnic::mr::{Access, Pd};
use marrow_softnic::pair::{Endpoint, PairConfig};
use marrow_softnic::rc::WireAttrs;
use marrow_softnic::rc::port::{PortKind, PortOptions, WireFaults, udp_mac};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The first connection on `listener` within `deadline`, blocking, with
/// reads that time out after `timeout`.
pub fn accept(listener: &TcpListener, deadline: Duration, timeout: Duration) -> Result<TcpStream, InteropError> {
    let start = Instant::now();
    listener.set_nonblocking(true).map_err(InteropError::io("listener"))?;
    let sock = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(InteropError::Exchange(format!("no client connected within {deadline:?}: {e}"))),
        }
    };
    sock.set_nonblocking(false).map_err(InteropError::io("socket"))?;
    sock.set_read_timeout(Some(timeout)).map_err(InteropError::io("socket"))?;
    Ok(sock)
}

/// Bytes a QP sends beyond the last acknowledged. A burst to the guest
/// waits in QEMU's datagram socket (the host's default receive buffer,
/// about 200 KiB, each frame charged about twice its size) until the
/// virtio-net ring takes it; a longer burst is dropped there, and every
/// resend of it the same way, until the QP ends in TRANSPORT_RETRY_EXC_ERR
/// (seen with the default window and 64 KiB messages).
pub const SEND_WINDOW_BYTES: u32 = 64 << 10;

/// The send window, in packets of `mtu` bytes, for [`SEND_WINDOW_BYTES`].
pub fn send_window(mtu: u32) -> u32 {
    (SEND_WINDOW_BYTES / mtu.max(1)).max(16)
}

/// Where the frame port sits.
#[derive(Clone, Debug)]
pub struct Cable {
    /// The host socket QEMU's `remote` address names.
    pub bind: SocketAddrV4,
    /// QEMU's `local` socket, where frames for the guest go.
    pub peer: SocketAddrV4,
    /// The softnic's IPv4 address on the guest's Ethernet.
    pub ip: Ipv4Addr,
    /// Capture every frame here.
    pub pcap: Option<PathBuf>,
    /// Faults on what the softnic sends, in the steps that ask for them.
    pub faults: WireFaults,
}

/// The softnic and its frame port.
#[derive(Debug)]
pub struct Host {
    /// The device model, one engine thread running.
    pub nic: SoftNic,
    /// Its IPv4 address on the cable.
    pub ip: Ipv4Addr,
    port: u32,
    pd: Pd,
    made: u32,
    faults: WireFaults,
    last_qpn: Option<u32>,
}

impl Host {
    /// Start the softnic and attach the frame port.
    pub fn start(cable: &Cable) -> Result<Host, InteropError> {
        let mut nic = SoftNic::new();
        let kind = PortKind::Frames { bind: cable.bind, peer: cable.peer, mac: udp_mac(cable.ip), ip: cable.ip };
        let port = nic
            .attach_port(kind, PortOptions { pcap: cable.pcap.clone(), faults: WireFaults::default() })
            .map_err(InteropError::io(format!("attaching the frame port on {}", cable.bind)))?;
        nic.start(1);
        let pd = nic.hca().alloc_pd();
        Ok(Host { nic, ip: cable.ip, port, pd, made: 0, faults: cable.faults, last_qpn: None })
    }

    /// The QP of the endpoint made last (the step in progress), if any.
    pub fn last_qpn(&self) -> Option<u32> {
        self.last_qpn
    }

    /// Turn the cable's wire faults on or off.
    pub fn set_faults(&self, on: bool) -> Result<(), InteropError> {
        let f = if on { self.faults } else { WireFaults::default() };
        self.nic.set_port_faults(self.port, f).map_err(|e| InteropError::Setup(e.to_string()))
    }

    /// The softnic's GID: `::ffff:` and its IPv4 address.
    pub fn gid(&self) -> [u8; 16] {
        marrow_softnic::rc::ipv4_mapped(self.ip)
    }

    /// A fresh RC endpoint with a `buf_len`-byte registered buffer that
    /// peers may read, write and use atomics on, in RESET.
    pub fn endpoint(&mut self, buf_len: usize) -> Result<Endpoint, InteropError> {
        self.endpoint_with(buf_len, Access::all())
    }

    /// As [`Host::endpoint`], with the buffer's rights `access`.
    pub fn endpoint_with(&mut self, buf_len: usize, access: Access) -> Result<Endpoint, InteropError> {
        self.made += 1;
        // perftest keeps up to 512 receives and 128 sends outstanding;
        // CQs as deep, so none overflows.
        let cfg = PairConfig { buf_len, access, rq_wqes: 512, ncqe: 1024, sq_wqebbs: 256, ..PairConfig::default() };
        let ep = Endpoint::create(&self.nic, self.pd, &cfg, &format!("interop-{}", self.made))
            .map_err(|e| InteropError::Setup(e.to_string()))?;
        self.last_qpn = Some(ep.qpn);
        Ok(ep)
    }

    /// The wire attributes for a peer at `gid`: rdma-core's tools' values
    /// (`pp_connect_ctx`: timeout 14, 7 retries, RNR retry 7, min RNR
    /// timer 12), at `mtu`, with the PSNs exchanged, and the send window
    /// [`send_window`] gives.
    pub fn attrs(&self, gid: [u8; 16], mtu: u32, sq_psn: u32, rq_psn: u32) -> WireAttrs {
        WireAttrs {
            port: self.port,
            dgid: gid,
            sq_psn,
            rq_psn,
            path_mtu: mtu,
            send_window: send_window(mtu),
            ..WireAttrs::new(self.port, self.ip)
        }
    }

    /// Connect `ep` to QP `dest_qpn` of the peer.
    pub fn connect(&self, ep: &Endpoint, dest_qpn: u32, attrs: WireAttrs) -> Result<(), InteropError> {
        ep.connect_wire(&self.nic, dest_qpn, attrs).map_err(|e| InteropError::Setup(e.to_string()))
    }

    /// The frame port's counters, one line.
    pub fn counters(&self) -> String {
        match self.nic.port_counters(self.port) {
            Some(c) => serde_json::to_string(&c).unwrap_or_default(),
            None => "no port".into(),
        }
    }

    /// The next CQE of `ep`'s send (`recv = false`) or receive CQ, at most
    /// `timeout`; a timeout says what QP and port were doing.
    pub fn wait(
        &self,
        ep: &mut Endpoint,
        recv: bool,
        timeout: Duration,
        what: &str,
    ) -> Result<Completion, InteropError> {
        let start = Instant::now();
        loop {
            let poller = if recv { &mut ep.rcq } else { &mut ep.scq };
            match poller.poll() {
                Ok(Some(c)) => return Ok(c),
                Ok(None) => {}
                Err(e) => return Err(InteropError::Completion(format!("{what}: polling: {e}"))),
            }
            if start.elapsed() > timeout {
                let state = self.nic.hca().qp(ep.qpn).map(|q| format!("{:?}", q.state)).unwrap_or_default();
                return Err(InteropError::Timeout(format!(
                    "{what}: no {} completion on QP {:#x} after {timeout:?}: QP {state}, send queue posted {} \
                     WQEBBs; port {}",
                    if recv { "receive" } else { "send" },
                    ep.qpn,
                    ep.sq.pi(),
                    self.counters()
                )));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
