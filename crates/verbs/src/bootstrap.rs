//! Bootstrap across nodes: who am I (rank), how many are we (size), and an
//! all-gather of each rank's connection record ([`crate::qp::RcEndpoint`]:
//! QPN, LID/GID, PSN, rkey, address).
//!
//! Rank and size come from the launcher's environment when one is present
//! (`mpirun` of Open MPI, MPICH/Hydra's PMI, PMIx, Slurm's `srun`); marrow
//! does not link libmpi or libpmix: the exchange itself is always the TCP
//! rendezvous below, whose root address the launcher run passes in
//! `MARROW_BOOTSTRAP=host:port` (the same on every rank). Without a
//! launcher, rank 0 prints a `host:port:id` token and the others are started
//! with it (`MARROW_BOOTSTRAP=host:port:id`, `MARROW_RANK`, `MARROW_SIZE`).
//!
//! The rendezvous: the root listens; every peer connects, sends one JSON
//! line `{"id", "rank", "size", "payload"}`; when all `size - 1` peers are
//! in, the root answers each with one JSON line holding every payload by
//! rank. A peer with the wrong id or size gets `{"error": …}` and a typed
//! error; every wait has a deadline (nccl PR#2318: an init-time all-gather
//! without a timeout hangs forever).

use crate::VerbsError;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where rank and size came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// The launcher, by the variables that named it.
    pub launcher: &'static str,
    /// Rendezvous root, `host:port`.
    pub root: Option<String>,
    /// Rendezvous id (from the token, `MARROW_BOOTSTRAP_ID` or the job id).
    pub id: Option<String>,
}

