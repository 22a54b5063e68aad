//! Filling a GCRB page from a channel's objects, and reading back what the
//! device code recorded (error block, heads, trace ring) as text a person
//! can act on.

use marrow_gcrb::*;
use marrow_mlx5::raw::{Syndrome, WqeOpcode};
use marrow_mmio::Region;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// What a channel's GCRB describes.
#[derive(Clone, Copy, Debug)]
pub struct GcrbSetup {
    /// QP number.
    pub qpn: u32,
    /// Send queue ring (device address) and depth in WQEBBs.
    pub sq: (u64, u32),
    /// QP doorbell record (device address).
    pub dbrec: u64,
    /// UAR doorbell register (device address) and size.
    pub db: (u64, u32),
    /// CQ ring (device address), entries, doorbell record, collapsed?
    pub cq: (u64, u32, u64, bool),
    /// Local window: lkey, device address, length.
    pub local: (u32, u64, u64),
    /// Remote windows by PE: (address, rkey).
    pub keys: [(u64, u32); 2],
    /// Timeout of every device-side wait.
    pub timeout_ns: u64,
    /// `gcrb_config.flags.trace`: trace every post, doorbell and CQE, not
    /// only errors and timeouts.
    pub trace: bool,
}

/// Write a fresh GCRB (config, zeroed heads, error block and trace) into `page`.
pub fn fill(page: &Region, s: &GcrbSetup) -> Result<(), marrow_mmio::OutOfBounds> {
    page.fill(0, GCRB_PAGE_SIZE as usize, 0)?;
    let mut c = gcrb_config::new_zeroed();
    c.set_magic(GCRB_MAGIC).set_version(GCRB_VERSION).set_qpn(s.qpn);
    c.set_sq_base(s.sq.0).set_sq_wqebbs(s.sq.1).set_sq_stride(64);
    c.set_dbrec_addr(s.dbrec).set_db_addr(s.db.0).set_db_size(s.db.1);
    c.set_cq_base(s.cq.0).set_cq_ncqe(s.cq.1).set_cq_dbrec_addr(s.cq.2).set_cq_mode(u32::from(s.cq.3));
    c.set_local_lkey(s.local.0).set_local_base(s.local.1).set_local_len(s.local.2);
    c.set_timeout_ns(s.timeout_ns).set_key_count(s.keys.len() as u32);
    c.set_trace(s.trace);
    page.write_bytes(GCRB_OFF_CONFIG as usize, c.as_bytes())?;
    for (pe, (raddr, rkey)) in s.keys.iter().enumerate() {
        let mut k = gcrb_key::new_zeroed();
        k.set_raddr(*raddr).set_rkey(*rkey);
        page.write_bytes(GCRB_OFF_KEYS as usize + pe * gcrb_key::SIZE, k.as_bytes())?;
    }
    Ok(())
}

/// Replace PE `pe`'s remote window (address, rkey) in a filled GCRB (the
/// host owns it while no device code runs on the channel).
pub fn set_key(page: &Region, pe: usize, raddr: u64, rkey: u32) -> Result<(), marrow_mmio::OutOfBounds> {
    set_window(page, pe, raddr, rkey, 0)
}

/// [`set_key`] with the window's length in 4 KiB pages, which the device
/// code checks each remote offset against (0: unchecked, the NIC checks
/// the rkey).
pub fn set_window(
    page: &Region,
    pe: usize,
    raddr: u64,
    rkey: u32,
    rlen_pages: u32,
) -> Result<(), marrow_mmio::OutOfBounds> {
    let mut k = gcrb_key::new_zeroed();
    k.set_raddr(raddr).set_rkey(rkey).set_rlen_pages(rlen_pages);
    page.write_bytes(GCRB_OFF_KEYS as usize + pe * gcrb_key::SIZE, k.as_bytes())
}

/// Change a filled GCRB's configuration in place (the host owns it until
/// device code runs): read, edit, write back.
pub fn edit_config(page: &Region, edit: impl FnOnce(&mut gcrb_config)) -> Result<(), marrow_mmio::OutOfBounds> {
    let off = GCRB_OFF_CONFIG as usize;
    let mut b = vec![0u8; gcrb_config::SIZE];
    page.read_bytes(off, &mut b)?;
    let mut c =
        gcrb_config::read_from_bytes(&b).unwrap_or_else(|_| unreachable!("read_bytes filled gcrb_config::SIZE bytes"));
    edit(&mut c);
    page.write_bytes(off, c.as_bytes())
}

fn read<T: FromBytes>(page: &Region, off: u32, size: usize) -> Option<T> {
    let mut b = vec![0u8; size];
    page.read_bytes(off as usize, &mut b).ok()?;
    T::read_from_bytes(&b).ok()
}

/// The configuration.
pub fn config(page: &Region) -> Option<gcrb_config> {
    read(page, GCRB_OFF_CONFIG, gcrb_config::SIZE)
}

