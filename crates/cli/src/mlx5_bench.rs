//! `marrow bench mlx5`: the hardware backend on a lab node (two ranks, one
//! ConnectX port each). Everywhere else it exits with the error naming what
//! is missing (the library, or an RDMA device). With `--json` or `--csv`
//! the progress lines go to stderr (rank 0's token among them) and stdout
//! is the report.

use crate::bench_out;
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `marrow bench mlx5`.
#[derive(ClapArgs, Debug, Clone)]
#[command(after_help = "\
Rank 0: marrow bench mlx5 --listen 0.0.0.0:18515   (prints the token for rank 1)
Rank 1: marrow bench mlx5 --connect HOST:18515:ID
Under a launcher (mpirun -np 2, srun -n 2, PMI/PMIx), give neither: rank and size
come from the launcher's environment. Under mpirun with Open MPI or MPICH installed,
libmpi is loaded at run time (MARROW_MPI_LIB overrides which) and the endpoints are
exchanged by MPI_Allgather; nothing else to pass. Otherwise (srun, PMIx: marrow does
not link libpmix) rank 0's rendezvous comes from MARROW_BOOTSTRAP=HOST:PORT
(srun --export=ALL,MARROW_BOOTSTRAP=node0:18515 ...).

Exit status: 0 when the run passed, 1 when a check failed, 2 when the backend
cannot start here (no rdma-core, no mlx5 device, port down).")]
pub struct Args {
    /// RDMA device (default: the first mlx5 device).
    #[arg(long)]
    pub device: Option<String>,
    /// Port number.
    #[arg(long, default_value_t = 1)]
    pub port: u8,
    /// GID index (RoCE v2: see `show_gids`).
    #[arg(long, default_value_t = 0)]
    pub gid_index: u8,
    /// Rank 0: listen for rank 1 on ADDR (host:port).
    #[arg(long, conflicts_with = "connect")]
    pub listen: Option<String>,
    /// Rank 1: connect with the token rank 0 printed (host:port:id).
    #[arg(long)]
    pub connect: Option<String>,
    /// Timed put+quiet iterations.
    #[arg(long, default_value_t = 10_000)]
    pub iters: usize,
    /// Bytes of the checked put.
    #[arg(long, default_value_t = 65536)]
    pub size: u32,
    /// sysfs root (for the device probe and error messages).
    #[arg(long, default_value = "/sys")]
    pub sysfs_root: PathBuf,
    /// procfs root.
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Rank 0 also runs the device code in GPU threads against the NIC (the
    /// UAR mapped into the GPU, or the CPU proxy when the driver refuses).
    #[arg(long)]
    pub gpu: bool,
    /// `--json`, `--csv`.
    #[command(flatten)]
    pub output: crate::bench_out::FormatArgs,
}

/// Run it: print progress and results; the exit status says how it went.
pub fn main(a: &Args) -> ExitCode {
    use marrow_transport::mlx5::{Mlx5Error, bench};
    let f = a.output.format();
    // The text on stdout, or out of the report's way on stderr.
    let line = |l: &str| if f.is_text() { println!("{l}") } else { eprintln!("{l}") };
    line("marrow bench mlx5: the ConnectX backend over rdma-core (host-memory queues, device code on a CPU thread)");
    let mut listen = a.listen.clone();
    let mut connect = a.connect.clone();
    let mut id = None;
    let mut by_launcher = false;
    if listen.is_none() && connect.is_none() {
        use marrow_verbs::bootstrap::Route;
        match marrow_verbs::bootstrap::route(|k| std::env::var(k).ok()) {
            Ok(Some(Route::Mpi { mpi, launch: l })) if l.size == 2 => {
                line(&format!(
                    "launcher: {} (rank {} of {}), endpoints by MPI_Allgather ({} {})",
                    l.launcher,
                    l.rank,
                    l.size,
                    mpi.flavour(),
                    mpi.path
                ));
                by_launcher = true;
            }
            Ok(Some(Route::Tcp(l))) if l.size == 2 => {
                let root = l.root.clone().unwrap_or_default();
                let rid = l.id.clone().unwrap_or_else(|| "marrow".into());
                line(&format!("launcher: {} (rank {} of {}), rendezvous {root} id {rid}", l.launcher, l.rank, l.size));
                if l.rank == 0 {
                    let port = root.rsplit(':').next().unwrap_or("18515");
                    listen = Some(format!("0.0.0.0:{port}"));
                    id = Some(rid);
                } else {
                    connect = Some(format!("{root}:{rid}"));
                }
            }
            Ok(Some(Route::Mpi { launch: l, .. } | Route::Tcp(l))) => {
                return bench_out::fail(
                    f,
                    format!("{} started {} ranks; marrow bench mlx5 runs exactly 2", l.launcher, l.size),
                    2,
                );
            }
            Ok(None) => {}
            Err(e) => return bench_out::fail(f, e, 2),
        }
    }
    if !by_launcher && listen.is_none() && connect.is_none() {
        // Still open the backend: on a machine without a NIC that is the
        // useful message; with one, say how to start the two ranks.
        if let Err(e) = marrow_transport::mlx5::open(&a.sysfs_root, &a.proc_root) {
            return bench_out::fail(f, e, 2);
        }
        return bench_out::fail(f, "give --listen ADDR (rank 0) or --connect TOKEN (rank 1); see --help", 2);
    }
    let o = bench::BenchOpts {
        device: a.device.clone(),
        port: a.port,
        gid_index: a.gid_index,
        listen,
        connect,
        id,
        iters: a.iters,
        size: a.size,
        roots: (a.sysfs_root.clone(), a.proc_root.clone()),
        gpu: a.gpu,
    };
    match bench::run(&o, &mut |l| line(l)) {
        Ok(run) if f.is_text() => {
            print!("{}", run.text);
            ExitCode::SUCCESS
        }
        Ok(run) => {
            eprint!("{}", run.text);
            bench_out::print(f, &report(&run))
        }
        Err(e @ (Mlx5Error::Verbs(_) | Mlx5Error::Cuda(_))) => bench_out::fail(f, e, 2),
        Err(e) => bench_out::fail(f, e, 1),
    }
}

/// A rank's figures as the report `--json` and `--csv` print.
pub fn report(run: &marrow_transport::mlx5::bench::Run) -> marrow_bench::FigureReport {
    use marrow_bench::figure_report::{Collect, Row};
    let mut c = Collect::new("bench mlx5", run.device.clone());
    for x in &run.figures {
        c.add(Row::new(x.name.clone(), x.value, x.unit).in_section(x.section));
    }
    c.report
}

#[cfg(test)]
mod tests {
    use marrow_transport::mlx5::bench::{Figure, Run};

