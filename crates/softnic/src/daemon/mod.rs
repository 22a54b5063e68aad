//! `marrow softnic`: the device model as a daemon serving client processes
//! over a Unix socket (`docs/SOFTNIC_PROTOCOL.md`). Every object lives in
//! the one model, so QPs of different clients can be connected to each
//! other; the data path never touches the socket.
//!
//! The daemon is built to outlive its clients' mistakes:
//! - each connection is a session (`daemon/session.rs`) that owns what it made: a request
//!   naming another client's object is refused, and when the connection
//!   ends everything it made is destroyed;
//! - what one client may hold is bounded ([`Limits`]), as is the number of
//!   clients at once; connections that have not yet said `Hello` are
//!   bounded apart from those (the oldest is closed to admit a new one), so
//!   a flood of silent connections cannot lock clients out;
//! - a failed `accept` (out of descriptors, say) or a failed thread spawn is
//!   logged and retried with backoff, never the end of the daemon;
//! - every malformed request gets an `Error` reply before the connection
//!   is closed.

mod admission;
pub mod process;
mod session;

use crate::SoftNic;
use crate::wire::{self, Limits, Reply};
use admission::Admission;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How a daemon serves.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// What each client may hold.
    pub limits: Limits,
    /// Clients connected at once (past their `Hello`); one more is told so
    /// and closed.
    pub max_clients: usize,
    /// Connections not yet past their `Hello`; one more closes the oldest.
    pub max_handshaking: usize,
    /// How long a new connection may take to send its `Hello`.
    pub handshake_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: Limits::default(),
            max_clients: 256,
            max_handshaking: 1024,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The longest wait between retries of a failed `accept` or spawn.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Serve clients on `listener`, forever: errors are logged and retried.
pub fn serve(nic: Arc<SoftNic>, listener: UnixListener, opts: Options) -> std::io::Result<()> {
    let admission = Arc::new(Admission::new(opts.max_clients, opts.max_handshaking));
    let mut backoff = Duration::from_millis(1);
    let retry = |what: String, backoff: &mut Duration| {
        eprintln!("marrow softnic: {what}; retrying in {backoff:?}");
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
    };
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                retry(format!("accepting a connection: {e}"), &mut backoff);
                continue;
            }
        };
        let ticket = match admission.admit(&stream) {
            Ok(t) => t,
            Err(why) => {
                refuse(&stream, &why);
                continue;
            }
        };
        let (nic, adm) = (nic.clone(), admission.clone());
        let spawned = std::thread::Builder::new().name("softnic-client".into()).spawn(move || {
            session::run(&nic, stream, &opts, &adm, ticket);
        });
        match spawned {
            Ok(_) => backoff = Duration::from_millis(1),
            // The stream and the ticket went with the closure: that client
            // sees the connection close, and its place is free again.
            Err(e) => retry(format!("starting a thread for a client: {e}"), &mut backoff),
        }
    }
}

/// Serve one connection on this thread until it ends, as [`serve`] serves
/// each (for tests and fuzzing: any bytes in, replies out, never a panic).
pub fn serve_connection(nic: &SoftNic, s: UnixStream, opts: &Options) {
    let door = Admission::new(opts.max_clients, opts.max_handshaking);
    match door.admit(&s) {
        Ok(ticket) => session::run(nic, s, opts, &door, ticket),
        Err(why) => refuse(&s, &why),
    }
}

/// Feed `input` to a session, after a valid `Hello`, over a socket pair,
/// and return everything it answered (for tests and fuzzing).
pub fn serve_bytes(nic: &SoftNic, input: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Write};
    let (mut ours, theirs) = UnixStream::pair()?;
    let mut r = ours.try_clone()?;
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    });
    ours.write_all(&wire::frame(&crate::wire::Request::Hello { version: crate::wire::PROTOCOL_VERSION }))?;
    // The session may close early (a malformed message): the rest is refused unread.
    let _ = ours.write_all(input);
    ours.shutdown(std::net::Shutdown::Write)?;
    serve_connection(nic, theirs, &Options::default());
    reader.join().map_err(|_| std::io::Error::other("the reply reader panicked"))
}

/// Tell a connection why it is not served, and close it.
fn refuse(s: &UnixStream, why: &str) {
    eprintln!("marrow softnic: refusing a connection: {why}");
    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = wire::send(s, &Reply::Error(why.into()), &[]);
}

/// Bind `path` (replacing a stale socket) and serve with `opts`. The
/// process's soft descriptor limit is raised to its hard limit first: each
/// client holds a connection and its memfds.
pub fn run_with(nic: Arc<SoftNic>, path: &Path, opts: Options) -> std::io::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let listener = process::bind(path).map_err(std::io::Error::other)?;
    serve(nic, listener, opts)
}

/// Bind `path` (replacing a stale socket; see [`process::bind`]) and serve with the default options.
pub fn run(nic: Arc<SoftNic>, path: &Path) -> std::io::Result<()> {
    run_with(nic, path, Options::default())
}