/// Rank and size from a launcher's environment (`get` reads a variable),
/// first match wins: Open MPI, PMIx, MPICH/Hydra PMI, Slurm, then marrow's own.
pub fn detect(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, VerbsError> {
    const SOURCES: [(&str, &str, &str); 5] = [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI mpirun"),
        ("PMIX_RANK", "SLURM_NTASKS", "PMIx (srun --mpi=pmix)"),
        ("PMI_RANK", "PMI_SIZE", "MPICH/Hydra PMI"),
        ("SLURM_PROCID", "SLURM_NTASKS", "Slurm srun"),
        ("MARROW_RANK", "MARROW_SIZE", "marrow (MARROW_RANK/MARROW_SIZE)"),
    ];
    for (r, s, name) in SOURCES {
        let Some(rank) = get(r) else { continue };
        let num = |var: &str, v: &str| v.trim().parse::<usize>().map_err(|e| VerbsError::Bootstrap(format!("{var}={v:?}: {e}")));
        let rank = num(r, &rank)?;
        let size = match get(s) {
            Some(v) => num(s, &v)?,
            None => return Err(VerbsError::Bootstrap(format!("{r} is set ({name}) but {s} is not: cannot tell the number of ranks"))),
        };
        if rank >= size {
            return Err(VerbsError::Bootstrap(format!("{r}={rank} is not below {s}={size}")));
        }
        let (root, id) = match get("MARROW_BOOTSTRAP") {
            Some(t) => match t.rsplitn(3, ':').collect::<Vec<_>>()[..] {
                [id, port, host] if port.parse::<u16>().is_ok() => (Some(format!("{host}:{port}")), Some(id.to_string())),
                _ => (Some(t.clone()), None),
            },
            None => (None, None),
        };
        let id = id
            .or_else(|| get("MARROW_BOOTSTRAP_ID"))
            .or_else(|| get("SLURM_JOB_ID").map(|j| format!("slurm-{j}")))
            .or_else(|| get("PMIX_NAMESPACE"))
            .or_else(|| get("OMPI_MCA_ess_base_jobid").map(|j| format!("ompi-{j}")));
        if size > 1 && root.is_none() {
            return Err(VerbsError::Bootstrap(format!(
                "{name} gives rank {rank} of {size}, but MARROW_BOOTSTRAP (host:port of rank 0's rendezvous) is not set; marrow does not link libmpi/libpmix, so pass it, e.g. mpirun -x MARROW_BOOTSTRAP=node0:18515"
            )));
        }
        return Ok(Some(Launch { rank, size, launcher: name, root, id }));
    }
    Ok(None)
}

#[derive(Serialize, Deserialize)]
struct Hello<T> {
    id: String,
    rank: usize,
    size: usize,
    payload: T,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Reply<T> {
    All { all: Vec<T> },
    Error { error: String },
}

/// The rendezvous root (rank 0): a listener and the id peers must present.
#[derive(Debug)]
pub struct Root {
    listener: TcpListener,
    id: String,
}

/// A fresh id: 64 bits from the clock, the pid and the address of a stack
/// variable. Not a secret; it keeps two jobs on one port from mixing.
pub fn unique_id() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let probe = 0u8;
    let mut x = (t as u64) ^ (u64::from(std::process::id()) << 32) ^ (&probe as *const u8 as u64);
    // splitmix64 finaliser: spread the bits.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    format!("{:016x}", x ^ (x >> 31))
}

fn io(what: &str, e: std::io::Error) -> VerbsError {
    VerbsError::Bootstrap(format!("{what}: {e}"))
}

impl Root {
    /// Listen on `bind` (`0.0.0.0:18515`, or port 0 for any) with `id` (or a fresh one).
    pub fn bind(bind: &str, id: Option<String>) -> Result<Root, VerbsError> {
        let listener = TcpListener::bind(bind).map_err(|e| io(&format!("listen on {bind}"), e))?;
        Ok(Root { listener, id: id.unwrap_or_else(unique_id) })
    }

    /// `host:port:id`, what peers are started with; `host` as given (the
    /// listener may be on 0.0.0.0).
    pub fn token(&self, host: &str) -> String {
        let port = self.listener.local_addr().map(|a| a.port()).unwrap_or(0);
        format!("{host}:{port}:{}", self.id)
    }

    /// Gather every rank's payload (the root is rank 0) and send the whole
    /// vector to every peer.
    pub fn allgather<T: Serialize + DeserializeOwned + Clone>(&self, size: usize, mine: &T, timeout: Duration) -> Result<Vec<T>, VerbsError> {
        let deadline = Instant::now() + timeout;
        let mut all: Vec<Option<T>> = vec![None; size];
        all[0] = Some(mine.clone());
        let mut peers: Vec<TcpStream> = Vec::new();
        self.listener.set_nonblocking(true).map_err(|e| io("listener", e))?;
        while all.iter().any(Option::is_none) {
            let missing: Vec<usize> = all.iter().enumerate().filter(|(_, v)| v.is_none()).map(|(i, _)| i).collect();
            if Instant::now() > deadline {
                return Err(VerbsError::Bootstrap(format!("timed out after {timeout:?} waiting for ranks {missing:?} to connect")));
            }
            let (s, from) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(e) => return Err(io("accept", e)),
            };
            s.set_nonblocking(false).map_err(|e| io("peer socket", e))?;
            s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10)))).map_err(|e| io("peer socket", e))?;
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).map_err(|e| io(&format!("read from {from}"), e))?;
            let h: Hello<T> = serde_json::from_str(&line).map_err(|e| VerbsError::Bootstrap(format!("bad hello from {from}: {e}")))?;
            let refuse = if h.id != self.id {
                Some(format!("id {} is not this rendezvous's {}", h.id, self.id))
            } else if h.size != size {
                Some(format!("size {} differs from the root's {size}", h.size))
            } else if h.rank == 0 || h.rank >= size || all[h.rank].is_some() {
                Some(format!("rank {} is out of range or taken", h.rank))
            } else {
                None
            };
            if let Some(why) = refuse {
                let mut w = &s;
                let _ = writeln!(w, "{}", serde_json::to_string(&Reply::<T>::Error { error: why.clone() }).unwrap_or_default());
                continue; // a stray peer does not end the job's rendezvous
            }
            all[h.rank] = Some(h.payload);
            peers.push(s);
        }
        let all: Vec<T> = all.into_iter().map(|v| v.expect("all present")).collect();
        let reply = serde_json::to_string(&Reply::All { all: all.clone() }).map_err(|e| VerbsError::Bootstrap(e.to_string()))?;
        for mut p in peers {
            writeln!(p, "{reply}").map_err(|e| io("send all", e))?;
        }
        Ok(all)
    }
}