/// PE `pe`'s entry in the key table.
pub fn key(page: &Region, pe: usize) -> Option<gcrb_key> {
    read(page, GCRB_OFF_KEYS + u32::try_from(pe * gcrb_key::SIZE).ok()?, gcrb_key::SIZE)
}

/// The error block.
pub fn error(page: &Region) -> Option<gcrb_error> {
    read(page, GCRB_OFF_ERROR, gcrb_error::SIZE)
}

/// The heads.
pub fn heads(page: &Region) -> Option<gcrb_heads> {
    read(page, GCRB_OFF_HEADS, gcrb_heads::SIZE)
}

/// The last trace entries, oldest first.
pub fn trace(page: &Region) -> Vec<gcrb_trace_entry> {
    let Some(h) = heads(page) else { return Vec::new() };
    let n = GCRB_TRACE_ENTRIES as u64;
    let end = h.trace_head();
    (end.saturating_sub(n)..end)
        .filter_map(|i| {
            read(page, GCRB_OFF_TRACE + ((i % n) as u32) * gcrb_trace_entry::SIZE as u32, gcrb_trace_entry::SIZE)
        })
        .collect()
}

/// The decoded state of a channel, for a person: status, which wait, the
/// CQE syndrome by name, the heads, the recent trace.
pub fn report(page: &Region) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let Some(e) = error(page) else { return "GCRB unreadable".into() };
    let status = GcrbStatus(e.status());
    let _ = write!(o, "GCRB status {status}");
    if status == GcrbStatus::REPORTING {
        let _ = write!(o, ": a device thread is recording a failure now; read the block again for what it was");
    }
    if status == GcrbStatus::TIMEOUT {
        let _ = write!(o, ": wait {} gave up after {} ns", GcrbWait(e.wait()), e.elapsed_ns());
    }
    if status == GcrbStatus::CQE_ERROR {
        let _ = write!(
            o,
            ": syndrome {:?}, vendor_err_synd {:#04x}, hw_err_synd {:#04x}, WQE {:?} at wqe_counter {:#06x}",
            Syndrome(e.syndrome()),
            e.vendor_err_synd(),
            e.hw_err_synd(),
            WqeOpcode(e.wqe_opcode()),
            e.wqe_counter()
        );
    }
    // While REPORTING, the block's heads are being written: not shown.
    if status != GcrbStatus::OK && status != GcrbStatus::REPORTING {
        let _ = write!(
            o,
            "\n  heads then: resv_head {} ready_head {} prod_idx {} cons_idx {} cq_ci {}",
            e.resv_head(),
            e.ready_head(),
            e.prod_idx(),
            e.cons_idx(),
            e.cq_ci()
        );
    }
    if let Some(h) = heads(page) {
        let _ = write!(
            o,
            "\n  heads now:  resv_head {} ready_head {} prod_idx {} cons_idx {} cq_ci {}",
            h.resv_head(),
            h.ready_head(),
            h.prod_idx(),
            h.cons_idx(),
            h.cq_ci()
        );
        if let Some(c) = config(page).filter(|c| c.relay_ring() != 0) {
            let _ = write!(
                o,
                "\n  P2P relay (ring {:#x}, {} descriptors, puts from {} KiB): {} handed over (resv_head), {} copies made (cons_idx)",
                c.relay_ring(),
                c.relay_entries(),
                c.relay_min_kib(),
                h.resv_head(),
                h.cons_idx()
            );
        }
    }
    let t = trace(page);
    if !t.is_empty() {
        let _ = write!(o, "\n  device trace (last {}):", t.len().min(8));
        for e in t.iter().rev().take(8).rev() {
            let _ = write!(
                o,
                "\n    t={} {} thread {} arg0 {:#x} arg1 {:#x}",
                e.t_ns(),
                GcrbEvent(e.event()),
                e.thread(),
                e.arg0(),
                e.arg1()
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use marrow_softnic::shm::Shm;

    /// A GCRB page whose error block holds `status` and resv_head 7.
    fn page_with_status(status: GcrbStatus) -> Shm {
        let shm = Shm::create("gcrb-report-test", GCRB_PAGE_SIZE as usize).unwrap();
        let mut e = gcrb_error::new_zeroed();
        e.set_status(status.0).set_resv_head(7);
        shm.region().write_bytes(GCRB_OFF_ERROR as usize, e.as_bytes()).unwrap();
        shm
    }

    #[test]
    fn a_block_being_written_says_so_and_shows_no_heads_yet() {
        let page = page_with_status(GcrbStatus::REPORTING);
        let r = report(&page.region());
        assert!(r.starts_with("GCRB status REPORTING: a device thread is recording a failure now"), "{r}");
        assert!(!r.contains("heads then"), "{r}");
        let page = page_with_status(GcrbStatus::TIMEOUT);
        let r = report(&page.region());
        assert!(r.contains("heads then: resv_head 7"), "{r}");
    }
}
