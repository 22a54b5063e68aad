//! Safe wrappers over the oracle harnesses that `build.rs` compiles:
//! rdma-core's inline helpers from `<infiniband/mlx5dv.h>` and the layout of
//! marrow's generated C header as g++ computes it.
//!
//! This test-only crate is the one place outside `crates/mmio` with `unsafe`:
//! calls into C. Each wrapper passes buffers of exactly the size the C side
//! reads or writes.

use std::ffi::{CStr, c_char};

/// Bytes the Rust side pre-fills every output buffer with, so that a byte a
/// helper does not write stays visible.
pub const POISON: u8 = 0xA5;

#[repr(C)]
struct RawField {
    strct: *const c_char,
    field: *const c_char,
    offset: usize,
    size: usize,
    struct_size: usize,
}

#[repr(C)]
struct RawConst {
    name: *const c_char,
    value: u64,
}

#[repr(C)]
struct IfcField {
    strct: *const c_char,
    field: *const c_char,
    bit_off: usize,
    bit_sz: usize,
}

unsafe extern "C" {
    fn oracle_set_ctrl_seg(
        out: *mut u8,
        pi: u16,
        opcode: u8,
        opmod: u8,
        qp_num: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
        clear_8_11: i32,
    );
    fn oracle_x86_set_ctrl_seg(
        out: *mut u8,
        pi: u16,
        opcode: u8,
        opmod: u8,
        qp_num: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    );
    fn oracle_set_data_seg(out: *mut u8, length: u32, lkey: u32, address: u64);
    fn oracle_x86_set_data_seg(out: *mut u8, length: u32, lkey: u32, address: u64);
    fn oracle_set_dgram_seg(
        out: *mut u8,
        key: u64,
        dqp_dct: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: *const u8,
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: *const u8,
    );
    fn oracle_cqe_getters(cqe: *const u8, owner: *mut u8, se: *mut u8, format: *mut u8, opcode: *mut u8);
    fn oracle_set_cqe_owner(cqe: *mut u8, val: u8);
    fn oracle_field_count() -> usize;
    fn oracle_field_at(i: usize) -> *const RawField;
    fn oracle_const_count() -> usize;
    fn oracle_const_at(i: usize) -> *const RawConst;
    fn devx_create_cq_in(
        inp: *mut u8,
        log_cq_size: u32,
        uar: u32,
        eqn: u32,
        umem_id: u32,
        umem_off: u64,
        dbr_umem: u32,
        dbr_off: u64,
        cc: i32,
    ) -> usize;
    fn devx_create_qp_in(
        inp: *mut u8,
        pd: u32,
        uar: u32,
        log_sq: u32,
        cqn_snd: u32,
        cqn_rcv: u32,
        wq_umem: u32,
        dbr_umem: u32,
        dbr_off: u64,
    ) -> usize;
    fn devx_rst2init_qp_in(inp: *mut u8, qpn: u32, port: u32) -> usize;
    fn devx_init2rtr_qp_in(
        inp: *mut u8,
        qpn: u32,
        mtu: u32,
        remote_qpn: u32,
        psn: u32,
        log_rra: u32,
        min_rnr: u32,
        port: u32,
        roce: i32,
        rlid: u32,
        gid: *const u8,
        sgid: u32,
        rmac: *const u8,
        ack_timeout: u32,
    ) -> usize;
    fn devx_rtr2rts_qp_in(
        inp: *mut u8,
        qpn: u32,
        retry: u32,
        rnr: u32,
        psn: u32,
        log_sra: u32,
        ack_timeout: u32,
        port: u32,
    ) -> usize;
    fn ifc_rdma_count() -> usize;
    fn ifc_rdma_at(i: usize) -> *const IfcField;
    fn ifc_linux_count() -> usize;
    fn ifc_linux_at(i: usize) -> *const IfcField;
    fn ifc_const_count() -> usize;
    fn ifc_const_at(i: usize) -> *const RawConst;
    fn verbs_field_count() -> usize;
    fn verbs_field_at(i: usize) -> *const RawField;
    fn verbs_const_count() -> usize;
    fn verbs_const_at(i: usize) -> *const RawConst;
    fn generated_field_count() -> usize;
    fn generated_field_at(i: usize) -> *const RawField;
}