/// A peer's side: connect to `token` (`host:port:id`), retrying until the
/// root listens or `timeout` passes, send our payload, receive everyone's.
pub fn peer_allgather<T: Serialize + DeserializeOwned>(token: &str, rank: usize, size: usize, mine: &T, timeout: Duration) -> Result<Vec<T>, VerbsError> {
    let (addr, id) = match token.rsplit_once(':') {
        Some((a, id)) if a.contains(':') => (a.to_string(), id.to_string()),
        _ => return Err(VerbsError::Bootstrap(format!("token {token:?} is not host:port:id"))),
    };
    let deadline = Instant::now() + timeout;
    let s = loop {
        let target = addr.to_socket_addrs().map_err(|e| io(&format!("resolve {addr}"), e))?.next();
        let Some(target) = target else { return Err(VerbsError::Bootstrap(format!("{addr} resolves to nothing"))) };
        match TcpStream::connect_timeout(&target, Duration::from_millis(500)) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io(&format!("connect to the root {addr} (timed out after {timeout:?})"), e)),
        }
    };
    s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10)))).map_err(|e| io("socket", e))?;
    let hello = Hello { id, rank, size, payload: mine };
    let mut w = &s;
    writeln!(w, "{}", serde_json::to_string(&hello).map_err(|e| VerbsError::Bootstrap(e.to_string()))?).map_err(|e| io("send hello", e))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).map_err(|e| io(&format!("wait for the root {addr}"), e))?;
    match serde_json::from_str::<Reply<T>>(&line) {
        Ok(Reply::All { all }) if all.len() == size => Ok(all),
        Ok(Reply::All { all }) => Err(VerbsError::Bootstrap(format!("root sent {} records for {size} ranks", all.len()))),
        Ok(Reply::Error { error }) => Err(VerbsError::Bootstrap(format!("root refused rank {rank}: {error}"))),
        Err(e) => Err(VerbsError::Bootstrap(format!("bad reply from the root ({e}): {line:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qp::RcEndpoint;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn launchers_are_detected_from_their_environment() {
        let l = detect(env(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"), ("MARROW_BOOTSTRAP", "node0:18515")])).unwrap().unwrap();
        assert_eq!((l.rank, l.size, l.launcher, l.root.as_deref()), (1, 2, "Open MPI mpirun", Some("node0:18515")));
        let l = detect(env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4"), ("SLURM_JOB_ID", "77"), ("MARROW_BOOTSTRAP", "n0:1")])).unwrap().unwrap();
        assert_eq!((l.rank, l.launcher, l.id.as_deref()), (3, "Slurm srun", Some("slurm-77")));
        let l = detect(env(&[("PMIX_RANK", "0"), ("SLURM_NTASKS", "1")])).unwrap().unwrap();
        assert_eq!((l.launcher, l.root), ("PMIx (srun --mpi=pmix)", None));
        let l = detect(env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("MARROW_BOOTSTRAP", "h:9:abc")])).unwrap().unwrap();
        assert_eq!((l.root.as_deref(), l.id.as_deref()), (Some("h:9"), Some("abc")));
        assert_eq!(detect(env(&[])).unwrap(), None);
        let e = detect(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")])).unwrap_err().to_string();
        assert!(e.contains("MARROW_BOOTSTRAP") && e.contains("does not link libmpi"), "{e}");
        assert!(detect(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")])).is_err());
        assert!(detect(env(&[("PMI_RANK", "0")])).unwrap_err().to_string().contains("PMI_SIZE is not"));
    }

    fn ep(rank: u32) -> RcEndpoint {
        RcEndpoint { qpn: 0x100 + rank, lid: rank as u16, gid: [rank as u8; 16], psn: rank * 7, rkey: 0xabc0 + rank, addr: 0x7f00_0000 + u64::from(rank), len: 4096 }
    }

    #[test]
    fn three_ranks_exchange_endpoints_over_tcp() {
        let root = Root::bind("127.0.0.1:0", None).unwrap();
        let token = root.token("127.0.0.1");
        let peers: Vec<_> = (1..3)
            .map(|r| {
                let t = token.clone();
                std::thread::spawn(move || peer_allgather(&t, r, 3, &ep(r as u32), Duration::from_secs(10)))
            })
            .collect();
        let at_root = root.allgather(3, &ep(0), Duration::from_secs(10)).unwrap();
        let want: Vec<RcEndpoint> = (0..3).map(ep).collect();
        assert_eq!(at_root, want);
        for p in peers {
            assert_eq!(p.join().unwrap().unwrap(), want);
        }
    }

    #[test]
    fn a_wrong_id_is_refused_and_a_missing_rank_times_out() {
        let root = Root::bind("127.0.0.1:0", Some("job-a".into())).unwrap();
        let bad = root.token("127.0.0.1").replace("job-a", "job-b");
        let h = std::thread::spawn(move || peer_allgather(&bad, 1, 2, &ep(1), Duration::from_secs(5)));
        let e = root.allgather(2, &ep(0), Duration::from_millis(700)).unwrap_err().to_string();
        assert!(e.contains("waiting for ranks [1]"), "{e}");
        let pe = h.join().unwrap().unwrap_err().to_string();
        assert!(pe.contains("id job-b is not this rendezvous's job-a"), "{pe}");
        // Nobody listening: the peer gives up at its deadline.
        let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e = peer_allgather(&format!("127.0.0.1:{free}:x"), 1, 2, &ep(1), Duration::from_millis(300)).unwrap_err().to_string();
        assert!(e.contains("connect to the root"), "{e}");
    }
}
