//! Where the NIC's queues live in the ivshmem BAR (BAR2, backed by a host
//! file): shared by the guest test program and the host-side softnic
//! (`crates/softnic/examples/kmod_nic.rs`, which `#[path]`-includes this file).
//!
//! Addresses in WQEs are byte offsets in the BAR: the softnic registers the
//! whole file as one memory region based at 0, so `addr` = BAR offset.
//!
//! | BAR page | window | what |
//! |---|---|---|
//! | 0 | `INFO` (read-only, UC), added by root's ioctl | the NIC's info page: magic, QPN, keys, written by the host |
//! | 1 | `UAR` (read-write, WC), added by root's ioctl | the doorbell (UAR) page; BlueFlame registers at 0x800 and 0x900 |
//! | 2..16 | `QUEUES` (read-write, UC), the module's load-time window | send queue, doorbell records, CQ, buffers |

#![allow(dead_code)]

/// Bytes of the ivshmem BAR (the host file).
pub const BAR_BYTES: usize = 1 << 20;
/// The PCI address the QEMU command line gives the ivshmem device (`addr=0x4`).
pub const IVSHMEM_BUS: u8 = 0;
/// `PCI_DEVFN(4, 0)`.
pub const IVSHMEM_DEVFN: u8 = 4 << 3;
/// The BAR that maps the shared memory (QEMU docs/specs/ivshmem-spec.rst).
pub const IVSHMEM_BAR: u32 = 2;

pub const PAGE: usize = 4096;

/// The info page (BAR page 0).
pub const INFO_PAGE: u64 = 0;
/// The UAR page (BAR page 1).
pub const UAR_PAGE: u64 = 1;
/// The queue window: BAR pages 2 to 15.
pub const QUEUES_PAGE: u64 = 2;
pub const QUEUES_PAGES: u64 = 14;

/// Info page fields (little endian), written by the host softnic.
pub const INFO_MAGIC: usize = 0x00;
pub const INFO_QPN: usize = 0x08;
pub const INFO_LKEY: usize = 0x0c;
pub const INFO_RKEY: usize = 0x10;
/// `b"MARROWNIC\0\0\0\0\0\0\0"` as a little-endian u64 of its first 8 bytes.
pub const MAGIC: u64 = u64::from_le_bytes(*b"MARROWNI");

/// Offsets within the queue window (add `QUEUES_PAGE * PAGE` for the BAR offset).
pub const SQ_OFF: usize = 0;
/// 64 WQEBBs of 64 bytes: one page.
pub const SQ_WQEBBS: u32 = 64;
/// QP doorbell record: `[0]` receive counter, `[1]` send counter (big endian).
pub const QP_DBREC_OFF: usize = PAGE;
/// CQ doorbell record, in the same page.
pub const CQ_DBREC_OFF: usize = PAGE + 64;
/// CQ ring: 16 CQEs of 64 bytes.
pub const CQ_OFF: usize = 2 * PAGE;
pub const CQ_NCQE: u32 = 16;
/// Receive queue (unused by the test, required by a QP): 1 WQE of 16 bytes.
pub const RQ_OFF: usize = 3 * PAGE;
pub const RQ_WQES: u32 = 1;
pub const RQ_STRIDE: u32 = 16;
/// RDMA_WRITE source and destination, 16 KiB each.
pub const SRC_OFF: usize = 4 * PAGE;
pub const DST_OFF: usize = 8 * PAGE;
pub const BUF_BYTES: usize = 4 * PAGE;
/// Guest-to-host status: the guest writes `DONE_MAGIC` here when it has
/// checked the CQE and the data, and the host softnic exits.
pub const STATUS_OFF: usize = 12 * PAGE;
pub const DONE_MAGIC: u64 = u64::from_le_bytes(*b"GUESTOK!");
pub const FAIL_MAGIC: u64 = u64::from_le_bytes(*b"GUESTBAD");

/// Byte offset in the BAR of an offset in the queue window.
pub const fn bar_offset(queue_off: usize) -> u64 {
    QUEUES_PAGE * PAGE as u64 + queue_off as u64
}
