//! `marrow demo --gpu`: GPU threads run the device code (put, get, atomics)
//! against the softnic, whose rings, doorbells and CQs are host memory mapped
//! into the GPU. Every byte and every fetched value is checked on the CPU;
//! injected faults come back as errors with the GCRB decoded; latency and
//! bandwidth are reported against floors measured in the same run.
//! This file holds the rig (a world's memory registered with the GPU) and
//! the order of the run; `checks` the demo's checks, `latency` the blocking
//! put and its ping-pong floor, `rates` the posting rates and loops.

mod checks;
mod doca;
mod latency;
mod parts;
mod rates;

pub use parts::{Part, Parts};

use crate::error::BenchError;
use crate::figure_report::{Collect, FigureReport};
use checks::{data_checks, early_doorbell_covers_a_drop, exclusive_checks, faults, gpu_memory, peer_checks};
use latency::{engine_qps, latency, latency_breakdown};
use marrow_transport::gpu::{Gpu, Grid, RwKernel};
use marrow_transport::gpu_memory::DeviceGcrb;
use marrow_transport::{DeviceError, World, WorldConfig};
use rates::{loop_bench, rates};
use std::io::Write;
use std::time::Duration;

type Res<T> = Result<T, BenchError>;

/// One register trace record as a line of text, for the fault checks' traces.
pub type RenderRecord<'a> = &'a dyn Fn(usize, &marrow_softnic::trace::Record) -> String;

/// A failed check, said in words.
fn check<T>(msg: String) -> Res<T> {
    Err(BenchError::Check(msg))
}

/// CQ entries for a 1024-WQEBB send queue. The softnic, like hardware,
/// checks for overflow against the consumer index in the CQ doorbell
/// record, which GPU threads update with stores that reach host memory
/// later than their own view of it: with a CQ no deeper than the send
/// queue, that lag alone can look like an overflow (seen on the H200 with
/// 132 x 128 threads). NVSHMEM sidesteps it with collapsed, overrun-ignoring
/// CQs; here the CQ is 4 times deeper.
const CQ_DEPTH: u32 = 4096;

struct Rig<'g> {
    gpu: &'g Gpu,
    world: World,
    /// PE 0's GCRB, in GPU memory.
    gcrb: DeviceGcrb,
    /// PE 0's extra channels' GCRBs, in GPU memory.
    more: Vec<DeviceGcrb>,
    registered: Vec<marrow_driver::Region>,
    /// Send queue depth of every channel.
    sq_wqebbs: u32,
}

fn rig(gpu: &Gpu, cfg: WorldConfig) -> Res<Rig<'_>> {
    rig_on(gpu, World::new(cfg)?, cfg.sq_wqebbs)
}

/// The rig of a world already built (its channels of `sq_wqebbs` WQEBBs).
fn rig_on(gpu: &Gpu, world: World, sq_wqebbs: u32) -> Res<Rig<'_>> {
    // A GPU round trip is microseconds: keep the engines spinning meanwhile.
    world.nic.set_idle_spin(Duration::from_secs(1));
    if let Some(n) = &world.nic_b {
        n.set_idle_spin(Duration::from_secs(1));
    }
    let registered = world.shared_regions();
    for r in &registered {
        gpu.register(r)?;
    }
    let gcrb = gpu.upload(&world.channels[0].page())?;
    let more = world.more.iter().map(|c| gpu.upload(&c.page()).map_err(BenchError::from)).collect::<Res<Vec<_>>>()?;
    Ok(Rig { gpu, world, gcrb, more, registered, sq_wqebbs })
}

impl Drop for Rig<'_> {
    fn drop(&mut self) {
        // The memory is unmapped next: unregister it first, so a later
        // mapping at the same address can be registered.
        let _ = self.gpu.stream.synchronize();
        for r in &self.registered {
            let _ = self.gpu.unregister(r);
        }
    }
}

