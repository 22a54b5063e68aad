//! Bootstrap across nodes: who am I (rank), how many are we (size), and an
//! all-gather of each rank's connection record ([`crate::qp::RcEndpoint`]:
//! QPN, LID/GID, PSN, rkey, address).
//!
//! Rank and size come from the launcher's environment when one is present
//! (`mpirun` of Open MPI, MPICH/Hydra's PMI, PMIx, Slurm's `srun`).
//! [`route`] picks the exchange, which [`crate::group::Group::launched`]
//! then holds open:
//! - under `mpirun` (`OMPI_COMM_WORLD_RANK` or `PMI_RANK` set) when libmpi
//!   loads ([`crate::mpi`], `dlopen` at run time, Open MPI or MPICH):
//!   `MPI_Allgather`, nothing else to pass;
//! - otherwise the TCP rendezvous below, whose root address the launcher run
//!   passes in `MARROW_BOOTSTRAP=host:port` (the same on every rank). marrow
//!   does not link libpmix: `srun` (PMI/PMIx) takes this path. Without a
//!   launcher, rank 0 prints a `host:port:id` token and the others are
//!   started with it (`MARROW_BOOTSTRAP=host:port:id`, `MARROW_RANK`,
//!   `MARROW_SIZE`).
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
/// For the TCP rendezvous: more than one rank without `MARROW_BOOTSTRAP` is
/// an error here ([`route`] first tries MPI under `mpirun`).
pub fn detect(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, VerbsError> {
    let l = launch(&get)?;
    if let Some(l) = &l
        && l.size > 1
        && l.root.is_none()
    {
        return Err(no_root(l, None));
    }
    Ok(l)
}

fn no_root(l: &Launch, mpi: Option<&VerbsError>) -> VerbsError {
    let why = match mpi {
        Some(e) => format!("under mpirun marrow would exchange by MPI_Allgather, but {e}"),
        None => "marrow does not link libmpi/libpmix (libmpi is loaded at run time only under mpirun)".to_string(),
    };
    VerbsError::Bootstrap(format!(
        "{} gives rank {} of {}, but MARROW_BOOTSTRAP (host:port of rank 0's rendezvous) is not set; {why}; so pass it in every rank's environment, e.g. MARROW_BOOTSTRAP=node0:18515 (mpirun -x, srun --export=ALL,…)",
        l.launcher, l.rank, l.size
    ))
}

/// Whether this process was started by `mpirun`/`mpiexec` (Open MPI's or
/// MPICH/Hydra's), by the variables they set.
pub fn under_mpirun(get: impl Fn(&str) -> Option<String>) -> bool {
    get("OMPI_COMM_WORLD_RANK").is_some() || get("PMI_RANK").is_some()
}

/// How [`crate::group::Group::launched`] will exchange.
#[derive(Debug)]
pub enum Route {
    /// `MPI_Allgather` through the loaded (not yet initialised) libmpi.
    Mpi {
        /// The library.
        mpi: crate::mpi::Mpi,
        /// Rank and size as the launcher's environment gives them.
        launch: Launch,
    },
    /// The TCP rendezvous at `launch.root` (`None` only for one rank).
    Tcp(Launch),
}

/// The exchange this environment allows: MPI under `mpirun` when libmpi
/// loads (`MARROW_MPI_LIB` read through `get`), else the TCP rendezvous when
/// `MARROW_BOOTSTRAP` is set (or there is one rank); `None` without a
/// launcher; an error naming both when neither works.
pub fn route(get: impl Fn(&str) -> Option<String>) -> Result<Option<Route>, VerbsError> {
    let Some(l) = launch(&get)? else { return Ok(None) };
    let mut mpi_err = None;
    if under_mpirun(&get) {
        let loaded = match get(crate::mpi::ENV_MPI_LIB).filter(|p| !p.is_empty()) {
            Some(p) => crate::mpi::Mpi::load_from(&[p.as_str()]),
            // The launcher's own MPI first when both are installed.
            None if get("OMPI_COMM_WORLD_RANK").is_none() => crate::mpi::Mpi::load_from(&crate::mpi::MPICH_FIRST),
            None => crate::mpi::Mpi::load_from(&crate::mpi::DEFAULT_LIBS),
        };
        match loaded {
            Ok(mpi) => return Ok(Some(Route::Mpi { mpi, launch: l })),
            Err(e) => mpi_err = Some(e),
        }
    }
    if l.size > 1 && l.root.is_none() {
        return Err(no_root(&l, mpi_err.as_ref()));
    }
    Ok(Some(Route::Tcp(l)))
}

fn launch(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, VerbsError> {
    const SOURCES: [(&str, &str, &str); 5] = [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI mpirun"),
        ("PMIX_RANK", "SLURM_NTASKS", "PMIx (srun --mpi=pmix)"),
        ("PMI_RANK", "PMI_SIZE", "MPICH/Hydra PMI"),
        ("SLURM_PROCID", "SLURM_NTASKS", "Slurm srun"),
        ("MARROW_RANK", "MARROW_SIZE", "marrow (MARROW_RANK/MARROW_SIZE)"),
    ];
    for (r, s, name) in SOURCES {
        let Some(rank) = get(r) else { continue };
        let num = |var: &str, v: &str| {
            v.trim().parse::<usize>().map_err(|e| VerbsError::Bootstrap(format!("{var}={v:?}: {e}")))
        };
        let rank = num(r, &rank)?;
        let size = match get(s) {
            Some(v) => num(s, &v)?,
            None => {
                return Err(VerbsError::Bootstrap(format!(
                    "{r} is set ({name}) but {s} is not: cannot tell the number of ranks"
                )));
            }
        };
        if rank >= size {
            return Err(VerbsError::Bootstrap(format!("{r}={rank} is not below {s}={size}")));
        }
        let (root, id) = match get("MARROW_BOOTSTRAP") {
            Some(t) => match t.rsplitn(3, ':').collect::<Vec<_>>()[..] {
                [id, port, host] if port.parse::<u16>().is_ok() => {
                    (Some(format!("{host}:{port}")), Some(id.to_string()))
                }
                _ => (Some(t.clone()), None),
            },
            None => (None, None),
        };
        let id = id
            .or_else(|| get("MARROW_BOOTSTRAP_ID"))
            .or_else(|| get("SLURM_JOB_ID").map(|j| format!("slurm-{j}")))
            .or_else(|| get("PMIX_NAMESPACE"))
            .or_else(|| get("OMPI_MCA_ess_base_jobid").map(|j| format!("ompi-{j}")));
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
    pub fn allgather<T: Serialize + DeserializeOwned + Clone>(
        &self,
        size: usize,
        mine: &T,
        timeout: Duration,
    ) -> Result<Vec<T>, VerbsError> {
        let deadline = Instant::now() + timeout;
        let mut all: Vec<Option<T>> = vec![None; size];
        all[0] = Some(mine.clone());
        let mut peers: Vec<TcpStream> = Vec::new();
        self.listener.set_nonblocking(true).map_err(|e| io("listener", e))?;
        while all.iter().any(Option::is_none) {
            let missing: Vec<usize> = all.iter().enumerate().filter(|(_, v)| v.is_none()).map(|(i, _)| i).collect();
            if Instant::now() > deadline {
                return Err(VerbsError::Bootstrap(format!(
                    "timed out after {timeout:?} waiting for ranks {missing:?} to connect"
                )));
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
            s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10))))
                .map_err(|e| io("peer socket", e))?;
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).map_err(|e| io(&format!("read from {from}"), e))?;
            let h: Hello<T> = serde_json::from_str(&line)
                .map_err(|e| VerbsError::Bootstrap(format!("bad hello from {from}: {e}")))?;
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
                let _ = writeln!(
                    w,
                    "{}",
                    serde_json::to_string(&Reply::<T>::Error { error: why.clone() }).unwrap_or_default()
                );
                continue; // a stray peer does not end the job's rendezvous
            }
            all[h.rank] = Some(h.payload);
            peers.push(s);
        }
        let all: Vec<T> = all.into_iter().map(|v| v.expect("all present")).collect();
        let reply = serde_json::to_string(&Reply::All { all: all.clone() })
            .map_err(|e| VerbsError::Bootstrap(e.to_string()))?;
        for mut p in peers {
            writeln!(p, "{reply}").map_err(|e| io("send all", e))?;
        }
        Ok(all)
    }
}

