//! `cargo bench -p marrow --bench trace_throughput`: how fast `marrow trace
//! show` and `marrow trace stats` get through a large trace, each as MB/s
//! and as a ratio to a plain read of the same file in the same run (what
//! `cat FILE > /dev/null` costs), so the figures mean the same on any machine.
//!
//! The trace is a real one (`marrow demo --quick`) repeated, with its
//! timestamps moved on each time, to `MARROW_TRACE_BENCH_MB` MB (default 300)
//! in a temporary directory removed at the end.

use marrow::trace::{Detail, Filter, ShowOptions, show};
use marrow_softnic::trace::{self as st, Kind};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A temporary directory that is removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Write the records of `seed` again and again until the file holds `target` bytes.
fn write_large(seed: &[st::Record], path: &Path, target: u64) -> std::io::Result<u64> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    w.write_all(st::MAGIC)?;
    w.write_all(&st::VERSION.to_le_bytes())?;
    w.write_all(&0u32.to_le_bytes())?;
    let mut written = 16u64;
    let span = seed.last().map_or(0, |r| r.t_ns) + 1;
    let mut shift = 0u64;
    while written < target {
        for r in seed {
            w.write_all(&(r.t_ns + shift).to_le_bytes())?;
            w.write_all(&[r.kind.0, 0])?;
            w.write_all(&(r.bytes.len() as u16).to_le_bytes())?;
            w.write_all(&r.qpn.to_le_bytes())?;
            w.write_all(&r.obj.to_le_bytes())?;
            w.write_all(&0u32.to_le_bytes())?;
            w.write_all(&r.addr.to_le_bytes())?;
            w.write_all(&r.bytes)?;
            written += 32 + r.bytes.len() as u64;
        }
        shift += span;
    }
    w.flush()?;
    Ok(written)
}

/// Seconds `f` takes.
fn time(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn plain_read(path: &Path) -> std::io::Result<()> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// What one measurement does with the file.
enum Work {
    /// `trace show` with these options, its output to a sink.
    Show(ShowOptions),
    /// `trace stats`.
    Stats,
}

fn run(path: &Path, work: &Work) {
    let Ok(f) = std::fs::File::open(path) else { return };
    let src = BufReader::with_capacity(1 << 16, f);
    match work {
        Work::Show(opts) => drop(show(src, opts, &mut std::io::sink())),
        Work::Stats => drop(marrow::trace_stats::stats(src)),
    }
}

fn main() {
    let mb: u64 = std::env::var("MARROW_TRACE_BENCH_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let dir = TempDir(std::env::temp_dir().join(format!("marrow-trace-bench-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(&dir.0) {
        eprintln!("error: cannot create {}: {e}", dir.0.display());
        std::process::exit(2);
    }
    let seed_path = dir.0.join("seed.trace");
    let demo = std::process::Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["demo", "--quick", "--trace-out"])
        .arg(&seed_path)
        .output();
    let seed = match demo.map(|_| std::fs::read(&seed_path)) {
        Ok(Ok(bytes)) => st::parse(&bytes).0,
        _ => Vec::new(),
    };
    if seed.is_empty() {
        eprintln!("error: `marrow demo --quick` wrote no trace to repeat");
        std::process::exit(2);
    }
    let path = dir.0.join("large.trace");
    let size = match write_large(&seed, &path, mb * 1_000_000) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: writing {}: {e}", path.display());
            std::process::exit(2);
        }
    };
    let records =
        seed.len() as f64 * (size as f64 / (16 + seed.iter().map(|r| 32 + r.bytes.len()).sum::<usize>()) as f64);
    println!(
        "trace: {} MB, about {:.2e} records ({} seed records from `marrow demo --quick`)",
        size / 1_000_000,
        records,
        seed.len()
    );

    let brief = |filter: Filter| Work::Show(ShowOptions { filter, detail: Detail::Brief, ..ShowOptions::default() });
    let cases = [
        ("show --errors (filter, nothing matches)", brief(Filter { errors: true, ..Filter::default() }), ">= 500 MB/s"),
        (
            "show --kind fault (header filter)",
            brief(Filter { kinds: vec![Kind::FAULT], ..Filter::default() }),
            ">= 500 MB/s",
        ),
        ("show --qp 0x101 --brief", brief(Filter { qps: vec![0x101], ..Filter::default() }), ">= 500 MB/s"),
        ("show --brief (every record)", brief(Filter::default()), ">= 500 MB/s"),
        ("show (full text decode)", Work::Show(ShowOptions::default()), ">= 100 MB/s"),
        ("show --full", Work::Show(ShowOptions { detail: Detail::Full, ..ShowOptions::default() }), ">= 100 MB/s"),
        ("stats", Work::Stats, "-"),
    ];
    // Twice, keeping the faster: the first read also warms the page cache.
    let read_s = time(|| drop(plain_read(&path))).min(time(|| drop(plain_read(&path))));
    let rate = |s: f64| size as f64 / s / 1e6;
    let read_rate = rate(read_s);
    println!("{:<44} {read_rate:>10.1} MB/s  ratio {:>6.4}  target -", "plain read (cat > /dev/null)", 1.0);
    for (name, work, target) in &cases {
        let r = rate(time(|| run(&path, work)));
        println!("{name:<44} {r:>10.1} MB/s  ratio {:>6.4}  target {target}", r / read_rate);
    }
}