impl Rig<'_> {
    fn page(&self, pe: usize) -> u64 {
        assert_eq!(pe, 0, "the demo drives PE 0's channel");
        self.gcrb.addr
    }

    /// PE 0's channel's configuration, read from its GCRB page: the mode
    /// and rings the device code runs with.
    fn config(&self) -> Res<marrow_gcrb::gcrb_config> {
        Ok(marrow_transport::gcrb_page::config(&self.world.channels[0].page())
            .ok_or("channel 0's GCRB config is unreadable")?)
    }

    /// Run an rw kernel from PE 0 to PE 1; the rc of every thread.
    fn launch_rw(&self, k: RwKernel, grid: u32, block: u32, len: u32, iters: u32) -> Res<Vec<i32>> {
        self.gpu.rw(k, self.page(0), 1, len, iters, Grid { blocks: grid, threads: block }).map_err(BenchError::from)
    }

    /// The GCRB, copied back from the GPU and decoded.
    fn report(&self) -> String {
        match self.gpu.download(&self.gcrb, &self.world.channels[0].page()) {
            Ok(()) => self.world.channels[0].report(),
            Err(err) => format!("(GCRB not readable: {err})"),
        }
    }
}

fn check_rc(r: &Rig, what: &str, rc: &[i32]) -> Res<()> {
    if let Some((i, c)) = rc.iter().enumerate().find(|(_, c)| **c != 0) {
        return check(format!("{what}: thread {i} returned {} ({})\n{}", c, DeviceError(*c), r.report()));
    }
    Ok(())
}

/// The correctness runs: a traced channel, so an error report shows what
/// the device did last.
fn checked_config() -> WorldConfig {
    WorldConfig {
        buf_len: 80 << 20,
        sq_wqebbs: 1024,
        ncqe: CQ_DEPTH,
        timeout: Duration::from_secs(10),
        trace: true,
        ..WorldConfig::default()
    }
}

/// The benchmarks: untraced channels whose send queues hold every put of a
/// posting-rate run (132 x 128 threads), so posting never waits for the
/// engine; CQs 4 times deeper, as for `CQ_DEPTH`.
fn bench_config() -> WorldConfig {
    WorldConfig {
        buf_len: 80 << 20,
        sq_wqebbs: 32768,
        ncqe: 4 * 32768,
        timeout: Duration::from_secs(10),
        trace: false,
        ..WorldConfig::default()
    }
}

/// PE 0's channels for the posting-rate runs. Only there: the engine scans
/// every QP, so extra ones would slow the latency runs' doorbells.
const RATE_CHANNELS: usize = 32;

/// Run everything; an error names what failed with the decoded GCRB.
/// `marrow demo --gpu`: every check, then the benchmarks; `render` prints
/// one register trace record (the CLI's `trace show` line). The text goes
/// to `o`; the benchmarks' figures come back as rows.
pub fn run(o: &mut dyn Write, render: RenderRecord) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    let mut c = Collect::new("demo --gpu", format!("{} ({})", gpu.name, gpu.arch));
    writeln!(o, "marrow demo --gpu: {} ({}), {}", gpu.name, gpu.arch, gpu.kernels)?;
    data_checks(&rig(&gpu, checked_config())?, o, "through the softnic")?;
    writeln!(o, "GPU memory as data buffers (moved by the softnic through the GPU's copy engine):")?;
    gpu_memory(&gpu, o)?;
    writeln!(o, "injected faults (each must come back as an error, never a hang):")?;
    faults(&gpu, o, false, render)?;
    writeln!(o, "exclusive channels (flags.exclusive):")?;
    exclusive_checks(&gpu, o)?;
    writeln!(o, "injected faults on an exclusive channel:")?;
    faults(&gpu, o, true, render)?;
    writeln!(o, "a dropped doorbell on an exclusive channel with early doorbells (flags.early_doorbell rings twice):")?;
    early_doorbell_covers_a_drop(&gpu, o, render)?;
    benchmarks(&gpu, o, &mut c, Parts::all())?;
    writeln!(o, "all GPU checks passed")?;
    Ok(c.report)
}

