//! `marrow bench p2p`: transport P2P between two GPUs of this node, one
//! process per GPU. The launcher starts both PEs (this binary, `bench
//! p2p-pe`), hands them each other's CUDA IPC handle over a Unix socket,
//! relays barriers, and checks what they report: every operation's bytes or
//! fetched values, then the 8-byte round trip and the bandwidth, each
//! against its floor measured in the same run. PE 0 sends each figure to
//! the launcher as a typed row too (a `row` line of JSON), for `--json` and
//! `--csv`.

use crate::error::{BenchError, same_bytes};
use crate::figure_report::{Collect, FigureReport, Row};
use crate::gpu_rows;
use marrow_softnic::Shm;
use marrow_transport::gcrb_page;
use marrow_transport::gpu::Gpu;
use marrow_transport::gpu::Grid;
use marrow_transport::p2p::{self, IpcHandle};
use marrow_transport::p2p_relay::{Relay, RelayBounds};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc;
use std::time::Duration;

type Res<T> = Result<T, BenchError>;

/// A failed check, said in words.
fn check<T>(msg: String) -> Res<T> {
    Err(BenchError::Check(msg))
}

/// Each PE's window: its put source, where the peer's puts land, flags.
const SRC: u64 = 0;
const DST: u64 = 256 << 20;
const FLAGS: u64 = 512 << 20;
const WINDOW: usize = (512 << 20) + (1 << 20);
const PINGPONG: u64 = FLAGS;
const SIGNAL: u64 = FLAGS + 64;
const COUNTER: u64 = FLAGS + 128;
const CAS_WORD: u64 = FLAGS + 192;
const SCRATCH: u64 = FLAGS + 256;
const RESULTS: u64 = FLAGS + 4096;
const BW_SIZES: [u64; 6] = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20];
/// Descriptors in the relay GCRB's ring.
const RELAY_ENTRIES: u32 = 64;
/// The smallest put the relay GCRB hands to the relay.
const RELAY_MIN_KIB: u32 = p2p::RELAY_MIN_KIB_DEFAULT;

/// One block of 512 threads per 64 KiB, at most 528 (4 per SM of an
/// H200, all resident at once). One per 8 KiB measured slower at 1 and
/// 16 MiB.
fn bw_grid(len: u64) -> Grid {
    Grid { blocks: (len / (64 << 10)).clamp(1, 528) as u32, threads: 512 }
}

/// For 20 puts in one launch: one block per 64 KiB of all of them, at most 528.
fn loop_grid(len: u64) -> Grid {
    Grid { blocks: (len * 20 / (64 << 10)).clamp(1, 528) as u32, threads: 512 }
}

/// The byte at offset `i` of a message seeded `seed` (marrow_p2p_byte in the kernels).
fn byte(i: u64, seed: u32) -> u8 {
    (i.wrapping_mul(7).wrapping_add(u64::from(seed)).wrapping_add(i >> 11)) as u8
}

fn pattern(len: u64, seed: u32) -> Vec<u8> {
    (0..len).map(|i| byte(i, seed)).collect()
}