    #[test]
    fn a_ranks_figures_become_rows_without_a_floor() {
        let run = Run {
            text: "8 B put+quiet x10: p50 2.1µs p99 3µs max 9µs\n".into(),
            device: "mlx5_0 port 1".into(),
            figures: vec![
                Figure { section: "CPU thread", name: "8 B put+quiet x10: p50".into(), value: 2.1, unit: "us" },
                Figure {
                    section: "GPU threads",
                    name: "GPU 8 B blocking put x10 (GPU clock)".into(),
                    value: 4.5,
                    unit: "us",
                },
            ],
        };
        let r = super::report(&run);
        let v: serde_json::Value = serde_json::from_str(&marrow_bench::figure_report::json(&r).unwrap()).unwrap();
        assert_eq!((v["bench"].as_str(), v["device"].as_str()), (Some("bench mlx5"), Some("mlx5_0 port 1")));
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        for (row, f) in rows.iter().zip(&run.figures) {
            assert_eq!(row["section"], f.section);
            assert_eq!(row["figure"], f.name.as_str());
            assert_eq!(row["measured"], f.value);
            assert_eq!(row["measured_unit"], f.unit);
            for k in ["floor", "floor_unit", "floor_name", "ratio", "ratio_of", "target", "target_met"] {
                assert!(row[k].is_null(), "{k}: {row}");
            }
        }
        let csv = marrow_bench::figure_report::csv(&r).unwrap();
        let mut rd = csv::Reader::from_reader(csv.as_bytes());
        let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(&recs[1][0], "GPU threads");
        assert_eq!(recs[1][2].parse::<f64>().unwrap(), 4.5);
    }
}
