//! `marrow bench verbs`: the verbs proxy backend on any RDMA device, two
//! ranks (`marrow_transport::verbs_proxy::bench`). With `--perftest PORT`
//! rank 0 then runs perftest's `ib_write_lat` and `ib_write_bw` (8 B) on the
//! same device and prints the proxy's 8 B put latency and message rate as
//! ratios to them.

use clap::Args as ClapArgs;
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
    /// This rank on the softnic instead of a verbs device: its QPs on a
    /// RoCEv2 wire port (`udp:IP:PORT`, or `frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP`
    /// for QEMU's -netdev dgram), the device code's WQEs executed onto the
    /// wire by the softnic; the peer rank is any stack (a verbs rank on rxe).
    #[arg(long, value_name = "SPEC", value_parser = crate::port_spec::parse, conflicts_with_all = ["device", "gid_index", "perftest"])]
    pub wire: Option<marrow_softnic::rc::port::PortKind>,
    /// With --wire: the path MTU, the peer's (a verbs rank uses its port's
    /// active MTU: 4096 for rxe on a 9000-byte netdev).
    #[arg(long, default_value_t = 4096, value_parser = parse_mtu, requires = "wire")]
    pub wire_mtu: u32,
    /// Rank 0: first run the device code in GPU threads on the same channel
    /// (a put and get checked, 8 x 128 threads putting, the 8 B blocking
    /// put's latency on the GPU clock), then the CPU thread's checks.
    #[arg(long)]
    pub gpu: bool,
    /// `--json`, `--csv`.
    #[command(flatten)]
    pub output: crate::bench_out::FormatArgs,
    /// With --wire: write every frame of the port to this pcap.
    #[arg(long, value_name = "FILE", requires = "wire")]
    pub pcap: Option<std::path::PathBuf>,
    /// Seconds for every device-side wait and the bootstrap.
    #[arg(long, default_value_t = 60)]
    pub timeout_s: u64,
    /// Rank 0, after the checks: time perftest's `ib_write_lat` and
    /// `ib_write_bw` (8 B) on the same device, server and client here, TCP
    /// port PORT and the next, and print the proxy's figures as ratios to them.
    #[arg(long, value_name = "PORT")]
    pub perftest: Option<u16>,
    /// perftest iterations: the short run (its setup) and the long run; the
    /// per-iteration time is the difference of their wall times over the
    /// difference of the counts.
    #[arg(long, value_name = "SHORT,LONG", default_value = "100,2000", value_parser = parse_pair)]
    pub perftest_lat_iters: (u32, u32),
    /// As `--perftest-lat-iters`, for `ib_write_bw`.
    #[arg(long, value_name = "SHORT,LONG", default_value = "1000,20000", value_parser = parse_pair)]
    pub perftest_bw_iters: (u32, u32),
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(m @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(m),
        _ => Err(format!("{s}: a path MTU is 256, 512, 1024, 2048 or 4096")),
    }
}

fn parse_pair(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s.split_once(',').ok_or("SHORT,LONG")?;
    let (a, b) = (a.parse::<u32>().map_err(|e| e.to_string())?, b.parse::<u32>().map_err(|e| e.to_string())?);
    if a >= b || a < 5 {
        return Err(format!("{a},{b}: SHORT must be at least 5 and below LONG"));
    }
    Ok((a, b))
}

/// One perftest pair on loopback: the server in the background, then the
/// client, timed by the wall clock; returns its time and output.
fn perftest_pair(tool: &str, dev: &str, gid: u8, port: u16, iters: u32) -> Result<(Duration, String), String> {
    use std::process::{Command, Stdio};
    let args = |c: &mut Command| {
        c.args(["-d", dev, "-x", &gid.to_string(), "-s", "8", "-n", &iters.to_string(), "-p", &port.to_string(), "-F"]);
    };
    let mut sc = Command::new(tool);
    args(&mut sc);
    let mut server =
        sc.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("starting {tool}: {e}"))?;
    std::thread::sleep(Duration::from_secs(1));
    let mut cc = Command::new(tool);
    args(&mut cc);
    cc.arg("127.0.0.1");
    let t0 = std::time::Instant::now();
    let out = cc.output().map_err(|e| format!("running {tool}: {e}"));
    let wall = t0.elapsed();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let server_ok = loop {
        match server.try_wait() {
            Ok(Some(st)) => break st.success(),
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = server.kill();
                let _ = server.wait();
                break false;
            }
        }
    };
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !server_ok {
        return Err(format!("{tool} -n {iters} failed (client {}, server ok {server_ok}): {text}", out.status));
    }
    Ok((wall, text))
}

