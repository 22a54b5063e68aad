//! The ranks of one job, met once and able to meet again: the bootstrap's
//! exchange ([`crate::bootstrap`]) kept open after the first all-gather.
//!
//! The first meeting swaps connection records; the second is the barrier
//! after connecting. A request that reaches a peer QP still in INIT is
//! dropped (IBA 10.3.1: a QP below RTR does not accept packets), and a peer
//! slow to reach RTR then runs the requester's retries out. perftest meets
//! its peer the same way after its QPs reach RTS (`ctx_hand_shake` in
//! perftest_communication.c).
//!
//! | Way | First meeting | Again |
//! |---|---|---|
//! | `--listen` / `--connect` | TCP rendezvous (root, peer) | the same listener, the same token |
//! | `mpirun` | `MPI_Allgather` | `MPI_Allgather` again; `MPI_Finalize` when the group drops |
//! | another launcher | TCP rendezvous at `MARROW_BOOTSTRAP` | the same root |

use crate::VerbsError;
use crate::bootstrap::{self, Root, Route};
use crate::mpi::Mpi;
use serde::{Serialize, de::DeserializeOwned};
use std::time::Duration;

/// This process's place in a job, and the way to reach the others.
#[derive(Debug)]
pub struct Group {
    rank: usize,
    size: usize,
    via: String,
    how: How,
}

#[derive(Debug)]
enum How {
    /// Initialised (by the application or by [`Group::launched`], which then
    /// finalises it when the group drops).
    Mpi(Mpi),
    /// Rank 0 of a TCP rendezvous.
    Root(Root),
    /// Another rank of a TCP rendezvous: the root's `host:port:id`.
    Peer(String),
    /// A job of one rank.
    Alone,
}

impl Group {
    /// Rank 0 of `size` ranks, peers reaching `root`.
    pub fn root(root: Root, size: usize) -> Group {
        Group { rank: 0, size, via: "TCP rendezvous".into(), how: How::Root(root) }
    }

    /// Rank `rank` of `size`, meeting the root at `token` (`host:port:id`).
    pub fn peer(token: &str, rank: usize, size: usize) -> Group {
        Group { rank, size, via: "TCP rendezvous".into(), how: How::Peer(token.to_string()) }
    }

    /// The job the launcher's environment (read through `get`) describes, by
    /// [`bootstrap::route`]: MPI under `mpirun` when libmpi loads (initialised
    /// here; its rank and size must match the launcher's), else the TCP
    /// rendezvous at `MARROW_BOOTSTRAP` (rank 0 listening on that port on
    /// every interface).
    pub fn launched(get: impl Fn(&str) -> Option<String>) -> Result<Group, VerbsError> {
        match bootstrap::route(&get)? {
            Some(Route::Mpi { mut mpi, launch }) => {
                mpi.init()?;
                let (rank, size) = (mpi.rank()?, mpi.size()?);
                if (rank, size) != (launch.rank, launch.size) {
                    // Another MPI's library under this launcher starts as a singleton.
                    return Err(VerbsError::Bootstrap(format!(
                        "{} {} says rank {rank} of {size}, but {} says rank {} of {}: not the launcher's MPI; point MARROW_MPI_LIB at the libmpi of the mpirun used",
                        mpi.flavour(),
                        mpi.path,
                        launch.launcher,
                        launch.rank,
                        launch.size
                    )));
                }
                let via = format!("MPI_Allgather ({} {})", mpi.flavour(), mpi.path);
                Ok(Group { rank, size, via, how: How::Mpi(mpi) })
            }
            Some(Route::Tcp(l)) => {
                let id = l.id.clone().unwrap_or_else(|| "marrow".into());
                let via = format!("TCP rendezvous {} id {id} ({})", l.root.as_deref().unwrap_or("-"), l.launcher);
                let how = match (&l.root, l.rank) {
                    (None, _) => How::Alone,
                    (Some(root), 0) => {
                        let port = root.rsplit(':').next().unwrap_or("18515");
                        How::Root(Root::bind(&format!("0.0.0.0:{port}"), Some(id))?)
                    }
                    (Some(root), _) => How::Peer(format!("{root}:{id}")),
                };
                Ok(Group { rank: l.rank, size: l.size, via, how })
            }
            None => Err(VerbsError::Bootstrap(
                "no launcher found: start the ranks with mpirun (Open MPI or MPICH; libmpi is loaded at run time), or set MARROW_BOOTSTRAP=host:port on every rank with the launcher's rank variables (srun, or MARROW_RANK/MARROW_SIZE)".into(),
            )),
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// How the ranks meet, for messages.
    pub fn via(&self) -> &str {
        &self.via
    }

    /// Every rank's `mine`, by rank. `timeout` bounds the TCP waits; an MPI
    /// collective has none of its own (mpirun ends the job when a rank dies).
    pub fn allgather<T: Serialize + DeserializeOwned + Clone>(
        &self,
        mine: &T,
        timeout: Duration,
    ) -> Result<Vec<T>, VerbsError> {
        match &self.how {
            How::Mpi(mpi) => {
                let bytes = serde_json::to_vec(mine).map_err(|e| VerbsError::Bootstrap(e.to_string()))?;
                mpi.allgather(&bytes)?
                    .iter()
                    .enumerate()
                    .map(|(r, b)| {
                        serde_json::from_slice(b)
                            .map_err(|e| VerbsError::Bootstrap(format!("rank {r}'s record over MPI: {e}")))
                    })
                    .collect()
            }
            How::Root(root) => root.allgather(self.size, mine, timeout),
            How::Peer(token) => bootstrap::peer_allgather(token, self.rank, self.size, mine, timeout),
            How::Alone => Ok(vec![mine.clone()]),
        }
    }

    /// Return once every rank has called it (an all-gather of nothing: no
    /// rank's result is complete before every rank has sent).
    pub fn barrier(&self, timeout: Duration) -> Result<(), VerbsError> {
        self.allgather(&(), timeout).map(drop)
    }
}
