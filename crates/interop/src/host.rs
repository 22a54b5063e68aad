//! The host's side of the cable: one softnic whose wire port 0 exchanges
//! whole Ethernet frames with a QEMU `-netdev dgram` NIC, and RC endpoints
//! on it for peers that are not softnic instances.

use crate::InteropError;
use marrow_mlx5::cqe::Completion;
use marrow_softnic::SoftNic;
use marrow_softnic::mr::Pd;
use marrow_softnic::pair::{Endpoint, PairConfig};
use marrow_softnic::rc::WireAttrs;
use marrow_softnic::rc::port::{PortKind, PortOptions, WireFaults, udp_mac};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    /// Faults on what the softnic sends.
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
}

impl Host {
    /// Start the softnic and attach the frame port.
    pub fn start(cable: &Cable) -> Result<Host, InteropError> {
        let mut nic = SoftNic::new();
        let kind = PortKind::Frames { bind: cable.bind, peer: cable.peer, mac: udp_mac(cable.ip), ip: cable.ip };
        let port = nic
            .attach_port(kind, PortOptions { pcap: cable.pcap.clone(), faults: cable.faults })
            .map_err(InteropError::io(format!("attaching the frame port on {}", cable.bind)))?;
        nic.start(1);
        let pd = nic.hca().alloc_pd();
        Ok(Host { nic, ip: cable.ip, port, pd, made: 0 })
    }

    /// The softnic's GID: `::ffff:` and its IPv4 address.
    pub fn gid(&self) -> [u8; 16] {
        marrow_softnic::rc::ipv4_mapped(self.ip)
    }

    /// A fresh RC endpoint with a `buf_len`-byte registered buffer, in RESET.
    pub fn endpoint(&mut self, buf_len: usize) -> Result<Endpoint, InteropError> {
        self.made += 1;
        let cfg = PairConfig { buf_len, ..PairConfig::default() };
        Endpoint::create(&self.nic, self.pd, &cfg, &format!("interop-{}", self.made))
            .map_err(|e| InteropError::Setup(e.to_string()))
    }

    /// The wire attributes for a peer at `gid`: rdma-core's tools' values
    /// (`pp_connect_ctx`: timeout 14, 7 retries, RNR retry 7, min RNR
    /// timer 12), at `mtu`, with the PSNs exchanged.
    pub fn attrs(&self, gid: [u8; 16], mtu: u32, sq_psn: u32, rq_psn: u32) -> WireAttrs {
        WireAttrs { port: self.port, dgid: gid, sq_psn, rq_psn, path_mtu: mtu, ..WireAttrs::new(self.port, self.ip) }
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
