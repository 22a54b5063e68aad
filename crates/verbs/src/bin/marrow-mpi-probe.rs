//! Test helper for `tests/mpi_bootstrap.rs`: one rank of a job started by
//! `mpirun`; exchanges a rank-distinct [`RcEndpoint`] through
//! a [`Group`] of the launcher's ranks (the path `marrow bench mlx5` and
//! `marrow bench verbs` take under a launcher), meets them again at a
//! barrier, and prints one JSON line `{rank, size, via, all, barrier_ms}`.
//! With `MARROW_PROBE_LATE_MS=N`, the last rank sleeps N ms before the
//! barrier, so every other rank's `barrier_ms` shows that it waited.
//! Exits 2 with the error on stderr when the exchange cannot start.

use marrow_verbs::bootstrap;
use marrow_verbs::group::Group;
use marrow_verbs::qp::RcEndpoint;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let rank = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "MARROW_RANK"]
        .iter()
        .find_map(|k| env(k))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    // As `marrow bench mlx5` does: look at the route first (libmpi loaded
    // and dropped), then exchange (loaded again, initialised).
    if let Err(e) = bootstrap::route(env) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let timeout = Duration::from_secs(60);
    let met = Group::launched(env).and_then(|g| {
        let all = g.allgather(&RcEndpoint::sample(rank), timeout)?;
        let late = env("MARROW_PROBE_LATE_MS").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if g.rank() + 1 == g.size() {
            std::thread::sleep(Duration::from_millis(late));
        }
        let t = Instant::now();
        g.barrier(timeout)?;
        Ok((g.rank(), g.size(), g.via().to_string(), all, t.elapsed().as_millis() as u64))
    });
    match met {
        Ok((rank, size, via, all, barrier_ms)) => {
            let all: Vec<serde_json::Value> = all.iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect();
            println!(
                "{}",
                serde_json::json!({ "rank": rank, "size": size, "via": via, "all": all, "barrier_ms": barrier_ms })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
