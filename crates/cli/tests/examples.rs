//! The files in `examples/` are built here with the marrow-mlx5 builder
//! (`build_wqe`, `encode_cqe`), never written by hand: this test checks that
//! each file still reads back to exactly those bytes.
//!
//! To regenerate them after a builder or format change:
//!
//! ```text
//! MARROW_WRITE_EXAMPLES=1 cargo test -p marrow --test examples
//! ```

use marrow::hexin::{InputFormat, read_input};
use marrow::model::hex_string;
use marrow_mlx5::prelude::*;
use std::fmt::Write;
use std::path::PathBuf;

const QPN: u32 = 0x1234;
const LKEY: u32 = 0x1111;
const RKEY: u32 = 0x2222;
const LADDR: u64 = 0x7f00_0000_1000;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A WQE built into a ring slot of `slot` bytes that starts zeroed.
fn wqe(wqe_index: u16, op: &WqeOp<'_>, slot: usize) -> (Vec<u8>, BuiltWqe) {
    let mut out = vec![0u8; slot];
    let built = build_wqe(&CtrlParams::signaled(wqe_index, QPN), op, &mut out).expect("example WQE builds");
    (out, built)
}

fn rdma_write() -> (Vec<u8>, BuiltWqe) {
    let sge = [Sge { addr: LADDR, length: 4096, lkey: LKEY }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: 0x7f00_0000_2000, rkey: RKEY }, sgl: &sge };
    let (mut b, built) = wqe(5, &op, 64);
    b.truncate(built.len());
    (b, built)
}

const INLINE_DATA: &[u8] = b"hello from marrow: an inline RDMA write!";

fn inline_write() -> (Vec<u8>, BuiltWqe) {
    let op = WqeOp::RdmaWriteInline { remote: RemoteAddr { raddr: 0x7f00_0000_2000, rkey: RKEY }, data: INLINE_DATA };
    wqe(6, &op, 128)
}

fn atomic_fa() -> (Vec<u8>, BuiltWqe) {
    let op = WqeOp::AtomicFa {
        remote: RemoteAddr { raddr: 0x7f00_0000_3000, rkey: RKEY },
        local: Sge { addr: LADDR, length: 8, lkey: LKEY },
        add: 1,
    };
    let (mut b, built) = wqe(7, &op, 64);
    b.truncate(built.len());
    (b, built)
}

fn err_cqe() -> Vec<u8> {
    let c = Completion::Error(ErrorCompletion {
        opcode: CqeOpcode::REQ_ERR,
        syndrome: Syndrome::REMOTE_ACCESS_ERR,
        vendor_err_synd: 0x88,
        hw_err_synd: 0,
        hw_synd_type: 0,
        wqe_opcode: WqeOpcode::RDMA_WRITE,
        qpn: QPN,
        wqe_counter: 5,
    });
    encode_cqe(&c, true).expect("example CQE encodes").to_vec()
}

/// Plain hex: a header comment, then 16 bytes (four big-endian words) a
/// line, each line followed by its label.
fn plain_hex(header: &str, bytes: &[u8], labels: &[&str]) -> String {
    let mut o = String::new();
    for l in header.lines() {
        let _ = writeln!(o, "{}", format!("# {l}").trim_end());
    }
    for (i, line) in bytes.chunks(16).enumerate() {
        let words: Vec<String> = line.chunks(4).map(hex_string).collect();
        let label = labels.get(i).copied().unwrap_or("");
        let line = format!("{:<35}  # [{:#05x}] {label}", words.join(" "), i * 16);
        let _ = writeln!(o, "{}", line.trim_end());
    }
    o
}

/// The format `xxd` prints (16 bytes a line, 2-byte groups).
fn xxd(bytes: &[u8]) -> String {
    let mut o = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let groups: Vec<String> = line.chunks(2).map(hex_string).collect();
        let ascii: String = line.iter().map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '.' }).collect();
        let _ = writeln!(o, "{:08x}: {:<39}  {ascii}", i * 16, groups.join(" "));
    }
    o
}

struct Example {
    file: &'static str,
    bytes: Vec<u8>,
    text: String,
    format: InputFormat,
}