/// `marrow demo --gpu --wire udp`: the device code in GPU threads against a
/// softnic whose peer, PE 1, is another process (`marrow softnic`, started
/// from `softnic_exe`) across RoCEv2 on loopback UDP; the 8 B blocking-put
/// latency and the posting rate beside the same figures on the local path
/// (one softnic), same run. With `pcap`, PE 0's port is captured during the
/// data checks. The text goes to `o`; the figures come back as rows.
pub fn run_wire(
    o: &mut dyn Write,
    softnic_exe: &std::path::Path,
    pcap: Option<std::path::PathBuf>,
) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    let mut c = Collect::new("demo --gpu --wire udp", format!("{} ({})", gpu.name, gpu.arch));
    let pid = std::process::id();
    let ip = std::net::Ipv4Addr::new(127, 78, (pid % 250) as u8, 2);
    let daemon = marrow_softnic::peer::PeerDaemon::start(softnic_exe, ip, 4791)?;
    writeln!(
        o,
        "marrow demo --gpu --wire udp: {} ({}), {}; PE 1 is another process (`marrow softnic`, pid {}, port udp:{ip}:4791), reached over RoCEv2 on loopback UDP",
        gpu.name,
        gpu.arch,
        gpu.kernels,
        daemon.child.id()
    )?;
    let peer = marrow_transport::WirePeer { socket: daemon.socket.clone(), ip };
    let wire = |pcap| marrow_transport::WireOptions { peer: Some(peer.clone()), pcap };
    let checked = checked_config();
    let world = World::over_wire(checked, &wire(pcap.clone()))?;
    world.enable_peer_trace(1 << 20)?;
    let r = rig_on(&gpu, world, checked.sq_wqebbs)?;
    data_checks(&r, o, "across the wire to the other process")?;
    peer_checks(&r, o)?;
    drop(r);
    if let Some(f) = &pcap {
        writeln!(o, "  PE 0's port captured to {} (during the data checks)", f.display())?;
    }
    for wire_on in [false, true] {
        let section = if wire_on { "across the wire" } else { "local path (one softnic), for comparison" };
        writeln!(o, "{section}:")?;
        c.section(section);
        let cfg = bench_config();
        let world = if wire_on { World::over_wire(cfg, &wire(None)) } else { World::new(cfg) };
        let r = rig_on(&gpu, world?, cfg.sq_wqebbs)?;
        latency(&r, o, &mut c)?;
        rates(&r, o, &mut c)?;
    }
    writeln!(o, "all GPU checks passed across the wire")?;
    Ok(c.report)
}

/// One measurement of the bench, on its section's channels.
#[derive(Clone, Copy)]
enum Step {
    /// The blocking put traced on a channel of its own ([`latency_breakdown`]).
    Breakdown,
    /// The blocking put against its ping-pong floor ([`latency`]).
    Latency,
    /// compute -> put -> compute ([`loop_bench`]).
    Loop,
    /// The blocking put with many QPs on the engine ([`engine_qps`]).
    Qps,
    /// Posting rates and bandwidth ([`rates`]); on shared channels over
    /// `RATE_CHANNELS` of them (the whole GPU spreads over them; an
    /// exclusive channel has one owner).
    Rates,
}

impl Step {
    fn part(self) -> Part {
        match self {
            Step::Breakdown | Step::Latency => Part::Latency,
            Step::Loop => Part::Loop,
            Step::Qps => Part::Qps,
            Step::Rates => Part::Rates,
        }
    }
}

/// A section of the bench: its name in the report, its heading in the
/// text, its channels, and its steps in the order they run.
struct Section {
    name: &'static str,
    heading: &'static str,
    config: WorldConfig,
    steps: &'static [Step],
}

/// The bench, in order: shared channels (the default), then exclusive
/// ones, each as configured by default and with one flag changed.
fn sections() -> [Section; 6] {
    use Step::*;
    let shared = bench_config();
    let exclusive = WorldConfig { exclusive: true, ..shared };
    [
        Section {
            name: "shared",
            heading: "shared channels (any thread posts; reservation atomic, ready chain, CQ lock; early doorbells, the default):",
            config: shared,
            steps: &[Breakdown, Latency, Loop, Qps, Rates],
        },
        Section {
            name: "shared, lazy put_nbi doorbells",
            heading: "with lazy put_nbi doorbells (flags.lazy_nbi_doorbell: ring per 32 WQEBBs or a half-full ring, quiet posts a NOP; DeepEP's rule):",
            config: WorldConfig { lazy_nbi_doorbell: true, ..shared },
            steps: &[Rates, Loop],
        },
        Section {
            name: "exclusive",
            heading: "exclusive channels (flags.exclusive: one owner, a thread or a warp, keeps the heads in registers; DOCA's EXCLUSIVE mode; early doorbells, the default):",
            config: exclusive,
            steps: &[Breakdown, Latency, Loop, Rates],
        },
        Section {
            name: "exclusive, lazy put_nbi doorbells",
            heading: "exclusive with lazy put_nbi doorbells (a put_nbi fences nothing until it rings; quiet rings the rest):",
            config: WorldConfig { lazy_nbi_doorbell: true, ..exclusive },
            steps: &[Loop, Rates],
        },
        Section {
            name: "exclusive, no early doorbells",
            heading: "exclusive without early doorbells (flags.early_doorbell off: the record, a fence, then the one doorbell):",
            config: WorldConfig { early_doorbell: false, ..exclusive },
            steps: &[Breakdown, Latency, Rates],
        },
        Section {
            name: "shared, no early doorbells",
            heading: "shared without early doorbells:",
            config: WorldConfig { early_doorbell: false, ..shared },
            steps: &[Latency],
        },
    ]
}