/// Arguments of `mlx5dv_set_ctrl_seg`, in its order.
#[derive(Clone, Copy, Debug)]
pub struct CtrlArgs {
    pub pi: u16,
    pub opcode: u8,
    pub opmod: u8,
    pub qp_num: u32,
    pub fm_ce_se: u8,
    pub ds: u8,
    pub signature: u8,
    pub imm: u32,
}

/// `imm` as rdma-core's helpers take it: "The caller should prepare imm in
/// advance" (mlx5dv.h), i.e. already big endian (`htobe32`), as
/// `ibv_send_wr.imm_data` is. marrow's API takes the host value.
pub fn htobe32(v: u32) -> u32 {
    u32::from_ne_bytes(v.to_be_bytes())
}

/// `mlx5dv_set_ctrl_seg` into a poisoned 16-byte buffer, after the 32-bit
/// clear of bytes 8..11 that rdma-core's post path does when `clear_8_11`.
/// `a.imm` is the host value; it is passed through [`htobe32`].
pub fn set_ctrl_seg(a: &CtrlArgs, clear_8_11: bool) -> [u8; 16] {
    let mut out = [POISON; 16];
    // SAFETY: the harness reads and writes exactly 16 bytes at `out`.
    unsafe {
        oracle_set_ctrl_seg(
            out.as_mut_ptr(),
            a.pi,
            a.opcode,
            a.opmod,
            a.qp_num,
            a.fm_ce_se,
            a.ds,
            a.signature,
            htobe32(a.imm),
            i32::from(clear_8_11),
        )
    };
    out
}

/// `mlx5dv_x86_set_ctrl_seg` (the SSE3 shuffle encoding) into a poisoned
/// buffer; `a.imm` is the host value, passed through [`htobe32`].
pub fn x86_set_ctrl_seg(a: &CtrlArgs) -> [u8; 16] {
    let mut out = [POISON; 16];
    // SAFETY: the harness reads and writes exactly 16 bytes at `out`.
    unsafe {
        oracle_x86_set_ctrl_seg(
            out.as_mut_ptr(),
            a.pi,
            a.opcode,
            a.opmod,
            a.qp_num,
            a.fm_ce_se,
            a.ds,
            a.signature,
            htobe32(a.imm),
        )
    };
    out
}

/// `mlx5dv_set_data_seg` into a poisoned buffer.
pub fn set_data_seg(length: u32, lkey: u32, addr: u64) -> [u8; 16] {
    let mut out = [POISON; 16];
    // SAFETY: the harness reads and writes exactly 16 bytes at `out`.
    unsafe { oracle_set_data_seg(out.as_mut_ptr(), length, lkey, addr) };
    out
}

/// `mlx5dv_x86_set_data_seg` into a poisoned buffer.
pub fn x86_set_data_seg(length: u32, lkey: u32, addr: u64) -> [u8; 16] {
    let mut out = [POISON; 16];
    // SAFETY: the harness reads and writes exactly 16 bytes at `out`.
    unsafe { oracle_x86_set_data_seg(out.as_mut_ptr(), length, lkey, addr) };
    out
}

/// Arguments of `mlx5dv_set_dgram_seg`.
#[derive(Clone, Copy, Debug)]
pub struct DgramArgs {
    pub key: u64,
    pub dqp_dct: u32,
    pub ext: u8,
    pub stat_rate_sl: u8,
    pub fl_mlid: u8,
    pub rlid: u16,
    pub rmac: [u8; 6],
    pub tclass: u8,
    pub hop_limit: u8,
    pub grh_gid_fl: u32,
    pub rgid: [u8; 16],
}