/// perftest's time per iteration: two runs, their wall-time difference over
/// their iteration difference (the setup, the same in both, cancels).
/// perftest's own figures come from the TSC, calibrated at start against
/// gettimeofday; in a TCG guest that calibration fails ("Correlation
/// coefficient"), so the wall clock is the measure both sides share.
fn perftest_per_iter(
    tool: &str,
    dev: &str,
    gid: u8,
    port: u16,
    (n0, n1): (u32, u32),
) -> Result<(Duration, String), String> {
    let (t0, _) = perftest_pair(tool, dev, gid, port, n0)?;
    let (t1, text) = perftest_pair(tool, dev, gid, port + 1, n1)?;
    let d = t1.checked_sub(t0).filter(|d| !d.is_zero()).ok_or_else(|| {
        format!("{tool}: {n1} iterations took {t1:?}, not longer than {n0} ({t0:?}): give more iterations")
    })?;
    Ok((d / (n1 - n0), text))
}

/// Run it.
pub fn main(a: &Args) -> ExitCode {
    use crate::bench_out;
    use marrow_bench::figure_report::{Collect, Row};
    use marrow_transport::verbs_proxy::{ProxyError, RankOpts, WirePort, bench};
    let f = a.output.format();
    // The text on stdout, or out of the report's way on stderr.
    let line = |l: &str| if f.is_text() { println!("{l}") } else { eprintln!("{l}") };
    line(if a.wire.is_some() {
        "marrow bench verbs: the softnic on its wire port (device code on a CPU thread; the softnic's engine executes its WQEs onto the wire)"
    } else {
        "marrow bench verbs: the verbs proxy (device code on a CPU thread; the softnic's engine drives a verbs RC QP)"
    });
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
            wire: a.wire.map(|kind| WirePort {
                kind,
                pcap: a.pcap.clone(),
                path_mtu: a.wire_mtu,
                send_window: marrow_interop::host::send_window(a.wire_mtu),
            }),
            ..RankOpts::default()
        },
        mode,
        iters: a.iters,
        burst: a.burst,
        gpu: a.gpu,
    };
    match bench::run(&o, &mut |l| line(l)) {
        Ok(run) => {
            run.text.lines().for_each(line);
            let mut report = Collect::new("bench verbs", format!("{} GID[{}]", run.device.0, run.device.1));
            for x in &run.figures {
                report.add(Row::new(x.name.clone(), x.value, x.unit));
            }
            let fig = |n: &str| run.figures.iter().find(|f| f.name == n).map(|f| f.value);
            if let (Some(port), 0) = (a.perftest, run.rank) {
                let (dev, gid) = (&run.device.0, run.device.1);
                match (fig("put8_lat_mean"), perftest_per_iter("ib_write_lat", dev, gid, port, a.perftest_lat_iters)) {
                    (Some(mean), Ok((per, text))) => {
                        let own = marrow_bench::perftest::first_figure(&text, "t_typical")
                            .map(|t| format!("its own t_typical {t:.2} us"))
                            .unwrap_or_else(|e| format!("its own figure unusable: {e}"));
                        let floor = per.as_secs_f64() * 1e6;
                        line(&format!(
                            "ratio - 8 B put+quiet mean {mean:.1} us / ib_write_lat iteration {floor:.1} us = {:.2} \
                             (both one round trip; perftest by the wall clock over {} iterations, {own})",
                            mean / floor,
                            a.perftest_lat_iters.1 - a.perftest_lat_iters.0
                        ));
                        report.add(Row::new("8 B put+quiet mean", mean, "us").floor(
                            floor,
                            "us",
                            "ib_write_lat iteration (wall clock)",
                            mean / floor,
                            "measured / floor",
                        ));
                    }
                    (_, Err(e)) => {
                        line(&format!("not ok - ib_write_lat on {dev}: {e}"));
                        return ExitCode::from(1);
                    }
                    (None, _) => {}
                }
                match (fig("put8_rate"), perftest_per_iter("ib_write_bw", dev, gid, port + 2, a.perftest_bw_iters)) {
                    (Some(rate), Ok((per, text))) => {
                        let pr = 1.0 / per.as_secs_f64();
                        let own = marrow_bench::perftest::first_figure(&text, "MsgRate")
                            .map(|m| format!("its own MsgRate {m:.4} Mpps"))
                            .unwrap_or_else(|e| format!("its own figure unusable: {e}"));
                        line(&format!(
                            "ratio - 8 B put_nbi {rate:.0} msg/s / ib_write_bw {pr:.0} msg/s = {:.3} \
                             (perftest by the wall clock over {} iterations, {own})",
                            rate / pr,
                            a.perftest_bw_iters.1 - a.perftest_bw_iters.0
                        ));
                        report.add(Row::new("8 B put_nbi message rate", rate, "msg/s").floor(
                            pr,
                            "msg/s",
                            "ib_write_bw message rate (wall clock)",
                            rate / pr,
                            "measured / floor",
                        ));
                    }
                    (_, Err(e)) => {
                        line(&format!("not ok - ib_write_bw on {dev}: {e}"));
                        return ExitCode::from(1);
                    }
                    (None, _) => {}
                }
            }
            bench_out::print(f, &report.report)
        }
        Err(e @ (ProxyError::Verbs(_) | ProxyError::Refused(_))) => bench_out::fail(f, e, 2),
        Err(e) => {
            line(&format!("not ok - {e}"));
            bench_out::fail(f, e, 1)
        }
    }
}
