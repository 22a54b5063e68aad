//! Writes large inputs for `marrow decode` and `marrow trace show`, to see
//! that neither holds its input in memory (`docs/PERFORMANCE.md`, "Parsers
//! bounded in memory"):
//!
//! ```text
//! cargo run --release -p marrow --example big_inputs -- DIR MIB...
//! ```
//!
//! For each size, `DIR/wqe-<MIB>M.hex` (RDMA_WRITE WQEs as plain hex, one
//! 64-byte WQEBB a line) and `DIR/trace-<MIB>M.trace` (a register trace of
//! doorbells, doorbell-record reads, WQE fetches and CQE writes, as the
//! softnic records them), each `MIB` MiB or just over.

use marrow_mlx5::prelude::*;
use marrow_softnic::trace::{Kind, Recorder};
use std::io::Write;
use std::path::Path;

/// One signaled RDMA_WRITE at `index`, in its WQEBB.
fn wqe(index: u16) -> Vec<u8> {
    let sge = [Sge { addr: 0x7f00_0000_1000, length: 4096, lkey: 0x1111 }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: 0x7f00_0000_2000, rkey: 0x2222 }, sgl: &sge };
    let mut out = vec![0u8; 64];
    let built = build_wqe(&CtrlParams::signaled(index, 0x1234), &op, &mut out).expect("a valid WQE");
    out.truncate(built.ds as usize * 16);
    out
}

fn write_hex(path: &Path, bytes: usize) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0;
    for i in 0u32.. {
        if written >= bytes {
            break;
        }
        let mut w = wqe(i as u16);
        w.resize(64, 0);
        let line = format!("{}\n", marrow::model::hex_string(&w));
        f.write_all(line.as_bytes())?;
        written += line.len();
    }
    f.flush()
}

fn write_trace(path: &Path, bytes: usize) -> std::io::Result<()> {
    let mut r = Recorder::new(bytes + (1 << 20));
    let mut i: u32 = 0;
    while r.bytes().len() < bytes {
        let idx = i as u16;
        let w = wqe(idx);
        // rdma-core's doorbell: the first 8 bytes of the control segment.
        r.record(Kind::DOORBELL, 0x100, 0, 0x800, &w[..8]);
        let next = idx.wrapping_add(1).to_be_bytes();
        r.record(Kind::DBREC_READ, 0x100, 0, 0, &[0, 0, 0, 0, 0, 0, next[0], next[1]]);
        r.record(Kind::WQE_FETCH, 0x100, 0, u64::from(idx % 64) * 64, &w);
        let c = Completion::Requester {
            wqe_opcode: WqeOpcode::RDMA_WRITE,
            qpn: 0x100,
            wqe_counter: idx,
            byte_cnt: 4096,
            timestamp: u64::from(i),
        };
        let cqe = encode_cqe(&c, i & 64 != 0).expect("a valid CQE");
        r.record(Kind::CQE_WRITE, 0x100, 0x80, u64::from(idx % 64) * 64, &cqe);
        i = i.wrapping_add(1);
    }
    r.save(path)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, sizes)) = args.split_first() else {
        eprintln!("usage: big_inputs DIR MIB...");
        std::process::exit(2);
    };
    for s in sizes {
        let Ok(mib) = s.parse::<usize>() else {
            eprintln!("'{s}' is not a number of MiB");
            std::process::exit(2);
        };
        let dir = Path::new(dir);
        let hex = dir.join(format!("wqe-{mib}M.hex"));
        let trace = dir.join(format!("trace-{mib}M.trace"));
        if let Err(e) = write_hex(&hex, mib << 20).and_then(|()| write_trace(&trace, mib << 20)) {
            eprintln!("error: writing {}: {e}", dir.display());
            std::process::exit(1);
        }
        println!("{} {}", hex.display(), trace.display());
    }
}