/// `mlx5dv_set_dgram_seg` into a poisoned 48-byte buffer.
pub fn set_dgram_seg(a: &DgramArgs) -> [u8; 48] {
    let mut out = [POISON; 48];
    // SAFETY: the harness writes 48 bytes at `out` and reads 6 and 16 bytes
    // from the two arrays, which live for the call.
    unsafe {
        oracle_set_dgram_seg(
            out.as_mut_ptr(),
            a.key,
            a.dqp_dct,
            a.ext,
            a.stat_rate_sl,
            a.fl_mlid,
            a.rlid,
            a.rmac.as_ptr(),
            a.tclass,
            a.hop_limit,
            a.grh_gid_fl,
            a.rgid.as_ptr(),
        )
    };
    out
}

/// `(owner, se, format, opcode)` from rdma-core's `mlx5dv_get_cqe_*`.
pub fn cqe_getters(cqe: &[u8; 64]) -> (u8, u8, u8, u8) {
    let (mut o, mut s, mut f, mut op) = (0, 0, 0, 0);
    // SAFETY: the harness reads 64 bytes from `cqe` and writes one byte to
    // each of the four locals.
    unsafe { oracle_cqe_getters(cqe.as_ptr(), &mut o, &mut s, &mut f, &mut op) };
    (o, s, f, op)
}

/// `mlx5dv_set_cqe_owner` on a copy of `cqe`.
pub fn set_cqe_owner(cqe: &[u8; 64], val: u8) -> [u8; 64] {
    let mut out = *cqe;
    // SAFETY: the harness reads and writes 64 bytes at `out`.
    unsafe { oracle_set_cqe_owner(out.as_mut_ptr(), val) };
    out
}

/// A field's place as a C compiler computed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CField {
    pub strct: String,
    pub field: String,
    pub offset: usize,
    pub size: usize,
    pub struct_size: usize,
}

/// Entries 0..count of one of a harness's static tables, each turned into
/// an owned value by `own`.
fn read_entries<R, T>(count: usize, at: impl Fn(usize) -> *const R, own: impl Fn(&R) -> T) -> Vec<T> {
    (0..count)
        .map(|i| {
            let p = at(i);
            assert!(!p.is_null(), "harness table entry {i} missing");
            // SAFETY: `p` is non-null and points into a static table of the
            // harness, which lives as long as the program and is never written.
            own(unsafe { &*p })
        })
        .collect()
}

/// One of a harness table's strings.
///
/// # Safety
/// `p` must be a NUL-terminated literal of the harness (static, never written).
unsafe fn literal(p: *const c_char) -> String {
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn read_table(count: usize, at: impl Fn(usize) -> *const RawField) -> Vec<CField> {
    read_entries(count, at, |r| CField {
        // SAFETY: the harness's names are NUL-terminated literals.
        strct: unsafe { literal(r.strct) },
        // SAFETY: as above.
        field: unsafe { literal(r.field) },
        offset: r.offset,
        size: r.size,
        struct_size: r.struct_size,
    })
}

/// A harness's constant table: `count` entries, each a name and a value.
fn read_consts(count: usize, at: impl Fn(usize) -> *const RawConst) -> Vec<(String, u64)> {
    // SAFETY: the harness's names are NUL-terminated literals.
    read_entries(count, at, |r| (unsafe { literal(r.name) }, r.value))
}

/// Every named field of rdma-core's mlx5dv.h structs, as gcc lays them out.
pub fn rdma_core_fields() -> Vec<CField> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_table(unsafe { oracle_field_count() }, |i| unsafe { oracle_field_at(i) })
}

/// Every field of marrow's generated header, as g++ lays it out.
pub fn generated_header_fields() -> Vec<CField> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_table(unsafe { generated_field_count() }, |i| unsafe { generated_field_at(i) })
}

/// rdma-core's constants by name.
pub fn rdma_core_consts() -> Vec<(String, u64)> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_consts(unsafe { oracle_const_count() }, |i| unsafe { oracle_const_at(i) })
}

