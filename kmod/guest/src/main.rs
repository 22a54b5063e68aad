//! marrow-kmodtest: the guest side of `cargo xtask kmod test`.
//!
//! Runs inside the QEMU guest (static binary, busybox initramfs), one phase
//! per invocation, as the user the phase is about:
//!
//! | phase | as | what |
//! |---|---|---|
//! | `root` | root | declares the UAR and info windows by ioctl; root's own mistakes refused |
//! | `outsider` | uid 1001, not in group `marrow` | cannot open `/dev/marrow` |
//! | `user` | uid 1000, in group `marrow` | maps windows and queue memory; every misuse refused with its errno; posts an RDMA_WRITE to the softnic outside the VM through the mapped queues and doorbell |
//! | `hold` | uid 1000 | maps windows, waits while /init unbinds the device, touches them again: must die of SIGBUS |
//! | `unbound` | uid 1000 | after the ivshmem device is unbound from its driver (pci-stub): its windows give ENODEV |
//! | `removed` | uid 1000 | after the device is removed altogether: the same |
//! | `dmesg FILE [KMEMLEAK]` | root | no BUG/WARNING/Oops/leak in the kernel log |
//! | `direct FILE` | anyone, on the host | the RDMA_WRITE flow over a plain mapping of the BAR file (debugging the softnic side without a VM) |
//!
//! Every check prints `ok - …` or `not ok - …`; each phase ends with
//! `# PHASE: N passed, M failed` and exits non-zero on a failure.

mod layout;
#[path = "../../module/uapi.rs"]
#[allow(dead_code)] // the module-side limits are not needed here
mod uapi;

use marrow_driver::{CqMode, CqPoller, SendQueue};
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::raw::{MLX5_BF_OFFSET, WqeOpcode};
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_mmio::Region;
use std::ffi::CString;
use std::ptr::NonNull;
use std::time::{Duration, Instant};
use uapi::{MarrowAlloc, MarrowWindow};

const DEV: &str = "/dev/marrow";
const PAGE: usize = 4096;
/// The per-user limit the test loads the module with (`max_user_bytes=`).
const LIMIT: usize = 64 * 1024;
/// Window indices: 0 from the module parameters, 1 and 2 added by `root`.
const W_QUEUES: u32 = 0;
const W_UAR: u32 = 1;
const W_INFO: u32 = 2;

#[derive(Default)]
struct Tap {
    passed: u32,
    failed: u32,
}

impl Tap {
    fn check(&mut self, ok: bool, what: impl AsRef<str>) -> bool {
        if ok {
            self.passed += 1;
            println!("ok - {}", what.as_ref());
        } else {
            self.failed += 1;
            println!("not ok - {}", what.as_ref());
        }
        ok
    }

    /// `r` must be the error `want`.
    fn refused<T>(&mut self, r: Result<T, i32>, want: i32, what: &str) -> bool {
        match r {
            Err(e) if e == want => self.check(true, format!("{what}: refused with {}", errno_name(want))),
            Err(e) => self.check(false, format!("{what}: got {} ({e}), want {}", errno_name(e), errno_name(want))),
            Ok(_) => self.check(false, format!("{what}: succeeded, want {}", errno_name(want))),
        }
    }

    /// `r` must succeed.
    fn accepted<T>(&mut self, r: Result<T, i32>, what: &str) -> Option<T> {
        match r {
            Ok(v) => {
                self.check(true, what);
                Some(v)
            }
            Err(e) => {
                self.check(false, format!("{what}: failed with {} ({e})", errno_name(e)));
                None
            }
        }
    }
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOTTY => "ENOTTY",
        libc::EDQUOT => "EDQUOT",
        libc::ENXIO => "ENXIO",
        _ => "errno",
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// An open `/dev/marrow` (or any file), closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn open(path: &str, flags: i32) -> Result<Fd, i32> {
    let c = CString::new(path).expect("no NUL in paths");
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 { Err(errno()) } else { Ok(Fd(fd)) }
}

