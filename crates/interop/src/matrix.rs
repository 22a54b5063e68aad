//! The steps of the interop run, in order. One list drives both ends: the
//! guest's script reads [`render`]'s lines (`cargo xtask interop test` puts
//! them in the initramfs), the host runs [`run_step`] for each.
//!
//! A line is `ID TOOL GUEST_ROLE SIZE ITERS MTU`. The TCP exchange of step
//! `ID` uses port [`PORT_BASE`]` + ID` in the guest; the guest reaches the
//! host at QEMU's user-mode gateway, and the host reaches a guest server
//! through a `hostfwd` from [`FWD_BASE`]` + ID`.

use crate::InteropError;
use crate::host::Host;
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

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Its number, which picks its ports.
    pub id: u16,
    /// `rc_pingpong`.
    pub tool: &'static str,
    /// The guest tool's role.
    pub guest: Role,
    /// Message size.
    pub size: usize,
    /// Iterations.
    pub iters: usize,
    /// Path MTU.
    pub mtu: u32,
}

/// The matrix: `ibv_rc_pingpong` with the guest as client and as server,
/// sizes from one byte to 64 KiB, path MTUs 1024 and 4096.
pub fn default_steps() -> Vec<Step> {
    let mut v = Vec::new();
    let mut id = 0;
    for mtu in [1024, 4096] {
        for (size, iters) in [(1, 100), (4096, 100), (65536, 20)] {
            for guest in [Role::Client, Role::Server] {
                v.push(Step { id, tool: "rc_pingpong", guest, size, iters, mtu });
                id += 1;
            }
        }
    }
    v
}

/// The lines the guest's script reads.
pub fn render(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| {
            let role = if s.guest == Role::Client { "client" } else { "server" };
            format!("{} {} {role} {} {} {}\n", s.id, s.tool, s.size, s.iters, s.mtu)
        })
        .collect()
}

/// Listeners for every step whose guest tool is a client, bound before the
/// guest starts, so a connection made early waits in the backlog.
pub fn listeners(steps: &[Step]) -> Result<Vec<(u16, TcpListener)>, InteropError> {
    steps
        .iter()
        .filter(|s| s.guest == Role::Client)
        .map(|s| {
            let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, PORT_BASE + s.id);
            TcpListener::bind(a).map(|l| (s.id, l)).map_err(InteropError::io(format!("binding {a}")))
        })
        .collect()
}

/// Run marrow's side of `step`; `listener` is its from [`listeners`].
pub fn run_step(
    host: &mut Host,
    step: &Step,
    listener: Option<&TcpListener>,
    deadline: Duration,
) -> Result<pingpong::Report, InteropError> {
    let opts = pingpong::Options {
        size: step.size,
        iters: step.iters,
        mtu: step.mtu,
        timeout: Duration::from_secs(20),
        deadline,
    };
    match (step.tool, step.guest) {
        ("rc_pingpong", Role::Client) => {
            let l = listener.ok_or_else(|| InteropError::Setup(format!("step {}: no listener", step.id)))?;
            pingpong::serve(host, l, opts)
        }
        ("rc_pingpong", Role::Server) => {
            let fwd = SocketAddr::from((Ipv4Addr::LOCALHOST, FWD_BASE + step.id));
            pingpong::connect(host, fwd, opts)
        }
        (tool, _) => Err(InteropError::Setup(format!("step {}: tool {tool} is not built on marrow's side", step.id))),
    }
}