/// A small deterministic generator (splitmix64) so each run tests the same
/// inputs and a failure names a reproducible case.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    pub fn next_u16(&mut self) -> u16 {
        self.next_u64() as u16
    }
    pub fn next_u8(&mut self) -> u8 {
        self.next_u64() as u8
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        b.iter_mut().for_each(|x| *x = self.next_u8());
        b
    }
}

/// Inputs per differential test; the issue asks for at least 10,000.
pub const CASES: usize = 20_000;

#[repr(C)]
struct PciReg {
    name: *const c_char,
    value: std::ffi::c_ulong,
}

unsafe extern "C" {
    fn marrow_pci_regs(count: *mut usize) -> *const PciReg;
    fn marrow_pci_split_id(id: u32, bus: *mut u32, slot: *mut u32, func: *mut u32);
}

/// A routing ID split as Linux's `PCI_SLOT`/`PCI_FUNC` split its low byte
/// (c/pci_regs_harness.c): (bus, device, function).
pub fn linux_split_id(id: u16) -> (u32, u32, u32) {
    let (mut bus, mut slot, mut func) = (0, 0, 0);
    // SAFETY: the harness writes the three u32s it is given and keeps no pointer.
    unsafe { marrow_pci_split_id(u32::from(id), &mut bus, &mut slot, &mut func) };
    (bus, slot, func)
}

/// Linux `<linux/pci_regs.h>` constants by name (c/pci_regs_harness.c).
pub fn linux_pci_regs() -> Vec<(String, u64)> {
    let mut n = 0usize;
    // SAFETY: the harness returns a static table of `n` entries whose names
    // are static NUL-terminated string literals.
    let table = unsafe { std::slice::from_raw_parts(marrow_pci_regs(&mut n), n) };
    table
        .iter()
        // SAFETY: see above: each name is a static C string literal.
        .map(|r| (unsafe { CStr::from_ptr(r.name) }.to_str().unwrap().to_string(), r.value))
        .collect()
}

/// Every field of the rdma-core verbs/mlx5dv structs that marrow-verbs
/// declares by hand, as gcc lays them out from the real headers.
pub fn verbs_abi_fields() -> Vec<CField> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_table(unsafe { verbs_field_count() }, |i| unsafe { verbs_field_at(i) })
}

/// The verbs.h/mlx5dv.h constants marrow-verbs declares, by name.
pub fn verbs_abi_consts() -> Vec<(String, u64)> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_consts(unsafe { verbs_const_count() }, |i| unsafe { verbs_const_at(i) })
}

/// A PRM field's place as gcc computed it from an `mlx5_ifc.h`: offset and
/// width in bits (`__devx_bit_off`/`__devx_bit_sz`). `field` is empty for the
/// struct's own entry, whose `bit_sz` is the struct's size in bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfcFieldOut {
    pub strct: String,
    pub field: String,
    pub bit_off: usize,
    pub bit_sz: usize,
}

fn read_ifc(count: usize, at: impl Fn(usize) -> *const IfcField) -> Vec<IfcFieldOut> {
    read_entries(count, at, |r| IfcFieldOut {
        // SAFETY: the harness's names are NUL-terminated literals.
        strct: unsafe { literal(r.strct) },
        // SAFETY: as above.
        field: unsafe { literal(r.field) },
        bit_off: r.bit_off,
        bit_sz: r.bit_sz,
    })
}

/// Every named PRM field of the generated layouts that rdma-core's
/// `providers/mlx5/mlx5_ifc.h` declares, as gcc lays it out.
pub fn ifc_rdma_core_fields() -> Vec<IfcFieldOut> {
    // SAFETY: plain calls into the generated harness, which returns static data.
    read_ifc(unsafe { ifc_rdma_count() }, |i| unsafe { ifc_rdma_at(i) })
}

/// The same for the kernel's `include/linux/mlx5/mlx5_ifc.h` (the CQ structs).
pub fn ifc_linux_fields() -> Vec<IfcFieldOut> {
    // SAFETY: plain calls into the generated harness, which returns static data.
    read_ifc(unsafe { ifc_linux_count() }, |i| unsafe { ifc_linux_at(i) })
}

