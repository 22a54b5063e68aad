//! A softnic daemon as a child process (`marrow softnic`): the peer across
//! the wire that `demo --wire udp`, `demo --gpu --wire udp` and `bench
//! softnic --wire udp` run their far end on, so that the two ends are two
//! processes, as on two machines.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `marrow softnic` running as a child, killed and its socket removed when
/// this is dropped.
#[derive(Debug)]
pub struct PeerDaemon {
    /// The child.
    pub child: Child,
    /// Its socket.
    pub socket: PathBuf,
}

impl PeerDaemon {
    /// Start `exe softnic` on a fresh socket with a UDP wire port at
    /// `ip:port`, and wait (at most 20 s) until it accepts connections.
    pub fn start(exe: &Path, ip: Ipv4Addr, port: u16) -> Result<PeerDaemon, String> {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = std::env::temp_dir().join(format!("marrow-peer-{}-{n}.sock", std::process::id()));
        let child = Command::new(exe)
            .arg("softnic")
            .arg("--socket")
            .arg(&socket)
            .arg("--port")
            .arg(format!("udp:{ip}:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the peer softnic ({} softnic): {e}", exe.display()))?;
        let mut d = PeerDaemon { child, socket };
        let t0 = Instant::now();
        loop {
            if std::os::unix::net::UnixStream::connect(&d.socket).is_ok() {
                return Ok(d);
            }
            if let Ok(Some(status)) = d.child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = d.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("the peer softnic exited with {status}: {}", err.trim()));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(format!(
                    "the peer softnic (pid {}) did not listen on {} within 20 s",
                    d.child.id(),
                    d.socket.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for PeerDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}