/// A peer's side: connect to `token` (`host:port:id`), retrying until the
/// root listens or `timeout` passes, send our payload, receive everyone's.
pub fn peer_allgather<T: Serialize + DeserializeOwned>(
    token: &str,
    rank: usize,
    size: usize,
    mine: &T,
    timeout: Duration,
) -> Result<Vec<T>, VerbsError> {
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
    s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10))))
        .map_err(|e| io("socket", e))?;
    let hello = Hello { id, rank, size, payload: mine };
    let mut w = &s;
    writeln!(w, "{}", serde_json::to_string(&hello).map_err(|e| VerbsError::Bootstrap(e.to_string()))?)
        .map_err(|e| io("send hello", e))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).map_err(|e| io(&format!("wait for the root {addr}"), e))?;
    match serde_json::from_str::<Reply<T>>(&line) {
        Ok(Reply::All { all }) if all.len() == size => Ok(all),
        Ok(Reply::All { all }) => {
            Err(VerbsError::Bootstrap(format!("root sent {} records for {size} ranks", all.len())))
        }
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
        let l = detect(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("MARROW_BOOTSTRAP", "node0:18515"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((l.rank, l.size, l.launcher, l.root.as_deref()), (1, 2, "Open MPI mpirun", Some("node0:18515")));
        let l = detect(env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_ID", "77"),
            ("MARROW_BOOTSTRAP", "n0:1"),
        ]))
        .unwrap()
        .unwrap();
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

    #[test]
    fn the_route_is_mpi_under_mpirun_when_libmpi_loads_else_tcp() {
        // libmpi forced absent under Open MPI's mpirun: the error names the
        // package and the other way, MARROW_BOOTSTRAP.
        let e = route(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("MARROW_MPI_LIB", "/nonexistent/libmpi.so"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("libmpi not found (tried /nonexistent/libmpi.so")
                && e.contains("apt install libopenmpi3 openmpi-bin")
                && e.contains("MARROW_BOOTSTRAP (host:port of rank 0's rendezvous) is not set"),
            "{e}"
        );
        // ... with MARROW_BOOTSTRAP it falls back to the rendezvous.
        let r = route(env(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("MARROW_MPI_LIB", "/nonexistent/libmpi.so"),
            ("MARROW_BOOTSTRAP", "n0:9"),
        ]))
        .unwrap();
        assert!(matches!(&r, Some(Route::Tcp(l)) if l.rank == 1 && l.root.as_deref() == Some("n0:9")), "{r:?}");
        // srun is not mpirun: no libmpi is tried, the rendezvous is used.
        let r = route(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("MARROW_BOOTSTRAP", "n0:9")])).unwrap();
        assert!(matches!(r, Some(Route::Tcp(_))), "{r:?}");
        assert!(
            route(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]))
                .unwrap_err()
                .to_string()
                .contains("does not link libmpi/libpmix")
        );
        assert!(route(env(&[])).unwrap().is_none());
        let e = crate::group::Group::launched(env(&[])).unwrap_err().to_string();
        assert!(e.contains("no launcher found") && e.contains("mpirun") && e.contains("MARROW_BOOTSTRAP"), "{e}");
        // One rank needs no exchange.
        let g = crate::group::Group::launched(env(&[("MARROW_RANK", "0"), ("MARROW_SIZE", "1")])).unwrap();
        let all = g.allgather(&RcEndpoint::sample(0), Duration::from_secs(1)).unwrap();
        assert_eq!((g.rank(), g.size(), all), (0, 1, vec![RcEndpoint::sample(0)]));
    }

    #[test]
    fn three_ranks_exchange_endpoints_over_tcp() {
        let root = Root::bind("127.0.0.1:0", None).unwrap();
        let token = root.token("127.0.0.1");
        let peers: Vec<_> = (1..3)
            .map(|r| {
                let t = token.clone();
                std::thread::spawn(move || {
                    peer_allgather(&t, r, 3, &RcEndpoint::sample(r as u32), Duration::from_secs(10))
                })
            })
            .collect();
        let at_root = root.allgather(3, &RcEndpoint::sample(0), Duration::from_secs(10)).unwrap();
        let want: Vec<RcEndpoint> = (0..3).map(RcEndpoint::sample).collect();
        assert_eq!(at_root, want);
        for p in peers {
            assert_eq!(p.join().unwrap().unwrap(), want);
        }
    }

    #[test]
    fn a_wrong_id_is_refused_and_a_missing_rank_times_out() {
        let root = Root::bind("127.0.0.1:0", Some("job-a".into())).unwrap();
        let bad = root.token("127.0.0.1").replace("job-a", "job-b");
        let h = std::thread::spawn(move || peer_allgather(&bad, 1, 2, &RcEndpoint::sample(1), Duration::from_secs(5)));
        let e = root.allgather(2, &RcEndpoint::sample(0), Duration::from_millis(700)).unwrap_err().to_string();
        assert!(e.contains("waiting for ranks [1]"), "{e}");
        let pe = h.join().unwrap().unwrap_err().to_string();
        assert!(pe.contains("id job-b is not this rendezvous's job-a"), "{pe}");
        // Nobody listening: the peer gives up at its deadline.
        let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e =
            peer_allgather(&format!("127.0.0.1:{free}:x"), 1, 2, &RcEndpoint::sample(1), Duration::from_millis(300))
                .unwrap_err()
                .to_string();
        assert!(e.contains("connect to the root"), "{e}");
    }
}