fn ioctl_ptr(fd: &Fd, cmd: u32, arg: *mut u8) -> Result<(), i32> {
    // SAFETY: `arg` points at a buffer of the size encoded in `cmd` (or is
    // deliberately bad, which the kernel must refuse with EFAULT).
    let r = unsafe { libc::ioctl(fd.0, cmd as libc::c_ulong, arg) };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

fn add_window(fd: &Fd, w: &MarrowWindow) -> Result<MarrowWindow, i32> {
    let mut b = w.to_bytes();
    ioctl_ptr(fd, uapi::MARROW_IOC_ADD_WINDOW, b.as_mut_ptr())?;
    Ok(MarrowWindow::from_bytes(&b))
}

fn window_info(fd: &Fd, index: u32) -> Result<MarrowWindow, i32> {
    let mut b = MarrowWindow { index, ..Default::default() }.to_bytes();
    ioctl_ptr(fd, uapi::MARROW_IOC_WINDOW_INFO, b.as_mut_ptr())?;
    Ok(MarrowWindow::from_bytes(&b))
}

fn select(fd: &Fd, index: u32) -> Result<(), i32> {
    let mut b = index.to_le_bytes();
    ioctl_ptr(fd, uapi::MARROW_IOC_SELECT_WINDOW, b.as_mut_ptr())
}

fn alloc(fd: &Fd, a: MarrowAlloc) -> Result<MarrowAlloc, i32> {
    let mut b = a.to_bytes();
    ioctl_ptr(fd, uapi::MARROW_IOC_ALLOC, b.as_mut_ptr())?;
    Ok(MarrowAlloc::from_bytes(&b))
}

fn alloc_bytes(fd: &Fd, bytes: usize) -> Result<MarrowAlloc, i32> {
    alloc(fd, MarrowAlloc { bytes: bytes as u64, window: W_QUEUES, ..Default::default() })
}

/// A mapping, unmapped on drop.
struct Map {
    ptr: NonNull<u8>,
    len: usize,
}

impl Map {
    fn region(&self) -> Region {
        // SAFETY: the mapping is `len` bytes, readable (and, where the test
        // writes through it, writable), and lives as long as `self`; the
        // regions made here are dropped before it.
        unsafe { Region::new(self.ptr, self.len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn mmap(fd: &Fd, offset: u64, len: usize, prot: i32, flags: i32) -> Result<Map, i32> {
    // SAFETY: a fresh mapping chosen by the kernel; the result is checked.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd.0, offset as libc::off_t) };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(Map { ptr: NonNull::new(p.cast()).expect("mmap never returns NULL on success"), len })
}

fn map_rw(fd: &Fd, offset: u64, len: usize) -> Result<Map, i32> {
    mmap(fd, offset, len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED)
}

fn mprotect(m: &Map, prot: i32) -> Result<(), i32> {
    // SAFETY: the range is our mapping.
    let r = unsafe { libc::mprotect(m.ptr.as_ptr().cast(), m.len, prot) };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

/// mremap `m` to `new_len`; on success the mapping is undone (the test only
/// asks whether growth is refused).
fn mremap_grow(m: &Map, new_len: usize, flags: i32) -> Result<(), i32> {
    // SAFETY: the range is our mapping; a successful move is unmapped at once.
    let p = unsafe { libc::mremap(m.ptr.as_ptr().cast(), m.len, new_len, flags) };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    // SAFETY: the kernel just gave us this range.
    unsafe { libc::munmap(p, new_len) };
    Ok(())
}

fn queues_spec() -> MarrowWindow {
    MarrowWindow {
        domain: 0,
        bus: layout::IVSHMEM_BUS,
        devfn: layout::IVSHMEM_DEVFN,
        bar: layout::IVSHMEM_BAR,
        flags: uapi::MARROW_WIN_WRITE,
        index: W_QUEUES,
        pgoff: layout::QUEUES_PAGE,
        npages: layout::QUEUES_PAGES,
    }
}

fn uar_spec() -> MarrowWindow {
    MarrowWindow {
        flags: uapi::MARROW_WIN_WRITE | uapi::MARROW_WIN_WC,
        index: W_UAR,
        pgoff: layout::UAR_PAGE,
        npages: 1,
        ..queues_spec()
    }
}

fn info_spec() -> MarrowWindow {
    MarrowWindow { flags: 0, index: W_INFO, pgoff: layout::INFO_PAGE, npages: 1, ..queues_spec() }
}

fn phase_root(t: &mut Tap) {
    // SAFETY: plain getters.
    t.check(unsafe { libc::geteuid() } == 0, "root phase runs as root");
    let Some(fd) = t.accepted(open(DEV, libc::O_RDWR), "root opens /dev/marrow") else { return };
    let w0 = window_info(&fd, W_QUEUES);
    t.check(w0 == Ok(queues_spec()), format!("window 0 (module parameters) is the queue window: {w0:?}"));
    let uar = add_window(&fd, &uar_spec());
    t.check(uar.map(|w| w.index) == Ok(W_UAR), format!("ADD_WINDOW: UAR page, rw, write-combined -> index {uar:?}"));
    let info = add_window(&fd, &info_spec());
    t.check(
        info.map(|w| w.index) == Ok(W_INFO),
        format!("ADD_WINDOW: info page, read-only, uncached -> index {info:?}"),
    );
    // Root's mistakes are refused too.
    t.refused(
        // The lowest bit above the known ones.
        add_window(&fd, &MarrowWindow { flags: uapi::MARROW_WIN_FLAGS + 1, ..uar_spec() }),
        libc::EINVAL,
        "ADD_WINDOW with an unknown flag bit",
    );
    t.refused(
        add_window(&fd, &MarrowWindow { pgoff: 255, npages: 2, ..uar_spec() }),
        libc::EINVAL,
        "ADD_WINDOW past the end of the 1 MiB BAR",
    );
    t.refused(add_window(&fd, &MarrowWindow { npages: 0, ..uar_spec() }), libc::EINVAL, "ADD_WINDOW of 0 pages");
    t.refused(
        add_window(&fd, &MarrowWindow { bar: 0, pgoff: 0, npages: 1, ..uar_spec() }),
        libc::EINVAL,
        "ADD_WINDOW on BAR0 (256-byte register BAR, less than a page)",
    );
    t.refused(
        add_window(&fd, &MarrowWindow { bar: 1, pgoff: 0, npages: 1, ..uar_spec() }),
        libc::EINVAL,
        "ADD_WINDOW on BAR1 (not implemented by ivshmem-plain)",
    );
    t.refused(add_window(&fd, &MarrowWindow { bar: 6, ..uar_spec() }), libc::EINVAL, "ADD_WINDOW on BAR6");
    t.refused(
        add_window(&fd, &MarrowWindow { devfn: 31 << 3, ..uar_spec() }),
        libc::ENODEV,
        "ADD_WINDOW on a PCI address with no device (00:1f.0)",
    );
    pat_check(t, &fd);
}

/// The caching modes reach the page tables: with the UAR window and a page
/// of the queue window mapped, PAT's memtype list (arch/x86/mm/pat/memtype.c,
/// debugfs, root only) shows the doorbell page write-combining and the queue
/// page uncached-minus.
fn pat_check(t: &mut Tap, fd: &Fd) {
    let resource = std::fs::read_to_string("/sys/bus/pci/devices/0000:00:04.0/resource").unwrap_or_default();
    let bar2 = resource
        .lines()
        .nth(layout::IVSHMEM_BAR as usize)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok());
    let Some(bar2) = bar2 else {
        t.check(false, format!("read BAR2's address from sysfs: {resource:?}"));
        return;
    };
    let uar = select(fd, W_UAR).and_then(|_| map_rw(fd, 0, PAGE));
    let queue = select(fd, W_QUEUES).and_then(|_| map_rw(fd, 0, PAGE));
    if !t.check(uar.is_ok() && queue.is_ok(), "root maps the UAR window and a page of the queue window") {
        return;
    }
    let list = std::fs::read_to_string("/sys/kernel/debug/x86/pat_memtype_list").unwrap_or_default();
    let entry = |page: u64| {
        let start = bar2 + page * PAGE as u64;
        let range = format!("[mem 0x{start:016x}-0x{:016x}]", start + PAGE as u64);
        list.lines().find(|l| l.contains(&range)).unwrap_or("(no entry)").to_string()
    };
    let (u, q) = (entry(layout::UAR_PAGE), entry(layout::QUEUES_PAGE));
    t.check(u.ends_with("write-combining"), format!("doorbell (UAR) page mapped write-combining: {u}"));
    t.check(q.ends_with("uncached-minus"), format!("queue page mapped uncached-minus: {q}"));
}

fn phase_outsider(t: &mut Tap) {
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    t.check(uid != 0, format!("outsider phase runs unprivileged (uid {uid}, gid {gid})"));
    t.refused(open(DEV, libc::O_RDWR), libc::EACCES, "open /dev/marrow by a user not in its group");
    t.refused(open(DEV, libc::O_RDONLY), libc::EACCES, "open /dev/marrow read-only by a user not in its group");
}

fn phase_user(t: &mut Tap) {
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    t.check(uid != 0, format!("user phase runs unprivileged (uid {uid})"));
    let Some(fd) = t.accepted(open(DEV, libc::O_RDWR), "open /dev/marrow as a member of its group") else { return };

    // Windows are visible to users.
    for (i, spec) in [(W_QUEUES, queues_spec()), (W_UAR, uar_spec()), (W_INFO, info_spec())] {
        let w = window_info(&fd, i);
        t.check(w == Ok(spec), format!("WINDOW_INFO {i}: {w:?}"));
    }

    // ---- misuse of the control path
    t.refused(add_window(&fd, &uar_spec()), libc::EPERM, "M1 ADD_WINDOW without CAP_SYS_ADMIN");
    t.refused(map_rw(&fd, 0, PAGE), libc::EINVAL, "M2 mmap before selecting a window");
    t.refused(select(&fd, 7), libc::ENOENT, "M3 SELECT_WINDOW of an empty slot (7)");
    t.refused(select(&fd, 1000), libc::ENOENT, "M4 SELECT_WINDOW out of range (1000)");
    t.refused(ioctl_ptr(&fd, uapi::marrow_io(99), std::ptr::null_mut()), libc::ENOTTY, "M5 unknown ioctl _IO('M', 99)");
    t.refused(
        ioctl_ptr(&fd, libc::TCGETS as u32, std::ptr::null_mut()),
        libc::ENOTTY,
        "M6 a tty ioctl (TCGETS) on /dev/marrow",
    );
    t.refused(
        ioctl_ptr(&fd, uapi::MARROW_IOC_SELECT_WINDOW, 16 as *mut u8),
        libc::EFAULT,
        "M7 SELECT_WINDOW with a bad pointer",
    );

    // ---- the queue window: bounds, protections, mremap
    t.accepted(select(&fd, W_QUEUES), "SELECT_WINDOW 0 (queues)");
    let qbytes = layout::QUEUES_PAGES as usize * PAGE;
    t.refused(map_rw(&fd, qbytes as u64, PAGE), libc::EINVAL, "M8 mmap at an offset beyond the window");
    t.refused(map_rw(&fd, 0, qbytes + PAGE), libc::EINVAL, "M9 mmap longer than the window");
    t.refused(map_rw(&fd, 10 * PAGE as u64, 5 * PAGE), libc::EINVAL, "M10 mmap running past the window's end");
    t.refused(
        mmap(&fd, 0, PAGE, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC, libc::MAP_SHARED),
        libc::EPERM,
        "M11 mmap with PROT_EXEC",
    );
    t.refused(
        mmap(&fd, 0, PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE),
        libc::EINVAL,
        "M12 MAP_PRIVATE mapping",
    );
    if let Some(one) = t.accepted(map_rw(&fd, 0, PAGE), "mmap one page of the queue window") {
        t.refused(
            mprotect(&one, libc::PROT_READ | libc::PROT_EXEC),
            libc::EACCES,
            "M13 mprotect(PROT_EXEC) of a window mapping",
        );
        // mm/mremap.c refuses to grow a VM_DONTEXPAND or VM_PFNMAP vma with EFAULT.
        t.refused(mremap_grow(&one, 2 * PAGE, 0), libc::EFAULT, "M14 mremap growing a window mapping in place");
        t.refused(
            mremap_grow(&one, 2 * PAGE, libc::MREMAP_MAYMOVE),
            libc::EFAULT,
            "M15 mremap growing a window mapping (MREMAP_MAYMOVE)",
        );
    }

    // ---- the read-only window
    t.accepted(select(&fd, W_INFO), "SELECT_WINDOW 2 (info, read-only)");
    t.refused(map_rw(&fd, 0, PAGE), libc::EACCES, "M16 writable mmap of a read-only window");
    if let Some(ro) =
        t.accepted(mmap(&fd, 0, PAGE, libc::PROT_READ, libc::MAP_SHARED), "read-only mmap of the info window")
    {
        t.refused(
            mprotect(&ro, libc::PROT_READ | libc::PROT_WRITE),
            libc::EACCES,
            "M17 mprotect(PROT_WRITE) of a read-only window mapping",
        );
    }
    // A read-only open file cannot get a writable shared mapping at all (mm/mmap.c).
    if let Ok(rofd) = open(DEV, libc::O_RDONLY) {
        t.accepted(select(&rofd, W_QUEUES), "SELECT_WINDOW 0 on a read-only open file");
        t.refused(map_rw(&rofd, 0, PAGE), libc::EACCES, "M18 writable mmap through a file opened O_RDONLY");
    }

    // ---- queue memory
    let first = t.accepted(alloc_bytes(&fd, PAGE), "ALLOC one page of DMA-coherent queue memory");
    if let Some(a) = first {
        t.check(
            a.bus_addr != 0 && a.bus_addr % PAGE as u64 == 0,
            format!("ALLOC returns a page-aligned bus address {:#x}", a.bus_addr),
        );
        t.check(
            a.mmap_offset == uapi::MARROW_MMAP_ALLOC_BASE,
            format!("ALLOC returns mmap offset {:#x}", a.mmap_offset),
        );
        if let Some(m) = t.accepted(map_rw(&fd, a.mmap_offset, PAGE), "mmap the queue memory") {
            let r = m.region();
            let zero = (0..PAGE).all(|i| r.read_u8(i) == Ok(0));
            t.check(zero, "queue memory starts zeroed");
            r.write_bytes(100, b"queue memory").ok();
            let mut back = [0u8; 12];
            r.read_bytes(100, &mut back).ok();
            t.check(&back == b"queue memory", "queue memory reads back what was written");
            t.refused(
                mremap_grow(&m, 2 * PAGE, libc::MREMAP_MAYMOVE),
                libc::EFAULT,
                "M19 mremap growing a queue-memory mapping",
            );
        }
        t.refused(map_rw(&fd, a.mmap_offset, 2 * PAGE), libc::EINVAL, "M20 mmap longer than the allocation");
        t.refused(
            map_rw(&fd, a.mmap_offset + uapi::MARROW_MMAP_ALLOC_STRIDE * 5, PAGE),
            libc::EINVAL,
            "M21 mmap of an allocation that does not exist",
        );
    }
    t.refused(alloc_bytes(&fd, 100), libc::EINVAL, "M22 ALLOC of a size that is not a multiple of 4096");
    t.refused(alloc_bytes(&fd, 0), libc::EINVAL, "M23 ALLOC of 0 bytes");
    t.refused(
        alloc(&fd, MarrowAlloc { bytes: PAGE as u64, window: 9, ..Default::default() }),
        libc::ENOENT,
        "M24 ALLOC for a window that does not exist",
    );
    t.refused(
        alloc(&fd, MarrowAlloc { bytes: PAGE as u64, window: 0, reserved: 1, ..Default::default() }),
        libc::EINVAL,
        "M25 ALLOC with the reserved field set",
    );
    // Up to the per-user limit (max_user_bytes=65536): 15 more pages fit.
    let rest = t.accepted(alloc_bytes(&fd, LIMIT - PAGE), "ALLOC up to the per-user limit (64 KiB in all)");
    t.refused(alloc_bytes(&fd, PAGE), libc::EDQUOT, "M26 ALLOC beyond the per-user limit");
    if let Ok(fd2) = open(DEV, libc::O_RDWR) {
        t.refused(
            alloc_bytes(&fd2, PAGE),
            libc::EDQUOT,
            "M27 ALLOC beyond the limit from a second open file of the same user",
        );
    }
    let _ = (rest, first);
    drop(fd);
    // Release freed everything: the whole limit is available again.
    if let Some(fd3) = t.accepted(open(DEV, libc::O_RDWR), "reopen /dev/marrow") {
        t.accepted(
            alloc_bytes(&fd3, LIMIT),
            "after close, ALLOC of the whole limit succeeds (release freed the memory)",
        );
    }

    // ---- the NIC outside the VM
    rdma_through_marrow(t);
}

/// Map the info, UAR and queue windows through /dev/marrow and run the
/// RDMA_WRITE against the host softnic.
fn rdma_through_marrow(t: &mut Tap) {
    let Ok(fd) = open(DEV, libc::O_RDWR) else {
        t.check(false, "open /dev/marrow for the RDMA test");
        return;
    };
    let map = |w: u32, len: usize, prot: i32, what: &str| {
        select(&fd, w)
            .and_then(|_| mmap(&fd, 0, len, prot, libc::MAP_SHARED))
            .inspect_err(|e| println!("# {what}: {}", errno_name(*e)))
    };
    let info = map(W_INFO, PAGE, libc::PROT_READ, "info");
    let uar = map(W_UAR, PAGE, libc::PROT_READ | libc::PROT_WRITE, "uar");
    let queues = map(W_QUEUES, layout::QUEUES_PAGES as usize * PAGE, libc::PROT_READ | libc::PROT_WRITE, "queues");
    let (Ok(info), Ok(uar), Ok(queues)) = (info, uar, queues) else {
        t.check(false, "map the info, UAR (write-combined) and queue windows");
        return;
    };
    t.check(true, "map the info (read-only), UAR (write-combined) and queue windows");
    let ok = rdma_write(t, &info.region(), &uar.region(), &queues.region());
    let status = queues.region();
    status
        .write_bytes(layout::STATUS_OFF, &(if ok { layout::DONE_MAGIC } else { layout::FAIL_MAGIC }).to_le_bytes())
        .ok();
}

/// Post one RDMA_WRITE (src → dst, both in the BAR) on the QP the host
/// softnic created in `queues`, ring its doorbell in `uar`, poll the CQE.
/// True when the CQE is a good RDMA_WRITE completion and dst equals src.
fn rdma_write(t: &mut Tap, info: &Region, uar: &Region, queues: &Region) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    let magic = || info.read_array::<8>(layout::INFO_MAGIC).map(u64::from_le_bytes);
    while magic() != Ok(layout::MAGIC) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !t.check(magic() == Ok(layout::MAGIC), "the host softnic's info page is visible through the read-only window") {
        return false;
    }
    let u32_at = |o| info.read_array::<4>(o).map(u32::from_le_bytes).unwrap_or(0);
    let (qpn, lkey, rkey) = (u32_at(layout::INFO_QPN), u32_at(layout::INFO_LKEY), u32_at(layout::INFO_RKEY));
    println!("# softnic QP {qpn:#x}, lkey {lkey:#x}, rkey {rkey:#x}");

    let sub = |off: usize, len: usize| queues.sub(off, len).expect("layout inside the queue window");
    let (src, dst) = (sub(layout::SRC_OFF, layout::BUF_BYTES), sub(layout::DST_OFF, layout::BUF_BYTES));
    let pattern: Vec<u8> = (0..layout::BUF_BYTES).map(|i| (i * 7 + 3) as u8).collect();
    src.write_bytes(0, &pattern).ok();
    dst.fill(0, layout::BUF_BYTES, 0).ok();

    let mut sq = SendQueue::new(
        sub(layout::SQ_OFF, layout::SQ_WQEBBS as usize * 64),
        layout::SQ_WQEBBS,
        sub(layout::QP_DBREC_OFF, 8),
        *uar,
        qpn,
    );
    let mut cq = CqPoller::new(
        sub(layout::CQ_OFF, layout::CQ_NCQE as usize * 64),
        layout::CQ_NCQE,
        sub(layout::CQ_DBREC_OFF, 8),
        CqMode::Normal,
    );
    let sgl = [Sge { addr: layout::bar_offset(layout::SRC_OFF), length: layout::BUF_BYTES as u32, lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: layout::bar_offset(layout::DST_OFF), rkey }, sgl: &sgl };
    let posted = sq.post(CtrlParams::signaled(0, qpn), &op);
    if !t.check(
        posted.is_ok(),
        format!("post an RDMA_WRITE of {} bytes (marrow-driver, marrow-mlx5): {posted:?}", layout::BUF_BYTES),
    ) {
        return false;
    }
    let rung = sq.ring();
    t.check(rung.is_ok(), format!("ring the doorbell through the write-combined UAR mapping: {rung:?}"));
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(60);
    let cqe = loop {
        match cq.poll() {
            Ok(Some(c)) => break Some(c),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(100)),
            Ok(None) => break None,
            Err(e) => {
                println!("# CQ poll error: {e}");
                break None;
            }
        }
    };
    let Some(c) = cqe else {
        let mut raw = [0u8; 64];
        queues.read_bytes(layout::CQ_OFF, &mut raw).ok();
        t.check(false, format!("a CQE arrives within 60 s; CQE slot 0: {raw:02x?}"));
        return false;
    };
    let good = matches!(c, Completion::Requester { wqe_opcode: WqeOpcode::RDMA_WRITE, qpn: q, wqe_counter: 0, .. } if q == qpn);
    t.check(good, format!("the softnic outside the VM wrote the CQE after {:?}: {c:?}", t0.elapsed()));
    let mut got = vec![0u8; layout::BUF_BYTES];
    dst.read_bytes(0, &mut got).ok();
    let same = got == pattern;
    t.check(same, format!("destination holds the {} source bytes", layout::BUF_BYTES));
    good && same
}

/// Map the queue and UAR windows, say so in `/tmp/marrow-held`, wait for
/// `/tmp/marrow-go` (created by /init once it has unbound the device), then
/// touch the mappings again. The module zaps them on unbind, so this process
/// should die of SIGBUS there; /init checks its exit status.
fn phase_hold(t: &mut Tap) {
    let Some(fd) = t.accepted(open(DEV, libc::O_RDWR), "holder: open /dev/marrow") else { return };
    let queue = select(&fd, W_QUEUES).and_then(|_| map_rw(&fd, 0, PAGE));
    let uar = select(&fd, W_UAR).and_then(|_| map_rw(&fd, 0, PAGE));
    let (Ok(queue), Ok(uar)) = (queue, uar) else {
        t.check(false, "holder: map a queue page and the doorbell page");
        return;
    };
    let (q, u) = (queue.region(), uar.region());
    let before = q.read_u8(0).is_ok() && u.read_8bytes(MLX5_BF_OFFSET as usize).is_ok();
    t.check(before, "holder: a queue page and the doorbell page are mapped and readable before the unbind");
    if std::fs::write("/tmp/marrow-held", b"held\n").is_err() {
        t.check(false, "holder: write /tmp/marrow-held");
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::path::Path::new("/tmp/marrow-go").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The device is unbound now: these reads should never return.
    let after = q.read_u8(0);
    let after_db = u.read_8bytes(MLX5_BF_OFFSET as usize);
    t.check(false, format!("holder: mappings made before the unbind still work after it ({after:?}, {after_db:?})"));
}

/// After the device was unbound from its driver (`how` = "unbound") or
/// removed (`how` = "removed"), its windows are dead.
fn phase_gone(t: &mut Tap, how: &str, first: u32) {
    let Some(fd) = t.accepted(open(DEV, libc::O_RDWR), &format!("open /dev/marrow after the ivshmem device was {how}"))
    else {
        return;
    };
    let n = |k: u32| format!("M{}", first + k);
    t.refused(
        window_info(&fd, W_QUEUES),
        libc::ENODEV,
        &format!("{} WINDOW_INFO of a window whose device was {how}", n(0)),
    );
    t.accepted(select(&fd, W_QUEUES), "SELECT_WINDOW still names the window");
    t.refused(map_rw(&fd, 0, PAGE), libc::ENODEV, &format!("{} mmap of a window whose device was {how}", n(1)));
    t.accepted(select(&fd, W_UAR), "SELECT_WINDOW of the UAR window");
    t.refused(
        map_rw(&fd, 0, PAGE),
        libc::ENODEV,
        &format!("{} mmap of the doorbell page of a device that was {how}", n(2)),
    );
    t.refused(alloc_bytes(&fd, PAGE), libc::ENODEV, &format!("{} ALLOC for a window whose device was {how}", n(3)));
}

/// No sign of trouble in the kernel log (and, when given, kmemleak's report).
fn phase_dmesg(t: &mut Tap, log: &str, kmemleak: Option<&str>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    t.check(!text.is_empty(), format!("read the kernel log ({} lines)", text.lines().count()));
    // "leak" alone would match kmemleak's own start-up lines; these are the
    // leak reports: kmemleak's (mm/kmemleak.c) and the module's own at unload.
    const BAD: [&str; 13] = [
        "BUG",
        "WARNING",
        "Oops",
        "suspected memory leak",
        "marrow: leak",
        "refcount_t",
        "general protection",
        "Call Trace",
        "possible circular",
        "possible recursive",
        "lockdep",
        "sleeping function called",
        "UBSAN",
    ];
    let bad: Vec<&str> = text.lines().filter(|l| BAD.iter().any(|b| l.contains(b))).collect();
    for l in &bad {
        println!("# {l}");
    }
    t.check(
        bad.is_empty(),
        format!("no BUG, WARNING, Oops, leak, refcount or lockdep report in dmesg ({} found)", bad.len()),
    );
    t.check(
        text.contains("marrow: unloaded, no queue memory outstanding"),
        "the module unloaded with no queue memory outstanding",
    );
    if let Some(k) = kmemleak {
        let report = std::fs::read_to_string(k).unwrap_or_default();
        let n = report.matches("unreferenced object").count();
        for l in report.lines().take(40) {
            println!("# kmemleak: {l}");
        }
        t.check(n == 0, format!("kmemleak reports no unreferenced objects ({n})"));
    }
}

/// The RDMA flow over a plain mapping of the BAR file (no VM, no module).
fn phase_direct(t: &mut Tap, file: &str) {
    let Ok(fd) = open(file, libc::O_RDWR) else {
        t.check(false, format!("open {file}"));
        return;
    };
    let Ok(m) = map_rw(&fd, 0, layout::BAR_BYTES) else {
        t.check(false, "map the BAR file");
        return;
    };
    let bar = m.region();
    let info = bar.sub(layout::INFO_PAGE as usize * PAGE, PAGE).unwrap();
    let uar = bar.sub(layout::UAR_PAGE as usize * PAGE, PAGE).unwrap();
    let queues = bar.sub(layout::QUEUES_PAGE as usize * PAGE, layout::QUEUES_PAGES as usize * PAGE).unwrap();
    let ok = rdma_write(t, &info, &uar, &queues);
    queues
        .write_bytes(layout::STATUS_OFF, &(if ok { layout::DONE_MAGIC } else { layout::FAIL_MAGIC }).to_le_bytes())
        .ok();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let phase = args.get(1).map(String::as_str).unwrap_or("");
    let mut t = Tap::default();
    match phase {
        "root" => phase_root(&mut t),
        "outsider" => phase_outsider(&mut t),
        "user" => phase_user(&mut t),
        "hold" => phase_hold(&mut t),
        "unbound" => phase_gone(&mut t, "unbound", 28),
        "removed" => phase_gone(&mut t, "removed", 32),
        "dmesg" if args.len() >= 3 => phase_dmesg(&mut t, &args[2], args.get(3).map(String::as_str)),
        "direct" if args.len() >= 3 => phase_direct(&mut t, &args[2]),
        _ => {
            eprintln!(
                "usage: marrow-kmodtest root|outsider|user|hold|unbound|removed|dmesg LOG [KMEMLEAK]|direct FILE"
            );
            std::process::exit(2);
        }
    }
    println!("# {phase}: {} passed, {} failed", t.passed, t.failed);
    std::process::exit(if t.failed == 0 { 0 } else { 1 });
}
