//! `marrow softnic`: the device model as a daemon serving client processes
//! over a Unix socket. Each client gets a thread for its control requests;
//! every object lives in the one model, so QPs of different clients can be
//! connected to each other. The data path never touches the socket.

use crate::SoftNic;
use crate::hca::ModifyQp;
use crate::mr::{Access, Pd};
use crate::qp::QpCaps;
use crate::shm::Shm;
use crate::wire::{self, Reply, Request};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

/// Serve clients on `listener` until it fails. Registered client memory
/// stays mapped for the daemon's life.
pub fn serve(nic: Arc<SoftNic>, listener: UnixListener) -> std::io::Result<()> {
    for stream in listener.incoming() {
        let stream = stream?;
        let nic = nic.clone();
        std::thread::Builder::new().name("softnic-client".into()).spawn(move || {
            let _ = client_loop(&nic, &stream);
        })?;
    }
    Ok(())
}

/// Bind `path` (replacing a stale socket) and serve.
pub fn run(nic: Arc<SoftNic>, path: &Path) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    serve(nic, UnixListener::bind(path)?)
}

fn client_loop(nic: &SoftNic, s: &UnixStream) -> std::io::Result<()> {
    // Memory the client registered: kept mapped while the daemon runs.
    let mut mapped: Vec<Arc<Shm>> = Vec::new();
    while let Some((req, fds)) = wire::recv::<Request>(s)? {
        let (reply, out_fds) = handle(nic, req, fds, &mut mapped);
        let raw: Vec<i32> = out_fds.iter().map(|f| f.as_raw_fd()).collect();
        wire::send(s, &reply, &raw)?;
    }
    // The client's mappings stay registered: its peers may still target them.
    std::mem::forget(mapped);
    Ok(())
}

fn handle(nic: &SoftNic, req: Request, mut fds: Vec<OwnedFd>, mapped: &mut Vec<Arc<Shm>>) -> (Reply, Vec<OwnedFd>) {
    let err = |e: String| (Reply::Error(e), Vec::new());
    let faults = req.faults();
    let mut hca = nic.hca();
    match req {
        Request::AllocPd => (Reply::Pd(hca.alloc_pd().0), Vec::new()),
        Request::RegMr { pd, addr, len, access } => {
            let Some(fd) = fds.pop() else { return err("RegMr needs the memfd passed with SCM_RIGHTS".into()) };
            let shm = match Shm::from_file(File::from(fd), len) {
                Ok(s) => Arc::new(s),
                Err(e) => return err(format!("mapping the client's memory: {e}")),
            };
            let Some(access) = Access::from_bits(access) else {
                return err(format!("unknown access bits {access:#x}"));
            };
            let region = match shm.region().sub(0, len) {
                Ok(r) => r,
                Err(e) => return err(e.to_string()),
            };
            let (lkey, rkey) = hca.reg_mr(Pd(pd), addr, region, access);
            mapped.push(shm);
            (Reply::Mr { lkey, rkey }, Vec::new())
        }
        Request::CreateCq { ncqe, collapsed } => match hca.create_cq(ncqe, wire::cq_mode(collapsed)) {
            Ok(cqn) => {
                let cq = hca.cq(cqn).expect("just created");
                let (ring, _) = crate::cq::cq_layout(ncqe);
                let fd = cq.shm.fd().try_clone_to_owned();
                match fd {
                    Ok(fd) => (Reply::Cq { cqn, ncqe, ring, dbrec: ring, len: cq.shm.len() }, vec![fd]),
                    Err(e) => err(e.to_string()),
                }
            }
            Err(e) => err(e.to_string()),
        },
        Request::CreateQp { pd, send_cq, recv_cq, sq_wqebbs, rq_wqes, rq_stride } => {
            let caps = QpCaps { sq_wqebbs, rq_wqes, rq_stride };
            match hca.create_qp(Pd(pd), send_cq, recv_cq, caps) {
                Ok(qpn) => {
                    let m = &hca.qp(qpn).expect("just created").mem;
                    let (sq, rq, db) = m.offsets;
                    let fds = (m.queues.fd().try_clone_to_owned(), m.uar_page.fd().try_clone_to_owned());
                    match fds {
                        (Ok(a), Ok(b)) => (
                            Reply::Qp {
                                qpn,
                                sq: (sq, m.sq.len()),
                                rq: (rq, m.rq.len()),
                                dbrec: db,
                                len: m.queues.len(),
                            },
                            vec![a, b],
                        ),
                        (Err(e), _) | (_, Err(e)) => err(e.to_string()),
                    }
                }
                Err(e) => err(e.to_string()),
            }
        }
        Request::ModifyQp { qpn, state, dest_qpn, rnr_retry, wire } => {
            let state = match wire::qp_state(state) {
                Ok(s) => s,
                Err(e) => return err(e),
            };
            match hca.modify_qp(qpn, ModifyQp { state, dest_qpn, rnr_retry, wire }) {
                Ok(()) => (Reply::Ok, Vec::new()),
                Err(e) => err(e.to_string()),
            }
        }
        Request::QueryQp { qpn } => match hca.qp(qpn) {
            Ok(q) => (Reply::QpState { state: q.state as u8, sq_ci: q.sq_ci }, Vec::new()),
            Err(e) => err(e.to_string()),
        },
        Request::QueryCq { cqn } => match hca.cq(cqn) {
            Ok(c) => (Reply::CqState { pi: c.pi, overflowed: c.overflowed }, Vec::new()),
            Err(e) => err(e.to_string()),
        },
        Request::EnableTrace { cap } => {
            drop(hca);
            nic.enable_trace(cap);
            (Reply::Ok, Vec::new())
        }
        Request::Trace => {
            drop(hca);
            let Some(bytes) = nic.trace_bytes() else { return err("no trace is being recorded (EnableTrace)".into()) };
            let shm = match Shm::create("trace", bytes.len()) {
                Ok(s) => s,
                Err(e) => return err(format!("a memfd for the trace: {e}")),
            };
            if let Err(e) = shm.region().write_bytes(0, &bytes) {
                return err(e.to_string());
            }
            match shm.fd().try_clone_to_owned() {
                Ok(fd) => (Reply::Trace { len: bytes.len() }, vec![fd]),
                Err(e) => err(e.to_string()),
            }
        }
        Request::SetFaults { qpn, .. } => match hca.set_faults(qpn, faults.unwrap_or_default()) {
            Ok(()) => (Reply::Ok, Vec::new()),
            Err(e) => err(e.to_string()),
        },
    }
}