fn examples() -> Vec<Example> {
    let (w, bw) = rdma_write();
    let (i, bi) = inline_write();
    let (a, ba) = atomic_fa();
    assert_eq!((bw.ds, bw.wqebbs, bi.ds, bi.wqebbs, ba.ds, ba.wqebbs), (3, 1, 5, 2, 4, 1));
    let e = err_cqe();
    vec![
        Example {
            file: "rdma_write.wqe.hex",
            text: plain_hex(
                "A 4 KiB RDMA_WRITE, signaled, WQE index 5 on QP 0x1234 (48 bytes: ds 3, 1 WQEBB).\n\
                 Built by crates/cli/tests/examples.rs with marrow_mlx5::wqe::build_wqe:\n  \
                 CtrlParams::signaled(5, 0x1234),\n  \
                 WqeOp::RdmaWrite { remote: { raddr: 0x7f0000002000, rkey: 0x2222 },\n                     \
                 sgl: [{ addr: 0x7f0000001000, length: 4096, lkey: 0x1111 }] }\n\
                 Decode: marrow decode examples/rdma_write.wqe.hex",
                &w,
                &["mlx5_wqe_ctrl_seg", "mlx5_wqe_raddr_seg", "mlx5_wqe_data_seg"],
            ),
            bytes: w,
            format: InputFormat::Hex,
        },
        Example { file: "inline_write.wqe.xxd", text: xxd(&i), bytes: i, format: InputFormat::Xxd },
        Example {
            file: "atomic_fa.wqe.hex",
            text: plain_hex(
                "An 8-byte ATOMIC_FA (fetch-and-add 1), signaled, WQE index 7 on QP 0x1234 (64 bytes: ds 4, 1 WQEBB).\n\
                 Built by crates/cli/tests/examples.rs with marrow_mlx5::wqe::build_wqe:\n  \
                 CtrlParams::signaled(7, 0x1234),\n  \
                 WqeOp::AtomicFa { remote: { raddr: 0x7f0000003000, rkey: 0x2222 },\n                   \
                 local: { addr: 0x7f0000001000, length: 8, lkey: 0x1111 }, add: 1 }\n\
                 Decode: marrow decode examples/atomic_fa.wqe.hex",
                &a,
                &["mlx5_wqe_ctrl_seg", "mlx5_wqe_raddr_seg", "mlx5_wqe_atomic_seg", "mlx5_wqe_data_seg"],
            ),
            bytes: a,
            format: InputFormat::Hex,
        },
        Example {
            file: "err_cqe.hex",
            text: plain_hex(
                "A 64-byte error CQE: REQ_ERR, syndrome REMOTE_ACCESS_ERR (0x13), vendor_err_synd 0x88,\n\
                 for an RDMA_WRITE at wqe_counter 0x0005 on QP 0x1234, owner bit 1.\n\
                 Built by crates/cli/tests/examples.rs with marrow_mlx5::cqe::encode_cqe.\n\
                 Decode: marrow decode examples/err_cqe.hex [--ci 8 --ncqe 8]",
                &e,
                &[
                    "mlx5_err_cqe: reserved_at_0",
                    "reserved_at_0",
                    "srqn, reserved_at_120",
                    "hw_err_synd, hw_synd_type, vendor_err_synd, syndrome, s_wqe_opcode_qpn, wqe_counter, signature, op_own",
                ],
            ),
            bytes: e,
            format: InputFormat::Hex,
        },
    ]
}

#[test]
fn examples_are_the_builder_output() {
    let write = std::env::var_os("MARROW_WRITE_EXAMPLES").is_some();
    for ex in examples() {
        let path = examples_dir().join(ex.file);
        if write {
            std::fs::write(&path, &ex.text).unwrap();
        }
        let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (bytes, format) = read_input(&raw, None).unwrap_or_else(|e| panic!("{}: {e}", ex.file));
        assert_eq!(format, ex.format, "{}", ex.file);
        assert_eq!(bytes, ex.bytes, "{} no longer matches the builder's output", ex.file);
        assert_eq!(String::from_utf8_lossy(&raw), ex.text, "{}: text differs from the generator's", ex.file);
    }
}

#[test]
fn the_xxd_writer_matches_xxd_layout() {
    // One full line and one short line, as `xxd` prints them.
    let t = xxd(b"\x00\x00\x05\x08\x00\x12\x34\x03ABCDEFGH\x01\x02\x03");
    assert_eq!(
        t,
        "00000000: 0000 0508 0012 3403 4142 4344 4546 4748  ......4.ABCDEFGH\n\
         00000010: 0102 03                                  ...\n"
    );
    assert_eq!(INLINE_DATA.len(), 40);
}
