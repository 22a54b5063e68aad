//! `marrow softnic` as a process: what it checks before it starts, what it
//! writes while it runs, and how it stops.
//!
//! 1. SIGTERM, SIGINT and SIGHUP are blocked before any thread starts, so
//!    every thread inherits the mask and one thread takes them with
//!    `sigwait`: a signal never lands in an engine halfway through a scan.
//! 2. Every output path is checked before any work: a trace file or pcap
//!    that cannot be written is an error now, not after an hour of serving.
//! 3. The socket is bound next, and only then does the daemon say it is
//!    serving. A path where a live daemon answers, or that is not a socket,
//!    is refused; a stale socket (nobody answers) is replaced.
//! 4. The trace is written to a temporary file beside its path and renamed
//!    over it, so a reader sees the last whole trace, never a half-written
//!    or empty one.
//! 5. On a signal the trace is written one last time and the socket is
//!    removed before the process exits.

use super::Options;
use crate::SoftNic;
use crate::rc::port::{PortKind, PortOptions};
use nix::sys::signal::{SigSet, Signal};
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What `marrow softnic` was asked for.
#[derive(Clone, Debug)]
pub struct ProcessOptions {
    /// The socket clients connect to.
    pub socket: PathBuf,
    /// Engine threads.
    pub engines: usize,
    /// Where the register trace is kept, rewritten every `trace_every`.
    pub trace: Option<PathBuf>,
    /// How often the trace file is rewritten.
    pub trace_every: Duration,
    /// Wire ports, numbered from 0 in order.
    pub ports: Vec<PortKind>,
    /// Capture of the wire ports (port N writes `FILE.N` when there are several).
    pub pcap: Option<PathBuf>,
}

/// Why the daemon did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Something asked for cannot be done as asked (exit status 2).
    #[error("{0}")]
    BadInput(String),
    /// The system refused (exit status 1).
    #[error("{0}")]
    Io(String),
}

/// The trace's byte cap.
const TRACE_CAP: usize = 256 << 20;

/// Run the daemon until a signal; `say` gets each status line.
pub fn run(opts: &ProcessOptions, say: impl Fn(&str) + Send + Sync + 'static) -> Result<(), ProcessError> {
    // 1. Before any thread exists.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().map_err(|e| ProcessError::Io(format!("blocking signals: {e}")))?;
    // 2.
    if opts.pcap.is_some() && opts.ports.is_empty() {
        return Err(ProcessError::BadInput("--pcap captures the wire ports: give at least one --port".into()));
    }
    if let Some(t) = &opts.trace {
        // The temporary file the trace will be renamed from, made and
        // removed: a trace already at the path is left as it is.
        temporary_beside(t)
            .and_then(|tmp| std::fs::write(&tmp, []).and_then(|()| std::fs::remove_file(&tmp)))
            .map_err(|e| ProcessError::BadInput(format!("trace file {}: {e}", t.display())))?;
    }
    let pcaps: Vec<Option<PathBuf>> = (0..opts.ports.len()).map(|i| pcap_of(opts, i)).collect();
    for p in pcaps.iter().flatten() {
        std::fs::File::create(p).map_err(|e| ProcessError::BadInput(format!("pcap {}: {e}", p.display())))?;
    }
    // 3.
    let listener = bind(&opts.socket)?;
    let mut nic = SoftNic::new();
    if opts.trace.is_some() {
        nic.enable_trace(TRACE_CAP);
    }
    nic.start(opts.engines.max(1));
    let nic = Arc::new(nic);
    for (kind, pcap) in opts.ports.iter().zip(pcaps) {
        let n = nic
            .attach_port(*kind, PortOptions { pcap, ..Default::default() })
            .map_err(|e| ProcessError::Io(format!("wire port {kind:?}: {e}")))?;
        say(&format!("wire port {n}: {kind:?}"));
    }
    // 4.
    if let Some(path) = opts.trace.clone() {
        let (nic, every) = (nic.clone(), opts.trace_every.max(Duration::from_millis(10)));
        std::thread::Builder::new()
            .name("softnic-trace".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    save_trace(&nic, &path);
                }
            })
            .map_err(|e| ProcessError::Io(format!("starting the trace writer: {e}")))?;
    }
    // 5.
    let say = Arc::new(say);
    {
        let (nic, trace, socket, say) = (nic.clone(), opts.trace.clone(), opts.socket.clone(), say.clone());
        std::thread::Builder::new()
            .name("softnic-signals".into())
            .spawn(move || {
                let sig = signals.wait();
                if let Some(t) = &trace {
                    save_trace(&nic, t);
                }
                let _ = std::fs::remove_file(&socket);
                say(&format!("stopping on {}", sig.map_or("a signal".to_string(), |s| s.as_str().to_string())));
                std::process::exit(0);
            })
            .map_err(|e| ProcessError::Io(format!("starting the signal thread: {e}")))?;
    }
    say(&format!("serving on {} with {} engine thread(s)", opts.socket.display(), opts.engines.max(1)));
    super::serve(nic, listener, Options::default())
        .map_err(|e| ProcessError::Io(format!("softnic daemon on {}: {e}", opts.socket.display())))
}

fn pcap_of(opts: &ProcessOptions, port: usize) -> Option<PathBuf> {
    opts.pcap.as_ref().map(|p| if opts.ports.len() > 1 { p.with_extension(format!("{port}")) } else { p.clone() })
}

fn save_trace(nic: &SoftNic, path: &Path) {
    if let Some(bytes) = nic.trace_bytes()
        && let Err(e) = write_atomically(path, &bytes)
    {
        // Not eprintln!: a closed stderr must not stop the writer.
        let _ = writeln!(std::io::stderr(), "marrow softnic: writing the trace to {}: {e}", path.display());
    }
}

/// Write `bytes` to a temporary file beside `path`, then rename it over
/// `path`: a reader sees the old file or the new one, whole.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary_beside(path)?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// `.NAME.PID.tmp` in `path`'s directory: on the same file system, so the
/// rename that replaces `path` with it is atomic.
fn temporary_beside(path: &Path) -> std::io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}

/// Bind the daemon's socket at `path`. A socket nobody answers on is stale
/// and replaced; one a live daemon answers on, or a path that is not a
/// socket, is refused.
pub fn bind(path: &Path) -> Result<UnixListener, ProcessError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_socket() => {
            return Err(ProcessError::BadInput(format!(
                "{} exists and is not a socket: not replacing it",
                path.display()
            )));
        }
        Ok(_) if UnixStream::connect(path).is_ok() => {
            return Err(ProcessError::BadInput(format!("a daemon is already serving on {}", path.display())));
        }
        Ok(_) => std::fs::remove_file(path)
            .map_err(|e| ProcessError::Io(format!("removing the stale socket {}: {e}", path.display())))?,
        Err(_) => {}
    }
    UnixListener::bind(path).map_err(|e| ProcessError::Io(format!("binding {}: {e}", path.display())))
}
