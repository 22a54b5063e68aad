//! The steps of the interop run, in order. One list drives both ends: the
//! guest's script reads [`render`]'s lines (`cargo xtask interop test` puts
//! them in the initramfs), the host runs [`run_step`] for each.
//!
//! A line is `ID TOOL GUEST_ROLE SIZE ITERS MTU FAULTS`. The TCP exchange of
//! step `ID` uses port [`PORT_BASE`]` + ID` in the guest; the guest reaches
//! the host at QEMU's user-mode gateway, and the host reaches a guest server
//! through a `hostfwd` from [`FWD_BASE`]` + ID`. `counters` lines are no
//! exchange: the guest prints rxe's counters there, labelled by the role
//! column, so the clean steps' counters are read before any fault is on.

use crate::InteropError;
use crate::host::Host;
use crate::perftest::{self, Test};
use crate::pingpong;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::time::Duration;

/// The guest's TCP port of step 0.
pub const PORT_BASE: u16 = 18600;
/// The host's forwarded port of step 0 (guest servers).
pub const FWD_BASE: u16 = 18700;

/// Which end the guest's tool is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The tool connects to marrow.
    Client,
    /// The tool listens; marrow connects.
    Server,
}

/// What a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `ibv_rc_pingpong`.
    RcPingpong,
    /// A perftest tool.
    Perftest(Test),
    /// `ib_write_bw` against a softnic buffer without remote write rights:
    /// the guest must fail with IBV_WC_REM_ACCESS_ERR.
    WriteDenied,
    /// `ib_write_bw` server; marrow writes with a wrong rkey and must get
    /// a REMOTE_ACCESS_ERR CQE.
    WriteBadRkey,
    /// The guest prints rxe's counters.
    Counters,
}

impl Tool {
    /// The name in the step line.
    pub fn name(self) -> &'static str {
        match self {
            Tool::RcPingpong => "rc_pingpong",
            Tool::Perftest(Test::WriteBw) => "write_bw",
            Tool::Perftest(Test::ReadBw) => "read_bw",
            Tool::Perftest(Test::SendBw) => "send_bw",
            Tool::Perftest(Test::AtomicFa) => "atomic_fa",
            Tool::Perftest(Test::AtomicCs) => "atomic_cs",
            Tool::Perftest(Test::WriteLat) => "write_lat",
            Tool::Perftest(Test::ReadLat) => "read_lat",
            Tool::WriteDenied => "write_denied",
            Tool::WriteBadRkey => "write_bad_rkey",
            Tool::Counters => "counters",
        }
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Its number, which picks its ports.
    pub id: u16,
    /// What it runs.
    pub tool: Tool,
    /// The guest tool's role.
    pub guest: Role,
    /// Message size.
    pub size: usize,
    /// Iterations.
    pub iters: usize,
    /// Path MTU.
    pub mtu: u32,
    /// The softnic's wire faults on (1 % drop, 1 % reorder).
    pub faults: bool,
}

/// The matrix: at path MTUs 1024 and 4096, `ibv_rc_pingpong` from one byte
/// to 64 KiB and each perftest bandwidth and latency tool, with the guest
/// as client and as server; the two refusals; rxe's counters; then `ib_write_bw` and
/// `ib_read_bw` again with the wire faults on, and the counters again.
pub fn default_steps() -> Vec<Step> {
    let mut v = Vec::new();
    let mut add = |tool, guest, size, iters, mtu, faults| {
        let id = v.len() as u16;
        v.push(Step { id, tool, guest, size, iters, mtu, faults });
    };
    for mtu in [1024, 4096] {
        for (size, iters) in [(1, 100), (4096, 100), (65536, 20)] {
            for g in [Role::Client, Role::Server] {
                add(Tool::RcPingpong, g, size, iters, mtu, false);
            }
        }
        for (t, size, iters) in [
            (Test::WriteBw, 65536, 200),
            (Test::ReadBw, 65536, 200),
            (Test::SendBw, 65536, 200),
            (Test::AtomicFa, 8, 500),
            (Test::AtomicCs, 8, 200),
            (Test::WriteLat, 64, 200),
            (Test::ReadLat, 64, 200),
        ] {
            for g in [Role::Client, Role::Server] {
                add(Tool::Perftest(t), g, size, iters, mtu, false);
            }
        }
    }
    add(Tool::WriteDenied, Role::Client, 4096, 10, 1024, false);
    add(Tool::WriteBadRkey, Role::Server, 4096, 10, 1024, false);
    add(Tool::Counters, Role::Client, 0, 0, 0, false);
    for t in [Test::WriteBw, Test::ReadBw] {
        for g in [Role::Client, Role::Server] {
            add(Tool::Perftest(t), g, 65536, 200, 1024, true);
        }
    }
    add(Tool::Counters, Role::Server, 0, 0, 0, false);
    v
}

