//! `marrow interop`: the softnic as the RoCEv2 peer of rdma-core's own
//! tools running on Linux rxe (in the QEMU guest of `cargo xtask interop
//! test`, or anywhere a `-netdev dgram` NIC reaches). The logic is in
//! `marrow-interop`; this prints.

use crate::trace::{Detail, render_record, view};
use marrow_interop::InteropError;
use marrow_interop::host::{Cable, Host};
use marrow_interop::matrix::{self, Role, Step, Tool};
use marrow_interop::perftest::Test;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// Run marrow's side of every step of the matrix, in order, one line per
/// step; `Ok(false)` when a step failed.
pub fn host(
    cable: &Cable,
    trace: Option<&Path>,
    deadline: Duration,
    out: &mut dyn Write,
) -> Result<bool, InteropError> {
    let steps = matrix::default_steps();
    let listeners = matrix::listeners(&steps)?;
    let mut host = Host::start(cable)?;
    // Always recorded: a failed step prints its QP's last records.
    host.nic.enable_trace(64 << 20);
    let _ = writeln!(
        out,
        "marrow interop: softnic at {} (GID ::ffff:{}) on the frame port {} <-> {}; {} steps{}",
        host.ip,
        host.ip,
        cable.bind,
        cable.peer,
        steps.len(),
        cable.pcap.as_ref().map(|p| format!(", capture in {}", p.display())).unwrap_or_default()
    );
    let mut all_ok = true;
    for step in &steps {
        let l = listeners.iter().find(|(id, _)| *id == step.id).map(|(_, l)| l);
        let t0 = Instant::now();
        host.set_faults(step.faults)?;
        let qp_before = host.last_qpn();
        match matrix::run_step(&mut host, step, l, deadline) {
            Ok(r) if step.tool == Tool::Counters => {
                let _ = writeln!(out, "# step {}: {}; softnic port {}", step.id, r.what, host.counters());
            }
            Ok(r) => {
                let _ = writeln!(
                    out,
                    "ok - step {}: {}: {}; QP {:#x} <-> rxe QP {:#x}, {:.2} s",
                    step.id,
                    describe(step),
                    r.what,
                    r.qpns.0,
                    r.qpns.1,
                    t0.elapsed().as_secs_f64()
                );
            }
            Err(e) => {
                all_ok = false;
                let _ = writeln!(out, "not ok - step {}: {}: {e}", step.id, describe(step));
                let _ = writeln!(out, "#   softnic port: {}", host.counters());
                // The step's own QP, if it got as far as making one.
                if let Some(qpn) = host.last_qpn().filter(|q| Some(*q) != qp_before) {
                    excerpt(&host, qpn, out);
                }
            }
        }
    }
    let _ = writeln!(out, "# softnic port counters: {}", host.counters());
    if let Some(t) = trace {
        let bytes = host.nic.trace_bytes().unwrap_or_default();
        std::fs::write(t, &bytes).map_err(InteropError::io(format!("writing the trace to {}", t.display())))?;
        let _ = writeln!(
            out,
            "# softnic trace: {} ({} bytes): `marrow trace show {} --errors`",
            t.display(),
            bytes.len(),
            t.display()
        );
    }
    Ok(all_ok)
}

/// The last records of `qpn` in the softnic's register trace, decoded.
fn excerpt(host: &Host, qpn: u32, out: &mut dyn Write) {
    let Some(bytes) = host.nic.trace_bytes() else { return };
    let (records, _) = marrow_softnic::trace::parse(&bytes);
    let mine: Vec<(usize, &marrow_softnic::trace::Record)> =
        records.iter().enumerate().filter(|(_, r)| r.qpn == qpn).collect();
    if mine.is_empty() {
        let _ = writeln!(out, "#   QP {qpn:#x} has no register-trace records: it was made, never used");
        return;
    }
    let _ = writeln!(out, "#   the last register-trace records of QP {qpn:#x} ({} in all):", mine.len());
    for (i, r) in mine.iter().skip(mine.len().saturating_sub(8)) {
        let text = render_record(*i, r, &view(r, Detail::Normal));
        for l in text.lines() {
            let _ = writeln!(out, "#     {l}");
        }
    }
}

/// `ibv_rc_pingpong -s 4096 -n 100 -m 1024 (guest client)`: the guest's command, in short.
pub fn describe(s: &Step) -> String {
    let tool = match s.tool {
        Tool::RcPingpong => format!("ibv_rc_pingpong -s {} -n {} -m {}", s.size, s.iters, s.mtu),
        Tool::Perftest(Test::AtomicFa) => format!("ib_atomic_bw -A FETCH_AND_ADD -n {} -m {}", s.iters, s.mtu),
        Tool::Perftest(Test::AtomicCs) => format!("ib_atomic_bw -A CMP_AND_SWAP -n {} -m {}", s.iters, s.mtu),
        Tool::Perftest(Test::WriteLat) => format!("ib_write_lat -s {} -n {} -m {}", s.size, s.iters, s.mtu),
        Tool::Perftest(Test::ReadLat) => format!("ib_read_lat -s {} -n {} -m {}", s.size, s.iters, s.mtu),
        Tool::Perftest(t) => format!("ib_{}_bw -s {} -n {} -m {}", test_name(t), s.size, s.iters, s.mtu),
        Tool::WriteDenied => format!("ib_write_bw -s {} to a softnic buffer without remote write", s.size),
        Tool::WriteBadRkey => format!("ib_write_bw -s {}, marrow writing with a wrong rkey", s.size),
        Tool::Counters => "rxe counters".into(),
    };
    let faults = if s.faults { ", softnic wire faults on" } else { "" };
    format!("{tool} (guest {}{faults})", if s.guest == Role::Client { "client" } else { "server" })
}

fn test_name(t: Test) -> &'static str {
    match t {
        Test::WriteBw => "write",
        Test::ReadBw => "read",
        Test::SendBw => "send",
        Test::AtomicFa | Test::AtomicCs => "atomic",
        Test::WriteLat | Test::ReadLat => "lat",
    }
}