/// rdma-core mlx5_ifc.h's command constants.
pub fn ifc_consts() -> Vec<(String, u64)> {
    // SAFETY: plain calls into the harness, which returns static data.
    read_consts(unsafe { ifc_const_count() }, |i| unsafe { ifc_const_at(i) })
}

/// Room for any devx command the harness builds (create_qp_in is 272 bytes).
const DEVX_BUF: usize = 512;

fn devx_call(f: impl FnOnce(*mut u8) -> usize) -> Vec<u8> {
    let mut b = vec![POISON; DEVX_BUF];
    let n = f(b.as_mut_ptr());
    assert!(n <= DEVX_BUF, "harness command of {n} bytes");
    b.truncate(n);
    b
}

/// `create_cq_in` as rdma-core's DEVX_SET builds it (kernel mlx5_ifc.h).
#[allow(clippy::too_many_arguments)]
pub fn devx_create_cq(
    log_cq_size: u32,
    uar: u32,
    eqn: u32,
    umem: (u32, u64),
    dbr: (u32, u64),
    collapsed: bool,
) -> Vec<u8> {
    // SAFETY: the harness writes DEVX_ST_SZ_BYTES(create_cq_in) bytes, fewer than DEVX_BUF.
    devx_call(|p| unsafe {
        devx_create_cq_in(p, log_cq_size, uar, eqn, umem.0, umem.1, dbr.0, dbr.1, i32::from(collapsed))
    })
}

/// `create_qp_in` as DEVX_SET builds it (rdma-core mlx5_ifc.h).
#[allow(clippy::too_many_arguments)]
pub fn devx_create_qp(pd: u32, uar: u32, log_sq: u32, cqn: (u32, u32), wq_umem: u32, dbr: (u32, u64)) -> Vec<u8> {
    // SAFETY: as above, DEVX_ST_SZ_BYTES(create_qp_in) < DEVX_BUF.
    devx_call(|p| unsafe { devx_create_qp_in(p, pd, uar, log_sq, cqn.0, cqn.1, wq_umem, dbr.0, dbr.1) })
}

/// `rst2init_qp_in` as DEVX_SET builds it.
pub fn devx_rst2init(qpn: u32, port: u32) -> Vec<u8> {
    // SAFETY: as above.
    devx_call(|p| unsafe { devx_rst2init_qp_in(p, qpn, port) })
}

/// Arguments of the INIT2RTR harness.
#[derive(Clone, Copy, Debug)]
pub struct Init2Rtr {
    pub qpn: u32,
    pub mtu: u32,
    pub remote_qpn: u32,
    pub psn: u32,
    pub log_rra: u32,
    pub min_rnr: u32,
    pub port: u32,
    pub roce: bool,
    pub rlid: u32,
    pub gid: [u8; 16],
    pub sgid: u32,
    pub rmac: [u8; 6],
    pub ack_timeout: u32,
}

/// `init2rtr_qp_in` as DEVX_SET builds it.
pub fn devx_init2rtr(a: &Init2Rtr) -> Vec<u8> {
    // SAFETY: as above; gid and rmac point at 16 and 6 readable bytes.
    devx_call(|p| unsafe {
        devx_init2rtr_qp_in(
            p,
            a.qpn,
            a.mtu,
            a.remote_qpn,
            a.psn,
            a.log_rra,
            a.min_rnr,
            a.port,
            i32::from(a.roce),
            a.rlid,
            a.gid.as_ptr(),
            a.sgid,
            a.rmac.as_ptr(),
            a.ack_timeout,
        )
    })
}

/// `rtr2rts_qp_in` as DEVX_SET builds it.
#[allow(clippy::too_many_arguments)]
pub fn devx_rtr2rts(qpn: u32, retry: u32, rnr: u32, psn: u32, log_sra: u32, ack_timeout: u32, port: u32) -> Vec<u8> {
    // SAFETY: as above.
    devx_call(|p| unsafe { devx_rtr2rts_qp_in(p, qpn, retry, rnr, psn, log_sra, ack_timeout, port) })
}
