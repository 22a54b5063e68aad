//! softnic: a register-accurate mlx5 device model that consumes real WQEs.
//!
//! Queues, doorbell records, UAR pages and registered memory live in shared
//! memory (memfd), where any process, or a GPU through `cudaHostRegister`,
//! can map them. Engine threads find doorbells as hardware does, by polling
//! the UAR doorbell registers and reading the doorbell record, then fetch
//! each WQE from the ring, validate it, move the data, and write a CQE with
//! the owner bit of its pass. Bad WQEs get error CQEs with the syndrome
//! hardware uses ([`exec`]), and the QP goes to ERR.
//!
//! ```
//! use marrow_softnic::{SoftNic, CqMode, QpCaps};
//! let nic = SoftNic::new();
//! let mut hca = nic.hca();
//! let pd = hca.alloc_pd();
//! let cq = hca.create_cq(16, CqMode::Normal).unwrap();
//! let qpn = hca.create_qp(pd, cq, cq, QpCaps::default()).unwrap();
//! assert!(qpn >= 0x100);
//! ```

pub mod client;
mod clock;
pub mod cq;
pub mod daemon;
pub mod delegate;
pub mod exec;
pub mod fault;
pub mod hca;
mod hot;
pub mod mr;
pub mod pair;
pub mod peer;
pub mod qp;
pub mod rc;
pub mod respond;
pub mod shm;
mod table;
pub mod trace;
pub mod wire;

pub use cq::{Cq, CqMode};
pub use fault::Faults;
pub use hca::{AsyncEvent, Hca, HcaError, ModifyQp};
pub use mr::{Access, DeviceMemory, Pd};
pub use qp::{QpCaps, QpMemory, QpState};
pub use shm::Shm;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Default)]
struct Shared {
    hca: Mutex<Hca>,
    stop: AtomicBool,
    /// Idle time an engine spins before it yields and sleeps, in ns.
    spin_ns: std::sync::atomic::AtomicU64,
    /// Tells port threads to end (set when the model is dropped).
    ports_stop: Arc<AtomicBool>,
}

/// A device model and its engine threads.
#[derive(Debug)]
pub struct SoftNic {
    shared: Arc<Shared>,
    engines: Vec<JoinHandle<()>>,
    /// The wire ports' receive threads, joined when the model is dropped:
    /// each executes what arrives against registered memory, which its
    /// owner may unmap right after the model is gone.
    port_rx: Mutex<Vec<JoinHandle<()>>>,
}

impl Default for SoftNic {
    fn default() -> Self {
        Self::new()
    }
}

impl SoftNic {
    /// A device model with no engine thread (call [`SoftNic::start`] or [`SoftNic::scan`]).
    pub fn new() -> SoftNic {
        SoftNic { shared: Arc::new(Shared::default()), engines: Vec::new(), port_rx: Mutex::new(Vec::new()) }
    }

    /// Record a register trace of at most `cap` bytes.
    pub fn enable_trace(&self, cap: usize) {
        self.hca().trace = Some(trace::Recorder::new(cap));
    }

    /// The trace recorded so far, as file bytes (see `docs/TRACE.md`).
    pub fn trace_bytes(&self) -> Option<Vec<u8>> {
        self.hca().trace.as_ref().map(|t| t.bytes().to_vec())
    }

    /// Trace records dropped because the trace reached its byte cap.
    pub fn trace_dropped(&self) -> u64 {
        self.hca().trace.as_ref().map_or(0, |t| t.dropped())
    }

    /// The control path: the model's state, locked.
    pub fn hca(&self) -> MutexGuard<'_, Hca> {
        // A panic while the lock was held leaves the model as it was at the
        // panic; keep serving rather than cascade.
        self.shared.hca.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One engine pass on the calling thread; returns the WQEs handled.
    pub fn scan(&self) -> usize {
        self.hca().scan()
    }