/// The launcher: both PEs, the rendezvous, the verdicts and the table; the
/// text goes to `o`, the figures come back as rows.
pub fn launcher(o: &mut dyn Write, sweep: bool) -> Res<FigureReport> {
    let n = Gpu::count()?;
    if n < 2 {
        return check(format!("transport P2P needs two GPUs; this machine has {n}"));
    }
    let dir = std::env::temp_dir().join(format!("marrow-p2p-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("rendezvous.sock");
    let listener = UnixListener::bind(&sock)?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for rank in 0..2 {
        children.push(
            std::process::Command::new(&exe)
                .args(["bench", "p2p-pe", "--rank", &rank.to_string(), "--socket"])
                .arg(&sock)
                .args(sweep.then_some("--sweep"))
                .spawn()?,
        );
    }
    let mut c = Collect::new("bench p2p", String::new());
    let res = serve(&listener, o, &mut c);
    for mut c in children {
        if res.is_err() {
            let _ = c.kill();
        }
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    res.map(|()| c.report)
}

/// A line from a PE, tagged with its rank; None when it hung up.
type Msg = (usize, Option<String>);

fn serve(listener: &UnixListener, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut writers = Vec::new();
    for _ in 0..2 {
        let (stream, _) = listener.accept()?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let mut first = String::new();
        let mut reader = BufReader::new(stream.try_clone()?);
        reader.read_line(&mut first)?;
        let mut it = first.split_whitespace();
        let (Some("hello"), Some(rank), Some(handle)) = (it.next(), it.next(), it.next()) else {
            return check(format!("a PE said {first:?} instead of hello"));
        };
        let rank: usize = rank.parse().map_err(|e| BenchError::Check(format!("a PE said rank {rank:?}: {e}")))?;
        writers.push((rank, stream, handle.to_string()));
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in reader.lines() {
                match line {
                    Ok(l) => {
                        if tx.send((rank, Some(l))).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send((rank, None));
        });
    }
    writers.sort_by_key(|w| w.0);
    if writers.iter().map(|w| w.0).collect::<Vec<_>>() != [0, 1] {
        return Err("the PEs did not say ranks 0 and 1".into());
    }
    for i in 0..2 {
        let peer = writers[1 - i].2.clone();
        writeln!(writers[i].1, "peer {peer}")?;
    }
    let mut waiting: [Option<String>; 2] = [None, None];
    let mut olds: Vec<u64> = Vec::new();
    let mut done = [false; 2];
    let mut failures = Vec::new();
    let mut devices = [String::new(), String::new()];
    while !(done[0] && done[1]) {
        let (rank, line) =
            rx.recv_timeout(Duration::from_secs(180)).map_err(|_| "a PE went silent for 180 s".to_string())?;
        let Some(line) = line else {
            done[rank] = true;
            if waiting[1 - rank].is_some() {
                failures.push(format!("PE {rank} exited while PE {} waited at a barrier", 1 - rank));
                break;
            }
            continue;
        };
        let (word, rest) = line.split_once(' ').unwrap_or((&line, ""));
        match word {
            "barrier" => {
                waiting[rank] = Some(rest.to_string());
                if waiting[0].is_some() && waiting[0] == waiting[1] {
                    for w in &mut writers {
                        writeln!(w.1, "go")?;
                    }
                    waiting = [None, None];
                }
            }
            "say" => writeln!(o, "  PE {rank}: {rest}")?,
            "fail" => {
                writeln!(o, "  PE {rank} FAILED: {rest}")?;
                failures.push(format!("PE {rank}: {rest}"));
            }
            "row" => match parse_row(rest) {
                Ok(row) => c.add(row),
                Err(e) => failures.push(format!("PE {rank}: {e}")),
            },
            "device" => devices[rank] = rest.to_string(),
            "olds" => olds.extend(rest.split(',').filter(|s| !s.is_empty()).filter_map(|s| s.parse::<u64>().ok())),
            _ => writeln!(o, "  PE {rank}: {line}")?,
        }
    }
    c.report.device = format!("GPU 0: {}; GPU 1: {}", devices[0], devices[1]);
    // Both PEs' fetch_adds on PE 0's counter: every value from 0 up exactly once.
    olds.sort_unstable();
    if olds.is_empty() || olds.iter().enumerate().any(|(i, &v)| v != i as u64) {
        failures.push(format!(
            "fetch_add from both PEs: the {} fetched values are not 0..{} each once",
            olds.len(),
            olds.len()
        ));
    } else {
        writeln!(
            o,
            "  fetch_add from both PEs at once: the {} fetched values are 0..{} each exactly once",
            olds.len(),
            olds.len() - 1
        )?;
    }
    if failures.is_empty() { Ok(()) } else { check(failures.join("; ")) }
}

/// A `row` line's JSON, as [`Link::row`] wrote it.
fn parse_row(json: &str) -> Res<Row> {
    serde_json::from_str(json).map_err(|e| BenchError::Check(format!("a row that does not parse ({e}): {json}")))
}

/// One PE: a process driving GPU `rank`.
pub fn pe(rank: u32, socket: &std::path::Path, sweep: bool) -> Res<()> {
    let stream = UnixStream::connect(socket)?;
    let mut link = Link { out: stream.try_clone()?, inp: BufReader::new(stream) };
    let r = pe_run(rank, &mut link, sweep);
    if let Err(x) = &r {
        let _ = writeln!(link.out, "fail {x}");
    }
    r
}

struct Link {
    out: UnixStream,
    inp: BufReader<UnixStream>,
}

impl Link {
    fn say(&mut self, s: &str) -> Res<()> {
        writeln!(self.out, "say {s}").map_err(BenchError::from)
    }

    /// A figure for the launcher's report, in its section.
    fn row(&mut self, section: &str, row: Row) -> Res<()> {
        let line = serde_json::to_string(&row.in_section(section))
            .map_err(|e| BenchError::Check(format!("a row as JSON: {e}")))?;
        writeln!(self.out, "row {line}").map_err(BenchError::from)
    }

    fn barrier(&mut self, name: &str) -> Res<()> {
        writeln!(self.out, "barrier {name}")?;
        let mut l = String::new();
        self.inp.read_line(&mut l)?;
        if l.trim() != "go" {
            return check(format!("barrier {name}: launcher said {l:?}"));
        }
        Ok(())
    }
}

fn hex(h: &IpcHandle) -> String {
    hex::encode(h)
}

fn unhex(s: &str) -> Res<IpcHandle> {
    let mut h = [0u8; 64];
    if s.len() != 128 {
        return check(format!("IPC handle of {} hex digits, not 128", s.len()));
    }
    hex::decode_to_slice(s, &mut h).map_err(|e| BenchError::Check(format!("IPC handle: {e}")))?;
    Ok(h)
}

fn ok(what: &str, rc: i32) -> Res<()> {
    if rc == 0 {
        Ok(())
    } else {
        check(format!("{what}: device code returned {rc} ({})", marrow_transport::DeviceError(rc)))
    }
}

fn pe_run(rank: u32, link: &mut Link, sweep: bool) -> Res<()> {
    let gpu = Gpu::open_ordinal(rank as usize)?;
    let win = gpu.window(WINDOW)?;
    writeln!(link.out, "hello {rank} {}", hex(&gpu.export(&win)?))?;
    let mut l = String::new();
    link.inp.read_line(&mut l)?;
    let peer_hex = l.trim().strip_prefix("peer ").ok_or_else(|| format!("expected the peer's handle, got {l:?}"))?;
    let peer = gpu.import(&unhex(peer_hex)?)?;
    let me = rank as usize;
    let mut keys = [(0u64, 0u64); 2];
    keys[me] = (win.addr, WINDOW as u64);
    keys[1 - me] = (peer.addr, WINDOW as u64);
    let page_shm = Shm::create("p2p-gcrb", 4096)?;
    let page = page_shm.region();
    let setup = p2p::P2pSetup { local: (win.addr, WINDOW as u64), keys, timeout_ns: 10_000_000_000, relay: None };
    p2p::fill(&page, &setup)?;
    let gcrb = gpu.upload(&page)?;
    let pg = gcrb.addr;
    // A second GCRB on the same windows whose puts of 32 MiB and more go to
    // the copy-engine relay (crates/transport/src/p2p_relay.rs); smaller
    // ones are its threads' stores, as on the first.
    let ring_shm = Shm::create("p2p-relay-ring", marrow_transport::p2p_relay::ring_bytes(RELAY_ENTRIES))?;
    gpu.register(&ring_shm.region())?;
    let relay =
        p2p::RelaySetup { ring: ring_shm.region().base_addr() as u64, entries: RELAY_ENTRIES, min_kib: RELAY_MIN_KIB };
    let relay_page_shm = Shm::create("p2p-gcrb-relay", 4096)?;
    let relay_page = relay_page_shm.region();
    p2p::fill(&relay_page, &p2p::P2pSetup { relay: Some(relay), ..setup })?;
    let relay_gcrb = gpu.upload(&relay_page)?;
    let rpg = relay_gcrb.addr;
    let bounds = RelayBounds { src: (win.addr, WINDOW as u64), dst: keys.to_vec() };
    let relay_thread = Relay::start(ring_shm.region(), RELAY_ENTRIES, bounds, Box::new(gpu.relay_engine(rpg)?))?;
    let r = pe_checks_and_figures(rank, link, sweep, &gpu, &win, &peer, pg, rpg);
    let made = relay_thread.stop();
    gpu.unregister(&ring_shm.region())?;
    match (r, made) {
        (Ok(()), Ok(made)) => link.say(&format!("copy-engine relay: {made} copies made, none refused"))?,
        (r, made) => {
            // What the relay GCRB recorded (a RELAY wait's heads), and why the relay stopped.
            let report = gpu.download(&relay_gcrb, &relay_page).map(|_| gcrb_page::report(&relay_page));
            let why = [r.err().map(|e| e.to_string()), made.err().map(|m| m.to_string()), report.ok()];
            return check(why.into_iter().flatten().collect::<Vec<_>>().join("; "));
        }
    }
    link.barrier("end")?;
    Ok(())
}

/// Every operation's check, then (rank 0) the figures; `pg` stores only,
/// `rpg` with the relay.
#[allow(clippy::too_many_arguments)]
fn pe_checks_and_figures(
    rank: u32,
    link: &mut Link,
    sweep: bool,
    gpu: &Gpu,
    win: &p2p::Window,
    peer: &p2p::PeerWindow,
    pg: u64,
    rpg: u64,
) -> Res<()> {
    let other = 1 - rank;
    writeln!(link.out, "device {} ({}), {}", gpu.name, gpu.arch, gpu.kernels)?;
    link.say(&format!(
        "{} ({}): window {} MiB at {:#x}, peer's mapped at {:#x}",
        gpu.name,
        gpu.arch,
        WINDOW >> 20,
        win.addr,
        peer.addr
    ))?;

    // Sources: 256 MiB of our seeded pattern (the largest bandwidth message).
    gpu.write_window(win, SRC as usize, &pattern(256 << 20, rank))?;
    link.barrier("filled")?;

    // Puts, by the threads' stores, by TMA bulk stores (with a size that
    // is not a multiple of 16, which TMA leaves to the threads) and through
    // the copy-engine relay (one block, one descriptor per put): ours land
    // in the peer's DST, the peer's in ours, checked here on a cleared DST.
    let ways = [("thread stores", false, false), ("TMA bulk stores", true, false), ("copy-engine relay", false, true)];
    for (how, tma, relayed) in ways {
        let lens: &[u64] = if relayed {
            &[32 << 20, (32 << 20) + 5, 64 << 20]
        } else {
            &[8, 4096, 65536, 1 << 20, (1 << 20) + 5, 64 << 20]
        };
        for &len in lens {
            let (page, grid) = if relayed { (rpg, Grid { blocks: 1, threads: 32 }) } else { (pg, bw_grid(len)) };
            gpu.write_window(win, DST as usize, &vec![0u8; len as usize])?;
            link.barrier(&format!("put {len} {how} cleared"))?;
            let (_, rc) = gpu.p2p_put(page, other, DST, SRC, len, grid, 1, 1, tma)?;
            ok("put", rc)?;
            link.barrier(&format!("put {len} {how}"))?;
            let mut got = vec![0u8; len as usize];
            gpu.read_window(win, DST as usize, &mut got)?;
            same_bytes(&format!("put of {len} B from PE {other} ({how})"), &got, &pattern(len, other))?;
            link.say(&format!(
                "put {len:>9} B from PE {other} ({how}, grid {} x {}): every byte checked here",
                grid.blocks, grid.threads
            ))?;
        }
    }
    link.barrier("puts checked")?;

    // Gets: the peer's SRC into our DST, one thread.
    for len in [8u32, 4096, 1 << 20] {
        gpu.write_window(win, DST as usize, &vec![0u8; len as usize])?;
        ok("get", gpu.get_at(pg, other, SRC, DST, len)?)?;
        let mut got = vec![0u8; len as usize];
        gpu.read_window(win, DST as usize, &mut got)?;
        same_bytes(&format!("get of {len} B from PE {other}"), &got, &pattern(u64::from(len), other))?;
        link.say(&format!("get {len:>9} B from PE {other}: every byte checked"))?;
    }
    link.barrier("gets")?;

    // Atomics: both PEs add to PE 0's counter at once.
    let grid = Grid { blocks: 66, threads: 64 };
    let (rcs, olds) = gpu.fetch_add(pg, 0, COUNTER, 2, RESULTS, grid)?;
    if let Some(rc) = rcs.iter().find(|&&r| r != 0) {
        ok("fetch_add", *rc)?;
    }
    writeln!(link.out, "olds {}", olds.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","))?;
    link.barrier("fetch_add")?;
    if rank == 0 {
        let mut c = [0u8; 8];
        gpu.read_window(win, COUNTER as usize, &mut c)?;
        let want = 2 * grid.size() as u64 * 2;
        if u64::from_le_bytes(c) != want {
            return check(format!("PE 0's counter is {} after both PEs' {want} adds", u64::from_le_bytes(c)));
        }
        link.say(&format!("fetch_add: counter {want} after {} adds from each PE", want / 2))?;
    } else {
        let (rc, old) = gpu.compare_swap(pg, 0, CAS_WORD, 5, 9, SCRATCH)?;
        ok("compare_swap", rc)?;
        let (rc2, old2) = gpu.compare_swap(pg, 0, CAS_WORD, 0, 77, SCRATCH)?;
        ok("compare_swap", rc2)?;
        if (old, old2) != (0, 0) {
            return check(format!("compare_swap on PE 0 fetched {old} and {old2}, expected 0 and 0"));
        }
    }
    link.barrier("cas")?;
    if rank == 0 {
        let mut c = [0u8; 8];
        gpu.read_window(win, CAS_WORD as usize, &mut c)?;
        if u64::from_le_bytes(c) != 77 {
            return check(format!("PE 1's compare_swaps left {} in PE 0's word, expected 77", u64::from_le_bytes(c)));
        }
        link.say("compare_swap from PE 1: a failed compare left 0, a hit swapped in 77")?;
    }

    // put_signal: PE 0 puts and signals, 1 MiB by its stores, then 32 MiB
    // through the relay; PE 1 waits for each signal, then checks every byte
    // on the GPU.
    for (round, page, how, sig_len) in
        [(1u64, pg, "thread stores", 1u64 << 20), (2, rpg, "copy-engine relay", u64::from(RELAY_MIN_KIB) << 10)]
    {
        if rank == 1 {
            gpu.write_window(win, DST as usize, &vec![0u8; sig_len as usize])?;
        }
        link.barrier(&format!("signal {round}"))?;
        if rank == 0 {
            ok("put_signal", gpu.put_signal(page, 1, DST, SRC, sig_len as u32, SIGNAL, 1, SCRATCH)?)?;
        } else {
            let (rc, bad) = gpu.p2p_wait_check(pg, SIGNAL, round, DST, sig_len, 0)?;
            ok("wait_until_ge", rc)?;
            if bad != 0 {
                return check(format!(
                    "put_signal ({how}): {bad} of {sig_len} bytes were not there when the signal was"
                ));
            }
            link.say(&format!("put_signal from PE 0 ({how}): all {} MiB there when the signal was (checked on the GPU after wait_until_ge)", sig_len >> 20))?;
        }
        link.barrier(&format!("signal {round} done"))?;
    }

    // Round trips: the API (p + wait_until_ge) and the floor (plain stores
    // and loads on the mapped addresses), best of 3 each, interleaved.
    let iters = 10_000u32;
    let mut best = [u64::MAX; 2];
    let mut base = 0u64;
    for round in 0..6 {
        let floor = round % 2 == 0;
        link.barrier(&format!("pingpong {round}"))?;
        let (rc, ns) = gpu.p2p_pingpong(pg, rank, PINGPONG, base, iters, floor)?;
        ok("pingpong", rc)?;
        base += u64::from(iters);
        let b = &mut best[usize::from(!floor)];
        *b = (*b).min(ns);
    }
    if rank == 0 {
        let (floor, api) = (best[0] as f64 / f64::from(iters), best[1] as f64 / f64::from(iters));
        link.say(&format!(
            "RESULT p2p 8 B round trip: marrow p + wait_until_ge {:.3} us; floor (plain peer stores and loads) {:.3} us; ratio {:.3} (target <= 1.2)",
            api / 1e3,
            floor / 1e3,
            api / floor
        ))?;
        link.row("round trip", gpu_rows::p2p_round_trip(api, floor))?;
    }

    // Bandwidth PE 0 -> PE 1, 20 back-to-back after 3 warm-ups, against
    // the copy engine into the same mapped window.
    link.barrier("bandwidth")?;
    if rank == 0 {
        for len in BW_SIZES {
            let grid = bw_grid(len);
            gpu.copy_to_peer(peer, DST, win, SRC, len as usize, 3)?;
            let ft = gpu.copy_to_peer(peer, DST, win, SRC, len as usize, 20)?;
            let floor = (len * 20) as f64 / ft.as_secs_f64() / 1e9;
            // Launched per put (thread stores, then TMA), and GPU-initiated as
            // NVSHMEM's shmem_put_bw measures: one launch puts the message 20
            // times back to back, then quiets. Wall time around 20 puts, as
            // for the copy engine's 20.
            // Through the relay, one block posts the 20 descriptors and quiets.
            let shapes = [
                ("thread stores", pg, grid, 20, 1, false),
                ("TMA bulk stores", pg, grid, 20, 1, true),
                ("20 puts in one launch, one quiet", pg, loop_grid(len), 1, 20, false),
                (
                    "copy-engine relay, 20 puts in one launch, one quiet",
                    rpg,
                    Grid { blocks: 1, threads: 32 },
                    1,
                    20,
                    false,
                ),
            ];
            for (label, page, grid, launches, inner, tma) in shapes {
                if page == rpg && len < u64::from(RELAY_MIN_KIB) << 10 {
                    continue;
                }
                gpu.p2p_put(page, 1, DST, SRC, len, grid, launches.min(3), inner.min(3), tma)?;
                let (dt, rc) = gpu.p2p_put(page, 1, DST, SRC, len, grid, launches, inner, tma)?;
                ok("put (bandwidth)", rc)?;
                let bw = (len * 20) as f64 / dt.as_secs_f64() / 1e9;
                link.say(&format!(
                    "RESULT p2p put bandwidth {:>9} B ({label}, grid {} x {}): marrow {bw:.1} GB/s; copy engine into the peer's window (cudaMemcpyPeer's path) {floor:.1} GB/s; ratio {:.3}{}",
                    len,
                    grid.blocks,
                    grid.threads,
                    bw / floor,
                    if len >= 1 << 20 { " (target >= 0.95)" } else { "" }
                ))?;
                let grid = (grid.blocks, grid.threads);
                link.row("bandwidth", gpu_rows::p2p_bandwidth(len, label, grid, bw, floor))?;
            }
        }
        if sweep {
            for len in [16u64 << 20, 256 << 20] {
                let ft = gpu.copy_to_peer(peer, DST, win, SRC, len as usize, 20)?;
                let floor = (len * 20) as f64 / ft.as_secs_f64() / 1e9;
                for (blocks, threads) in
                    [(132u32, 1024u32), (264, 512), (264, 1024), (528, 256), (1056, 256), (1056, 512), (2112, 256)]
                {
                    let grid = Grid { blocks, threads };
                    gpu.p2p_put(pg, 1, DST, SRC, len, grid, 3, 1, false)?;
                    let (dt, rc) = gpu.p2p_put(pg, 1, DST, SRC, len, grid, 20, 1, false)?;
                    ok("put (sweep)", rc)?;
                    let bw = (len * 20) as f64 / dt.as_secs_f64() / 1e9;
                    link.say(&format!("sweep {len:>9} B grid {blocks:>4} x {threads:>4}: {bw:.1} GB/s; copy engine {floor:.1} GB/s; ratio {:.3}", bw / floor))?;
                    link.row("sweep", gpu_rows::p2p_sweep(len, (blocks, threads), bw, floor))?;
                }
            }
        }
        let mut got = vec![0u8; 4096];
        gpu.read_window(win, SRC as usize, &mut got)?;
        same_bytes("PE 0's source after the bandwidth runs", &got, &pattern(4096, 0))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_crosses_the_socket_as_one_line_and_parses_back() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut link = Link { out: a.try_clone().unwrap(), inp: BufReader::new(a) };
        let mut row = gpu_rows::p2p_bandwidth(16 << 20, "thread stores", (256, 512), 190.5, 200.25);
        // A name that would end the line if it were not escaped.
        row.figure.push_str("\nsecond line");
        link.row("bandwidth", row.clone()).unwrap();
        link.say("next").unwrap();
        let mut lines = BufReader::new(b).lines();
        let first = lines.next().unwrap().unwrap();
        let (word, rest) = first.split_once(' ').unwrap();
        assert_eq!(word, "row");
        assert_eq!(parse_row(rest).unwrap(), row.in_section("bandwidth"));
        assert_eq!(lines.next().unwrap().unwrap(), "say next");
        assert!(parse_row("{\"section\": 1}").is_err());
    }
}