/// The steps of `parts`, section by section. Consecutive steps on the same
/// channels share one rig (a world registered with the GPU), as a run of
/// the whole bench always has.
fn benchmarks(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect, parts: Parts) -> Res<()> {
    for s in sections() {
        let steps: Vec<Step> = s.steps.iter().copied().filter(|st| parts.has(st.part())).collect();
        if steps.is_empty() {
            continue;
        }
        c.section(s.name);
        writeln!(o, "{}", s.heading)?;
        // The rig in hand, and whether it has RATE_CHANNELS channels.
        let mut held: Option<(bool, Rig)> = None;
        for step in steps {
            match step {
                // These make worlds of their own; the one in hand goes first.
                Step::Breakdown => {
                    held = None;
                    latency_breakdown(gpu, o, c, s.config)?;
                }
                Step::Qps => {
                    held = None;
                    engine_qps(gpu, o, c)?;
                }
                Step::Latency => {
                    latency(rig_in(&mut held, gpu, s.config, false)?, o, c)?;
                }
                Step::Loop => loop_bench(rig_in(&mut held, gpu, s.config, false)?, o, c)?,
                Step::Rates => {
                    let r = rig_in(&mut held, gpu, s.config, !s.config.exclusive)?;
                    rates(r, o, c)?;
                }
            }
        }
    }
    Ok(())
}

/// `marrow bench gpu`: the GPU figures alone, each against its floor, those
/// of `parts`; with `doca`, a CUBIN of DOCA's device verbs
/// (`scripts/doca_peer/build.sh`), then marrow against DOCA on the same
/// softnic (with `doca_only`, that alone). The text goes to `o`, the
/// figures come back as rows.
pub fn bench(o: &mut dyn Write, parts: Parts, doca: Option<&std::path::Path>, doca_only: bool) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    writeln!(o, "marrow bench gpu: {} ({}), {}", gpu.name, gpu.arch, gpu.kernels)?;
    let mut c = Collect::new("bench gpu", format!("{} ({})", gpu.name, gpu.arch));
    if !(doca_only && doca.is_some()) {
        benchmarks(&gpu, o, &mut c, parts)?;
    }
    if let Some(cubin) = doca {
        doca::doca(&gpu, o, &mut c, cubin)?;
    }
    Ok(c.report)
}

/// The rig `held` has if it is on `config`'s channels, with `RATE_CHANNELS`
/// of them where `many`; else a new one (the old one dropped first: two at
/// once would hold twice the memory).
fn rig_in<'a, 'g>(
    held: &'a mut Option<(bool, Rig<'g>)>,
    gpu: &'g Gpu,
    config: WorldConfig,
    many: bool,
) -> Res<&'a Rig<'g>> {
    // A rig on other channels is dropped here, before the new one is made.
    if let Some((m, r)) = held.take()
        && m == many
    {
        return Ok(&held.insert((m, r)).1);
    }
    let extra_channels = if many { RATE_CHANNELS - 1 } else { config.extra_channels };
    Ok(&held.insert((many, rig(gpu, WorldConfig { extra_channels, ..config })?)).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_has_steps() {
        let all = sections();
        for (p, name) in Part::ALL {
            assert!(all.iter().any(|s| s.steps.iter().any(|st| st.part() == p)), "--only {name} would run nothing");
        }
    }
}
