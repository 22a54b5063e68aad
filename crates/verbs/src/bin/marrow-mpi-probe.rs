//! Test helper for `tests/mpi_bootstrap.rs`: one rank of a job started by
//! `mpirun`; exchanges a rank-distinct [`RcEndpoint`] through
//! [`bootstrap::allgather_endpoints`] (the path `marrow bench mlx5` takes
//! under a launcher) and prints one JSON line `{rank, size, via, all}`.
//! Exits 2 with the error on stderr when the exchange cannot start.

use marrow_verbs::bootstrap;
use marrow_verbs::qp::RcEndpoint;
use std::process::ExitCode;
use std::time::Duration;

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
    match bootstrap::allgather_endpoints(env, &RcEndpoint::sample(rank), Duration::from_secs(60)) {
        Ok(g) => {
            let all: Vec<serde_json::Value> =
                g.all.iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect();
            println!("{}", serde_json::json!({ "rank": g.rank, "size": g.size, "via": g.via, "all": all }));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
