//! `marrow bench verbs`: the verbs proxy backend on any RDMA device, two
//! ranks (`marrow_transport::verbs_proxy::bench`). With `--ib-write-lat` and
//! `--ib-write-bw` (perftest's output on the same device in the same run) it
//! prints the proxy's 8 B put latency and message rate as ratios to them.

use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `marrow bench verbs`.
#[derive(ClapArgs, Debug, Clone)]
#[command(after_help = "\
Rank 0: marrow bench verbs --device rxe0 --listen 127.0.0.1:18900   (prints the token for rank 1)
Rank 1: marrow bench verbs --device rxe0 --connect 127.0.0.1:18900:ID
Under mpirun (libmpi loaded at run time) or with MARROW_BOOTSTRAP=HOST:PORT, give neither.

Exit status: 0 when the run passed, 1 when a check failed, 2 when the backend
cannot start here (no libibverbs, no RDMA device, port down, a refused channel).")]
pub struct Args {
    /// RDMA device of any provider (default: the first listed).
    #[arg(long)]
    pub device: Option<String>,
    /// Port number.
    #[arg(long, default_value_t = 1)]
    pub port: u8,
    /// GID index (default: the port's RoCE v2 GID with an IPv4 address, from sysfs).
    #[arg(long)]
    pub gid_index: Option<u8>,
    /// Rank 0: listen for rank 1 on ADDR (host:port).
    #[arg(long, conflicts_with = "connect")]
    pub listen: Option<String>,
    /// Rank 1: connect with the token rank 0 printed (host:port:id).
    #[arg(long)]
    pub connect: Option<String>,
    /// Rank 0: the rendezvous id to expect (default: a fresh one, printed).
    #[arg(long)]
    pub id: Option<String>,
    /// Timed 8 B put+quiet iterations.
    #[arg(long, default_value_t = 1000)]
    pub iters: u32,
    /// 8 B non-blocking puts for the message rate.
    #[arg(long, default_value_t = 1000)]
    pub burst: u32,
    /// Run a fault instead of the checks: `bad-rkey` (REMOTE_ACCESS_ERR
    /// 0x13 expected) or `vanished-peer` (rank 1 leaves;
    /// TRANSPORT_RETRY_EXC_ERR 0x15 expected).
    #[arg(long, value_parser = ["bad-rkey", "vanished-peer"])]
    pub fault: Option<String>,
    /// Ask the channel for masked atomics (refused: verbs has none).
    #[arg(long)]
    pub masked_atomics: bool,
    /// Seconds for every device-side wait and the bootstrap.
    #[arg(long, default_value_t = 60)]
    pub timeout_s: u64,
    /// Rank 0: `ib_write_lat -s 8` output on the same device, for the latency ratio.
    #[arg(long, value_name = "FILE")]
    pub ib_write_lat: Option<PathBuf>,
    /// Rank 0: `ib_write_bw -s 8` output on the same device, for the message-rate ratio.
    #[arg(long, value_name = "FILE")]
    pub ib_write_bw: Option<PathBuf>,
}

/// The value of column `col` in the first data row of perftest's table
/// whose header names `want`.
fn perftest_column(text: &str, want: &str, col: usize) -> Result<f64, String> {
    let mut header_ok = false;
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"#bytes") {
            // Header words and data columns differ ("BW peak[MB/sec]" is two
            // words, one column): the header must name the figure, the
            // column is perftest's (`print_report_bw`, `print_report_lat`).
            header_ok = w.iter().any(|h| h.starts_with(want));
            if !header_ok {
                return Err(format!("perftest's header does not name {want}: {l}"));
            }
            continue;
        }
        if header_ok && w.first().is_some_and(|t| t.parse::<u64>().is_ok()) {
            let v: f64 =
                w.get(col).and_then(|v| v.parse().ok()).ok_or_else(|| format!("no number in column {col}: {l}"))?;
            if !v.is_finite() || v <= 0.0 {
                return Err(format!(
                    "perftest measured nothing ({want} = {v}: its TSC calibration failed, \"Correlation coefficient\" in its output)"
                ));
            }
            return Ok(v);
        }
    }
    Err(format!("no perftest table with {want}"))
}

/// Run it.
pub fn main(a: &Args) -> ExitCode {
    use marrow_transport::verbs_proxy::{ProxyError, RankOpts, bench};
    println!(
        "marrow bench verbs: the verbs proxy (device code on a CPU thread; the softnic's engine drives a verbs RC QP)"
    );
    let mode = match a.fault.as_deref() {
        Some("bad-rkey") => bench::Mode::BadRkey,
        Some("vanished-peer") => bench::Mode::VanishedPeer,
        _ => bench::Mode::Check,
    };
    let o = bench::BenchOpts {
        rank: RankOpts {
            device: a.device.clone(),
            port: a.port,
            gid_index: a.gid_index,
            listen: a.listen.clone(),
            connect: a.connect.clone(),
            id: a.id.clone(),
            timeout: Duration::from_secs(a.timeout_s),
            masked_atomics: a.masked_atomics,
            ..RankOpts::default()
        },
        mode,
        iters: a.iters,
        burst: a.burst,
    };
    let mut say = |l: &str| println!("{l}");
    match bench::run(&o, &mut say) {
        Ok(run) => {
            print!("{}", run.text);
            let fig = |n: &str| run.figures.iter().find(|f| f.name == n).map(|f| f.value);
            if let (Some(path), Some(p50)) = (&a.ib_write_lat, fig("put8_lat_p50")) {
                match std::fs::read_to_string(path)
                    .map_err(|e| e.to_string())
                    .and_then(|t| perftest_column(&t, "t_typical", 4))
                {
                    Ok(t) => println!(
                        "ratio - 8 B put+quiet p50 {p50:.2} us / ib_write_lat t_typical {t:.2} us = {:.2} \
                         (put+quiet waits for the ACK: a round trip; ib_write_lat reports half its ping-pong's)",
                        p50 / t
                    ),
                    Err(e) => println!("ratio unavailable - ib_write_lat output {}: {e}", path.display()),
                }
            }
            if let (Some(path), Some(rate)) = (&a.ib_write_bw, fig("put8_rate")) {
                match std::fs::read_to_string(path)
                    .map_err(|e| e.to_string())
                    .and_then(|t| perftest_column(&t, "MsgRate", 4))
                {
                    Ok(mpps) => println!(
                        "ratio - 8 B put_nbi rate {:.4} Mpps / ib_write_bw MsgRate {mpps:.4} Mpps = {:.3}",
                        rate / 1e6,
                        rate / 1e6 / mpps
                    ),
                    Err(e) => println!("ratio unavailable - ib_write_bw output {}: {e}", path.display()),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e @ (ProxyError::Verbs(_) | ProxyError::Refused(_))) => {
            println!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            println!("not ok - {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::perftest_column;

    #[test]
    fn perftest_tables_are_read_by_header() {
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n 8       1000          2.13           9.54         2.20                2.25\n";
        assert_eq!(perftest_column(lat, "t_typical", 4), Ok(2.20));
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 8          5000             9.42               9.38               1.229000\n";
        assert_eq!(perftest_column(bw, "MsgRate", 4), Ok(1.229));
        assert!(perftest_column(bw, "t_typical", 4).is_err());
        assert!(perftest_column("nothing", "MsgRate", 4).is_err());
        let inf = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 8       1000          inf            inf          inf\n";
        assert!(perftest_column(inf, "t_typical", 4).unwrap_err().contains("TSC calibration"));
    }
}
