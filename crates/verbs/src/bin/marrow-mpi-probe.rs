//! Test helper for `tests/mpi_bootstrap.rs`: one rank of a job started by
//! `mpirun`; exchanges a rank-distinct [`RcEndpoint`] through
//! [`bootstrap::allgather_endpoints`] (the path `marrow bench mlx5` takes
//! under a launcher) and prints one JSON line `{rank, size, via, all}`.
//! Exits 2 with the error on stderr when the exchange cannot start.

use marrow_verbs::bootstrap;
use marrow_verbs::qp::RcEndpoint;
use std::process::ExitCode;
use std::time::Duration;

/// A record only rank `r` would send: every field differs between ranks.
fn endpoint(r: u32) -> RcEndpoint {
    RcEndpoint {
        qpn: 0x1_0000 + r,
        lid: 0x100 + r as u16,
        gid: std::array::from_fn(|i| (r as u8).wrapping_mul(16).wrapping_add(i as u8)),
        psn: 0x00ab_cd00 + r,
        rkey: 0xdead_0000 + r,
        addr: 0x7f00_0000_0000 + u64::from(r) * 4096,
        len: 1 << (20 + r),
    }
}

fn main() -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let rank = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "MARROW_RANK"].iter().find_map(|k| env(k)).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    // As `marrow bench mlx5` does: look at the route first (libmpi loaded
    // and dropped), then exchange (loaded again, initialised).
    if let Err(e) = bootstrap::route(env) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    match bootstrap::allgather_endpoints(env, &endpoint(rank), Duration::from_secs(60)) {
        Ok(g) => {
            let all: Vec<serde_json::Value> = g.all.iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect();
            println!("{}", serde_json::json!({ "rank": g.rank, "size": g.size, "via": g.via, "all": all }));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