    /// Start `n` engine threads polling doorbells. On machines with few
    /// cores they spin briefly, then yield, then sleep 50 µs between idle scans.
    pub fn start(&mut self, n: usize) {
        for i in 0..n {
            let shared = self.shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("softnic-engine-{i}"))
                .spawn(move || engine(&shared))
                .expect("spawning an engine thread");
            self.engines.push(h);
        }
    }

    /// Attach a RoCEv2 wire port ([`rc::port`]); returns its number, to
    /// name in [`rc::WireAttrs::port`]. Two threads serve it: one sends what
    /// the model's QPs put on the wire (with `opts.faults`), one hands what
    /// arrives to the QP it names.
    pub fn attach_port(&self, kind: rc::port::PortKind, opts: rc::port::PortOptions) -> std::io::Result<u32> {
        use rc::port::{PortHandle, PortKind, PortStats};
        let bind = match kind {
            PortKind::Udp { bind } | PortKind::Frames { bind, .. } => bind,
        };
        let socket = std::net::UdpSocket::bind(bind)
            .map_err(|e| std::io::Error::new(e.kind(), format!("binding UDP {bind}: {e}")))?;
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        rc::port::grow_buffers(&socket);
        let pcap = opts.pcap.as_deref().map(rc::port::Pcap::create).transpose()?;
        let stats = Arc::new(PortStats::default());
        let macs = Arc::new(Mutex::new(std::collections::HashMap::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let faults = Arc::new(Mutex::new(opts.faults));
        let sender = Arc::new(rc::port::PortSender {
            kind,
            socket: socket.try_clone()?,
            pcap: pcap.clone(),
            stats: stats.clone(),
            faults: faults.clone(),
            macs: macs.clone(),
            stop: self.shared.ports_stop.clone(),
            pending: std::sync::atomic::AtomicUsize::new(0),
        });
        let id = {
            let mut hca = self.hca();
            hca.ports.push(PortHandle { kind, tx, stats: stats.clone(), faults, sender: sender.clone() });
            hca.ports.len() as u32 - 1
        };
        std::thread::Builder::new().name(format!("softnic-port{id}-tx")).spawn(move || sender.run(rx))?;
        let shared = self.shared.clone();
        let rx_thread = std::thread::Builder::new().name(format!("softnic-port{id}-rx")).spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while !shared.ports_stop.load(Ordering::Acquire) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                let mut hca = shared.hca.lock().unwrap_or_else(|p| p.into_inner());
                let got = rc::port::receive(&kind, &socket, &buf[..n], from, &stats, pcap.as_deref(), &macs, |q| {
                    hca.wire_peer(id, q)
                });
                if let Some(inc) = got {
                    hca.on_wire(id, inc);
                }
            }
        })?;
        self.port_rx.lock().unwrap_or_else(|p| p.into_inner()).push(rx_thread);
        Ok(id)
    }

    /// Change the faults wire port `port` applies to what it sends.
    pub fn set_port_faults(&self, port: u32, faults: rc::port::WireFaults) -> Result<(), HcaError> {
        let hca = self.hca();
        let p = hca.ports.get(port as usize).ok_or(HcaError::NoSuch { what: "port", id: port })?;
        *p.faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
        Ok(())
    }

    /// The counters of wire port `port`.
    pub fn port_counters(&self, port: u32) -> Option<rc::port::PortCounters> {
        self.hca().ports.get(port as usize).map(|p| p.stats.snapshot())
    }

    /// Let engine threads spin this long on an idle ring before backing off
    /// (default: a few µs, for 2-core machines). A GPU round trip through
    /// host memory is microseconds, so a GPU run wants the engine spinning,
    /// as a benchmark may (docs/SOURCES.md §4).
    pub fn set_idle_spin(&self, spin: Duration) {
        self.shared.spin_ns.store(spin.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Stop and join the engine threads.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for h in self.engines.drain(..) {
            let _ = h.join();
        }
        self.shared.stop.store(false, Ordering::Release);
    }
}

impl Drop for SoftNic {
    fn drop(&mut self) {
        self.stop();
        self.shared.ports_stop.store(true, Ordering::Release);
        // The send threads end when their channels close.
        self.hca().ports.clear();
        // A receive thread sees the stop within its socket's read timeout;
        // until it has, a late packet (a peer's retry) could still be
        // executed against memory whose owner unmaps it once we return.
        for h in self.port_rx.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = h.join();
        }
    }
}

fn engine(shared: &Shared) {
    let mut idle = 0u32;
    let mut idle_since = std::time::Instant::now();
    let mut spinning = true;
    while !shared.stop.load(Ordering::Acquire) {
        let work = shared.hca.lock().unwrap_or_else(|p| p.into_inner()).scan();
        if work > 0 {
            idle = 0;
            continue;
        }
        if idle == 0 {
            idle_since = std::time::Instant::now();
        }
        idle = idle.saturating_add(1);
        // Whether to go on spinning, from the clock once per 64 idle scans:
        // a clock read per scan was a large part of an idle scan, and so of
        // how late a doorbell is seen.
        if idle.is_multiple_of(64) {
            let spin = shared.spin_ns.load(Ordering::Relaxed);
            spinning = spin > 0 && (idle_since.elapsed().as_nanos() as u64) < spin;
        }
        if idle < 64 || spinning {
            std::hint::spin_loop();
        } else if idle < 256 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