/// The lines the guest's script reads.
pub fn render(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| {
            let role = if s.guest == Role::Client { "client" } else { "server" };
            format!("{} {} {role} {} {} {} {}\n", s.id, s.tool.name(), s.size, s.iters, s.mtu, u8::from(s.faults))
        })
        .collect()
}

/// Listeners for every step whose guest tool is a client, bound before the
/// guest starts, so a connection made early waits in the backlog.
pub fn listeners(steps: &[Step]) -> Result<Vec<(u16, TcpListener)>, InteropError> {
    steps
        .iter()
        .filter(|s| s.guest == Role::Client && s.tool != Tool::Counters)
        .map(|s| {
            let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, PORT_BASE + s.id);
            TcpListener::bind(a).map(|l| (s.id, l)).map_err(InteropError::io(format!("binding {a}")))
        })
        .collect()
}

/// What marrow's side of a step checked.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Operations or messages checked.
    pub checked: usize,
    /// In words.
    pub what: String,
    /// Our QP and the guest's.
    pub qpns: (u32, u32),
}

/// Run marrow's side of `step`; `listener` is its from [`listeners`].
pub fn run_step(
    host: &mut Host,
    step: &Step,
    listener: Option<&TcpListener>,
    deadline: Duration,
) -> Result<Outcome, InteropError> {
    let timeout = Duration::from_secs(20);
    let fwd = SocketAddr::from((Ipv4Addr::LOCALHOST, FWD_BASE + step.id));
    let need_listener = || listener.ok_or_else(|| InteropError::Setup(format!("step {}: no listener", step.id)));
    if step.tool == Tool::RcPingpong {
        let opts = pingpong::Options { size: step.size, iters: step.iters, mtu: step.mtu, timeout, deadline };
        let r = match step.guest {
            Role::Client => pingpong::serve(host, need_listener()?, opts)?,
            Role::Server => pingpong::connect(host, fwd, opts)?,
        };
        return Ok(Outcome {
            checked: r.checked,
            what: format!("{} messages of {} B echoed and checked", r.checked, step.size),
            qpns: (r.local.qpn, r.peer.qpn),
        });
    }
    let (test, deny, bad_rkey) = match step.tool {
        Tool::Perftest(t) => (t, false, false),
        Tool::WriteDenied => (Test::WriteBw, true, false),
        Tool::WriteBadRkey => (Test::WriteBw, false, true),
        Tool::RcPingpong | Tool::Counters => {
            return Ok(Outcome { checked: 0, what: "rxe's counters printed by the guest".into(), qpns: (0, 0) });
        }
    };
    let opts = perftest::Options {
        test,
        size: step.size,
        iters: step.iters,
        mtu: step.mtu,
        timeout,
        deadline,
        deny,
        bad_rkey,
    };
    let r = match step.guest {
        Role::Client => perftest::serve(host, need_listener()?, opts)?,
        Role::Server => perftest::connect(host, fwd, opts)?,
    };
    Ok(Outcome { checked: r.checked, what: r.what, qpns: (r.local.qpn, r.peer.qpn) })
}
