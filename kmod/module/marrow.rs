// SPDX-License-Identifier: GPL-2.0
//! marrow: `/dev/marrow`, a misc device that lets a process without root map
//! a device's doorbell pages and share DMA-coherent queue memory with it,
//! without handing it VFIO or `/dev/mem`.
//!
//! * Root declares *windows* (a PCI device, a BAR, a page range, read-only or
//!   read-write, uncached or write-combined) with module parameters (one
//!   window at load time) or the `MARROW_IOC_ADD_WINDOW` ioctl (CAP_SYS_ADMIN).
//! * Who may open the device is its group's business (a udev rule).
//! * A user selects a window (`MARROW_IOC_SELECT_WINDOW`) and mmaps pages of
//!   it, or allocates DMA-coherent memory for a window's device
//!   (`MARROW_IOC_ALLOC`, per open file, freed on release, limited per user by
//!   `max_user_bytes`) and mmaps that.
//! * Everything else is refused; the errno of each refusal is listed in
//!   kmod/README.md and exercised by the guest test.
//! * When a window's device is bound to another driver, unbound or removed,
//!   a PCI bus notifier kills the window and zaps its existing mappings.
//!
//! The ABI (ioctl numbers, argument layouts, mmap offsets) is `uapi.rs`, which
//! the guest test program compiles too.
//!
//! Unsafe code is confined to what the 7.3 Rust abstractions lack: finding
//! and referencing a `struct pci_dev` that another driver may own
//! (`kernel::pci` only hands a device to *its* driver's probe), mapping BAR
//! pages (`remap_pfn_range`, `pgprot_writecombine`, no abstraction), DMA
//! memory for a device we are not bound to (`kernel::dma::Coherent` needs a
//! `Device<Bound>`), `capable()`, the vma's `vm_pgoff` (no accessor), and
//! the bus notifier with `unmap_mapping_range()` (no abstraction).

use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::ffi::{c_int, c_ulong};
use kernel::{
    bindings,
    error::to_result,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::{VmaNew, flags as vmflags},
    new_mutex,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Mutex,
    types::Opaque,
    uaccess::{UserPtr, UserSlice},
};

// Shared with user space, where its items must be `pub`.
#[allow(unreachable_pub, dead_code)]
mod uapi;
use uapi::{MarrowAlloc, MarrowWindow};

module! {
    type: MarrowModule,
    name: "marrow",
    authors: ["marrow"],
    description: "Unprivileged mmap of allowlisted PCI BAR pages (doorbells) and DMA-coherent queue memory",
    license: "GPL",
    params: {
        win_pci: u32 {
            default: 0xffff_ffff,
            description: "Load-time window: PCI address as domain<<16 | bus<<8 | devfn (0xffffffff: none)",
        },
        win_bar: u32 {
            default: 0,
            description: "Load-time window: BAR number (0-5)",
        },
        win_pgoff: u64 {
            default: 0,
            description: "Load-time window: first page (4 KiB) within the BAR",
        },
        win_pages: u64 {
            default: 1,
            description: "Load-time window: number of pages",
        },
        win_flags: u32 {
            default: 0,
            description: "Load-time window: 1 = writable, 2 = write-combined (MARROW_WIN_*)",
        },
        max_user_bytes: u64 {
            default: 1048576,
            description: "Queue memory one user may hold at once, over all open files (EDQUOT beyond)",
        },
    },
}

// The ioctl numbers of uapi.rs are the ones the kernel's own _IOWR/_IOW
// (rust/kernel/ioctl.rs, include/uapi/asm-generic/ioctl.h) give.
const _: () = assert!(uapi::MARROW_IOC_ADD_WINDOW == kernel::ioctl::_IOWR::<MarrowWindow>(uapi::MARROW_IOC_TYPE, 1));
const _: () = assert!(uapi::MARROW_IOC_SELECT_WINDOW == kernel::ioctl::_IOW::<u32>(uapi::MARROW_IOC_TYPE, 2));
const _: () = assert!(uapi::MARROW_IOC_WINDOW_INFO == kernel::ioctl::_IOWR::<MarrowWindow>(uapi::MARROW_IOC_TYPE, 3));
const _: () = assert!(uapi::MARROW_IOC_ALLOC == kernel::ioctl::_IOWR::<MarrowAlloc>(uapi::MARROW_IOC_TYPE, 4));
const _: () = assert!(uapi::marrow_io(99) == kernel::ioctl::_IO(uapi::MARROW_IOC_TYPE, 99));
// Window pages are 4 KiB in the ABI; so are x86_64's.
const _: () = assert!(PAGE_SIZE == 4096);

/// A devfn's device and function, split as Linux's `PCI_SLOT` and
/// `PCI_FUNC` split it (`include/uapi/linux/pci.h`); bindgen carries no
/// function-like macro.
const DEVFN_SLOT_SHIFT: u32 = 3;
const DEVFN_FUNC_MASK: u8 = 0x7;
/// The `win_pci` parameter: domain << 16 | bus << 8 | devfn; all ones for none.
const WIN_PCI_DOMAIN_SHIFT: u32 = 16;
const WIN_PCI_BUS_SHIFT: u32 = 8;
const WIN_PCI_NONE: u32 = u32::MAX;

/// Queue memory currently allocated, over all files: must be 0 at unload.
static OUTSTANDING_BYTES: AtomicU64 = AtomicU64::new(0);

/// A counted reference on a `struct pci_dev` (`pci_dev_get`/`pci_dev_put`).
///
/// It keeps the struct (and its `struct device`) alive after the device is
/// unbound or removed; whether it is still there is [`PciDev::present`].
struct PciDev(NonNull<bindings::pci_dev>);

// SAFETY: a counted `pci_dev` may be used and released from any thread; the
// fields read through it are read with the care noted at each read.
unsafe impl Send for PciDev {}
// SAFETY: as above; `&PciDev` only reads.
unsafe impl Sync for PciDev {}

impl PciDev {
    /// Look up `domain:bus:devfn` and take a reference.
    fn lookup(domain: u16, bus: u8, devfn: u8) -> Result<PciDev> {
        // SAFETY: no preconditions; returns a counted reference or NULL
        // (drivers/pci/search.c).
        let p = unsafe { bindings::pci_get_domain_bus_and_slot(domain.into(), bus.into(), devfn.into()) };
        NonNull::new(p).map(PciDev).ok_or(ENODEV)
    }

    fn as_ptr(&self) -> *mut bindings::pci_dev {
        self.0.as_ptr()
    }

    /// The embedded `struct device`, for the DMA API.
    fn device(&self) -> *mut bindings::device {
        // SAFETY: `self.0` is a valid pci_dev while we hold our reference;
        // this only computes a field address.
        unsafe { &raw mut (*self.as_ptr()).dev }
    }

    /// BAR `bar`: (start, length, flags), from `pdev->resource[bar]`.
    fn bar(&self, bar: usize) -> (u64, u64, usize) {
        // SAFETY: valid pci_dev (our reference); `bar` < 6 checked by the
        // caller; resource ranges of a present device change only under the
        // PCI rescan lock during reassignment, which a window declaration
        // racing with a rescan may observe either side of (root's problem).
        let r = unsafe { &(*self.as_ptr()).resource[bar] };
        let len = if r.end >= r.start && r.start != 0 { r.end - r.start + 1 } else { 0 };
        (r.start, len, r.flags as usize)
    }

    /// The bound driver (`dev->driver`), as an address; 0 when unbound.
    fn driver(&self) -> usize {
        // SAFETY: valid pci_dev. `dev->driver` is written under the device
        // lock by bind/unbind (drivers/base/dd.c); a racy read is enough for
        // a policy check made at mmap time, and read_volatile keeps the
        // compiler from caching or tearing it.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_ptr()).dev.driver) as usize }
    }

    /// Still registered: `device_is_registered()` (include/linux/device.h),
    /// cleared by `device_del()` when the device is removed (sysfs `remove`,
    /// hot unplug).
    fn present(&self) -> bool {
        // SAFETY: valid pci_dev; the bitfield is read through the raw-pointer
        // accessor bindgen generates, so no reference to the
        // concurrently-written kobject is made.
        unsafe { bindings::kobject::state_in_sysfs_raw(&raw const (*self.as_ptr()).dev.kobj) != 0 }
    }
}

impl Clone for PciDev {
    fn clone(&self) -> Self {
        // SAFETY: valid pci_dev; takes one more reference.
        unsafe { bindings::pci_dev_get(self.as_ptr()) };
        PciDev(self.0)
    }
}

impl Drop for PciDev {
    fn drop(&mut self) {
        // SAFETY: we own exactly one reference.
        unsafe { bindings::pci_dev_put(self.as_ptr()) };
    }
}

/// A declared window.
struct Window {
    dev: PciDev,
    /// Physical address of the window's first byte.
    phys: u64,
    /// `dev->driver` when the window was declared: a different value later
    /// means the device was unbound (or rebound), and the window is dead.
    driver: usize,
    /// As declared, `index` filled in.
    desc: MarrowWindow,
    /// Set by the PCI bus notifier when the device was bound to another
    /// driver, unbound or removed; permanent.
    dead: bool,
}

/// What mmap and ALLOC need of a window, taken out of the table so that no
/// lock is held across `remap_pfn_range` or the DMA API.
struct WindowRef {
    dev: PciDev,
    phys: u64,
    driver: usize,
    desc: MarrowWindow,
    dead: bool,
}

impl WindowRef {
    /// Usable: not revoked by the bus notifier, device still registered and
    /// still bound to the driver it had when the window was declared (the
    /// last two also cover events the notifier may race with).
    fn alive(&self) -> bool {
        !self.dead && self.dev.present() && self.dev.driver() == self.driver
    }
}

/// Window mappings are filed in the device file's address space at
/// `WIN_FILE_BASE + index * WIN_FILE_STRIDE + offset` (their `vm_pgoff` is
/// rewritten to that after mapping), so that the mappings of one window can
/// be found and zapped with `unmap_mapping_range()` when its device goes
/// away. User-visible mmap offsets are unaffected; allocations keep theirs,
/// which stay below 2^56.
const WIN_FILE_BASE: u64 = 1 << 60;
const WIN_FILE_STRIDE: u64 = 1 << 40;

struct Windows([Option<Window>; uapi::MARROW_MAX_WINDOWS]);

impl Windows {
    const fn new() -> Self {
        Windows([const { None }; uapi::MARROW_MAX_WINDOWS])
    }
}

/// Per-user queue-memory charge.
#[derive(Clone, Copy)]
struct Charge {
    uid: u32,
    bytes: u64,
}

/// Users holding queue memory at once, at most (EDQUOT for one more).
const MAX_CHARGED_USERS: usize = 64;

struct Quota([Charge; MAX_CHARGED_USERS]);

kernel::sync::global_lock! {
    // SAFETY: initialised in `MarrowModule::init` before the device is registered.
    unsafe(uninit) static WINDOWS: Mutex<Windows> = Windows::new();
}

kernel::sync::global_lock! {
    // SAFETY: initialised in `MarrowModule::init` before the device is registered.
    unsafe(uninit) static QUOTA: Mutex<Quota> = Quota([Charge { uid: 0, bytes: 0 }; MAX_CHARGED_USERS]);
}

/// The address spaces (`file->f_mapping`, one per device inode) of the open
/// files, with their open counts: where window mappings are to be zapped.
struct Spaces(KVec<(usize, u32)>);

kernel::sync::global_lock! {
    // SAFETY: initialised in `MarrowModule::init` before the device is registered.
    unsafe(uninit) static SPACES: Mutex<Spaces> = Spaces(KVec::new());
}

/// An open file's entry in [`SPACES`], removed when the file is released.
struct SpaceRef(usize);

impl SpaceRef {
    fn new(file: &File) -> Result<SpaceRef> {
        // SAFETY: `f_mapping` is set when the file is opened and stays valid
        // (it is the inode's) until the file is released, which drops us first.
        let m = unsafe { (*file.as_ptr()).f_mapping } as usize;
        let mut spaces = SPACES.lock();
        match spaces.0.iter_mut().find(|(a, _)| *a == m) {
            Some((_, n)) => *n += 1,
            None => spaces.0.push((m, 1), GFP_KERNEL)?,
        }
        Ok(SpaceRef(m))
    }
}

impl Drop for SpaceRef {
    fn drop(&mut self) {
        let mut spaces = SPACES.lock();
        if let Some(i) = spaces.0.iter().position(|(a, _)| *a == self.0) {
            spaces.0[i].1 -= 1;
            if spaces.0[i].1 == 0 {
                let _ = spaces.0.remove(i);
            }
        }
    }
}

/// `dev` is being bound to a driver, unbound or removed: its windows die,
/// and every existing mapping of them is zapped, so the next access by the
/// process that holds it gets SIGBUS (the vma has no fault handler).
fn revoke(dev: *mut bindings::device, why: &str) {
    let mut zap = [None::<(u64, u64)>; uapi::MARROW_MAX_WINDOWS];
    {
        let mut table = WINDOWS.lock();
        for (i, slot) in table.0.iter_mut().enumerate() {
            if let Some(w) = slot.as_mut().filter(|w| !w.dead && w.dev.device() == dev) {
                w.dead = true;
                zap[i] = Some((WIN_FILE_BASE + i as u64 * WIN_FILE_STRIDE, w.desc.npages * PAGE_SIZE as u64));
                pr_info!("window {}: device {}, window revoked\n", i, why);
            }
        }
    }
    let spaces = SPACES.lock();
    for (start, len) in zap.iter().flatten() {
        for (mapping, _) in spaces.0.iter() {
            // SAFETY: `mapping` belongs to a file that is open (its entry is
            // removed under this lock before release completes), so it is
            // valid. unmap_mapping_range (mm/memory.c) may sleep; bus
            // notifiers run in process context. even_cows = 1: there are
            // no private copies to keep (MAP_PRIVATE is refused).
            unsafe {
                bindings::unmap_mapping_range(*mapping as *mut bindings::address_space, *start as i64, *len as i64, 1)
            };
        }
    }
}

/// The PCI bus notifier (include/linux/device/bus.h events).
unsafe extern "C" fn pci_bus_event(_nb: *mut bindings::notifier_block, action: c_ulong, data: *mut c_void) -> c_int {
    let why = match action as u32 {
        bindings::bus_notifier_event_BUS_NOTIFY_BIND_DRIVER => "bound to a driver",
        bindings::bus_notifier_event_BUS_NOTIFY_UNBIND_DRIVER => "unbound from its driver",
        bindings::bus_notifier_event_BUS_NOTIFY_DEL_DEVICE => "removed",
        _ => return bindings::NOTIFY_DONE as c_int,
    };
    // `data` is the `struct device` of the event; only compared, never
    // dereferenced here.
    revoke(data.cast(), why);
    bindings::NOTIFY_DONE as c_int
}

/// Our registration on the PCI bus's notifier chain.
#[pin_data(PinnedDrop)]
struct BusNotifier {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
}

// SAFETY: after registration the notifier block is only touched by the
// notifier chain, under its own lock (kernel/notifier.c), and by
// `bus_unregister_notifier` in `drop`; no Rust code reads or writes it.
unsafe impl Send for BusNotifier {}
// SAFETY: as above; `&BusNotifier` gives no access to the block.
unsafe impl Sync for BusNotifier {}

impl BusNotifier {
    fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is ours to initialise; it is pinned and
                // unregistered in `drop` before it is freed. `pci_bus_type`
                // is the PCI core's static bus (drivers/pci/pci-driver.c).
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(pci_bus_event),
                        next: core::ptr::null_mut(),
                        priority: 0,
                    });
                    to_result(bindings::bus_register_notifier(&raw const bindings::pci_bus_type, slot))
                }
            }),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for BusNotifier {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered in `register` (this value exists only if that
        // succeeded); unregistering waits for running callbacks (it takes
        // the chain's rwsem).
        unsafe { bindings::bus_unregister_notifier(&raw const bindings::pci_bus_type, self.nb.get()) };
    }
}

/// Validate `w` and add it to the table; returns its index.
fn add_window(w: &MarrowWindow) -> Result<u32> {
    if w.flags & !uapi::MARROW_WIN_FLAGS != 0 || w.bar > 5 || w.npages == 0 {
        return Err(EINVAL);
    }
    let dev = PciDev::lookup(w.domain, w.bus, w.devfn)?;
    let (start, len, flags) = dev.bar(w.bar as usize);
    // A memory BAR (include/linux/ioport.h IORESOURCE_MEM); I/O port BARs
    // cannot be mapped.
    if flags & bindings::IORESOURCE_MEM as usize == 0 || len == 0 {
        return Err(EINVAL);
    }
    let end = w.pgoff.checked_add(w.npages).and_then(|p| p.checked_mul(PAGE_SIZE as u64)).ok_or(EINVAL)?;
    if end > len || start % PAGE_SIZE as u64 != 0 || w.npages * PAGE_SIZE as u64 > WIN_FILE_STRIDE {
        return Err(EINVAL);
    }
    let phys = start + w.pgoff * PAGE_SIZE as u64;
    let driver = dev.driver();
    let mut table = WINDOWS.lock();
    let (i, slot) = table.0.iter_mut().enumerate().find(|(_, s)| s.is_none()).ok_or(ENOSPC)?;
    let mut desc = *w;
    desc.index = i as u32;
    let access = if w.flags & uapi::MARROW_WIN_WRITE != 0 { "rw" } else { "ro" };
    let caching = if w.flags & uapi::MARROW_WIN_WC != 0 { "wc" } else { "uc" };
    pr_info!(
        "window {}: {:04x}:{:02x}:{:02x}.{} BAR{} pages {}+{} at {:#x}, {}, {}\n",
        i,
        w.domain,
        w.bus,
        w.devfn >> DEVFN_SLOT_SHIFT,
        w.devfn & DEVFN_FUNC_MASK,
        w.bar,
        w.pgoff,
        w.npages,
        phys,
        access,
        caching,
    );
    *slot = Some(Window { dev, phys, driver, desc, dead: false });
    Ok(i as u32)
}

/// A copy of window `index`'s parameters, with its own device reference.
fn window(index: u32) -> Result<WindowRef> {
    let table = WINDOWS.lock();
    let w = table.0.get(index as usize).and_then(|s| s.as_ref()).ok_or(ENOENT)?;
    Ok(WindowRef { dev: w.dev.clone(), phys: w.phys, driver: w.driver, desc: w.desc, dead: w.dead })
}

fn charge(uid: u32, bytes: u64) -> Result {
    let limit = module_parameters::max_user_bytes.value();
    let mut q = QUOTA.lock();
    let i = match q.0.iter().position(|c| c.bytes != 0 && c.uid == uid) {
        Some(i) => i,
        None => q.0.iter().position(|c| c.bytes == 0).ok_or(EDQUOT)?,
    };
    let used = if q.0[i].bytes != 0 { q.0[i].bytes } else { 0 };
    let total = used.checked_add(bytes).ok_or(EDQUOT)?;
    if total > limit {
        return Err(EDQUOT);
    }
    q.0[i] = Charge { uid, bytes: total };
    OUTSTANDING_BYTES.fetch_add(bytes, Ordering::Relaxed);
    Ok(())
}

fn uncharge(uid: u32, bytes: u64) {
    let mut q = QUOTA.lock();
    if let Some(c) = q.0.iter_mut().find(|c| c.bytes != 0 && c.uid == uid) {
        c.bytes = c.bytes.saturating_sub(bytes);
    }
    OUTSTANDING_BYTES.fetch_sub(bytes, Ordering::Relaxed);
}

/// DMA-coherent queue memory: `dma_alloc_attrs` for a window's device.
struct DmaBuf {
    id: u64,
    dev: PciDev,
    cpu: NonNull<c_void>,
    bus: bindings::dma_addr_t,
    bytes: usize,
    uid: u32,
}

// SAFETY: the buffer is owned by this struct alone (no aliasing Rust
// references exist; user space reaches it only through its own mappings), and
// dma_free_attrs may be called from any process context.
unsafe impl Send for DmaBuf {}

impl DmaBuf {
    fn new(id: u64, dev: PciDev, bytes: usize, uid: u32) -> Result<DmaBuf> {
        charge(uid, bytes as u64)?;
        let mut bus: bindings::dma_addr_t = 0;
        // SAFETY: `dev` is a referenced, registered device (checked by the
        // caller) with the coherent DMA mask PCI core gives every device
        // (drivers/pci/probe.c pci_setup_device). dma_alloc_attrs returns
        // zeroed memory or NULL (kernel/dma/mapping.c).
        let cpu = unsafe { bindings::dma_alloc_attrs(dev.device(), bytes, &mut bus, bindings::GFP_KERNEL, 0) };
        match NonNull::new(cpu) {
            Some(cpu) => Ok(DmaBuf { id, dev, cpu, bus, bytes, uid }),
            None => {
                uncharge(uid, bytes as u64);
                Err(ENOMEM)
            }
        }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: exactly the (dev, size, cpu, bus) that dma_alloc_attrs
        // returned; freed once. User mappings of it are gone: they hold the
        // file, and this runs from the file's release.
        unsafe { bindings::dma_free_attrs(self.dev.device(), self.bytes, self.cpu.as_ptr(), self.bus, 0) };
        uncharge(self.uid, self.bytes as u64);
    }
}

/// Per-open-file state.
struct Inner {
    selected: Option<u32>,
    bufs: KVec<DmaBuf>,
    next_id: u64,
}

#[pin_data]
struct MarrowFile {
    /// Effective uid of the opener: the user queue memory is charged to.
    uid: u32,
    /// This file's address space, for revoking window mappings.
    _space: SpaceRef,
    #[pin]
    inner: Mutex<Inner>,
}

fn read_arg<const N: usize>(arg: usize) -> Result<[u8; N]> {
    let mut b = [0u8; N];
    UserSlice::new(UserPtr::from_addr(arg), N).reader().read_slice(&mut b)?;
    Ok(b)
}

fn write_arg(arg: usize, b: &[u8]) -> Result {
    UserSlice::new(UserPtr::from_addr(arg), b.len()).writer().write_slice(b)
}

fn is_sys_admin() -> bool {
    // SAFETY: no preconditions; checks the current task's credentials
    // (kernel/capability.c), and records the use for audit as root-only
    // interfaces should.
    unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as i32) }
}

impl MarrowFile {
    fn ioctl_add_window(arg: usize) -> Result<isize> {
        if !is_sys_admin() {
            return Err(EPERM);
        }
        let mut w = MarrowWindow::from_bytes(&read_arg::<{ MarrowWindow::SIZE }>(arg)?);
        w.index = add_window(&w)?;
        write_arg(arg, &w.to_bytes())?;
        Ok(0)
    }

    fn ioctl_select(&self, arg: usize) -> Result<isize> {
        let index = u32::from_le_bytes(read_arg::<4>(arg)?);
        window(index)?;
        self.inner.lock().selected = Some(index);
        Ok(0)
    }

    fn ioctl_info(arg: usize) -> Result<isize> {
        let w = MarrowWindow::from_bytes(&read_arg::<{ MarrowWindow::SIZE }>(arg)?);
        let win = window(w.index)?;
        if !win.alive() {
            return Err(ENODEV);
        }
        write_arg(arg, &win.desc.to_bytes())?;
        Ok(0)
    }

    fn ioctl_alloc(&self, arg: usize) -> Result<isize> {
        let mut a = MarrowAlloc::from_bytes(&read_arg::<{ MarrowAlloc::SIZE }>(arg)?);
        if a.reserved != 0
            || a.bytes == 0
            || a.bytes % PAGE_SIZE as u64 != 0
            || a.bytes > uapi::MARROW_MMAP_ALLOC_STRIDE
        {
            return Err(EINVAL);
        }
        let win = window(a.window)?;
        if !win.alive() {
            return Err(ENODEV);
        }
        let id = {
            let mut inner = self.inner.lock();
            let id = inner.next_id;
            // Offsets must stay below 2^63 (loff_t); 2^23 allocations per file.
            if id >= (1 << 23) {
                return Err(ENOSPC);
            }
            let buf = DmaBuf::new(id, win.dev.clone(), a.bytes as usize, self.uid)?;
            a.bus_addr = buf.bus;
            inner.bufs.push(buf, GFP_KERNEL)?;
            inner.next_id += 1;
            id
        };
        a.mmap_offset = uapi::MARROW_MMAP_ALLOC_BASE + id * uapi::MARROW_MMAP_ALLOC_STRIDE;
        if let Err(e) = write_arg(arg, &a.to_bytes()) {
            // The caller cannot learn the offset: do not keep memory it cannot name.
            let mut inner = self.inner.lock();
            if let Some(i) = inner.bufs.iter().position(|b| b.id == id) {
                drop(inner.bufs.remove(i));
            }
            return Err(e);
        }
        Ok(0)
    }

    /// Map pages `pgoff..pgoff+pages` of the selected window.
    fn mmap_window(&self, vma: &VmaNew, pgoff: u64, pages: u64) -> Result {
        let index = self.inner.lock().selected.ok_or(EINVAL)?;
        let win = window(index)?;
        if !win.alive() {
            return Err(ENODEV);
        }
        if pgoff.checked_add(pages).is_none_or(|end| end > win.desc.npages) {
            return Err(EINVAL);
        }
        if win.desc.flags & uapi::MARROW_WIN_WRITE == 0 {
            // As mmap(2) refuses a writable shared mapping of a read-only
            // file: EACCES. Clearing VM_MAYWRITE makes a later
            // mprotect(PROT_WRITE) fail with EACCES too (mm/mprotect.c).
            if vma.writable() {
                return Err(EACCES);
            }
            vma.try_clear_maywrite()?;
        }
        vma.set_io();
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        let raw = vma.as_ptr();
        let phys = win.phys + pgoff * PAGE_SIZE as u64;
        let len = vma.end() - vma.start();
        // SAFETY: inside f_op->mmap for this new vma (the caller holds the
        // mmap lock for writing, as remap_pfn_range requires). The pfn range
        // lies inside a memory BAR of a device that is registered (checked
        // above) and that we hold a reference on. The protection bits are the
        // vma's plus a caching mode: pgprot_writecombine() is an exported
        // function on x86 (arch/x86/mm/pat/memtype.c); pgprot_noncached() is
        // a macro (arch/x86/include/asm/pgtable.h), spelled out here with the
        // exported cachemode2protval() exactly as it expands (UC-).
        to_result(unsafe {
            let base = (*raw).vm_page_prot;
            let prot = if win.desc.flags & uapi::MARROW_WIN_WC != 0 {
                bindings::pgprot_writecombine(base)
            } else {
                bindings::pgprot_t {
                    pgprot: base.pgprot
                        | bindings::cachemode2protval(bindings::page_cache_mode__PAGE_CACHE_MODE_UC_MINUS),
                }
            };
            let r = bindings::remap_pfn_range(raw, vma.start() as _, (phys >> PAGE_SHIFT) as _, len as _, prot);
            // File the mapping under this window's range (WIN_FILE_BASE);
            // the vma is linked into the address space after this hook
            // returns, with this vm_pgoff. remap_pfn_range uses vm_pgoff
            // only for copy-on-write mappings, which are refused.
            let file_off = WIN_FILE_BASE + win.desc.index as u64 * WIN_FILE_STRIDE + pgoff * PAGE_SIZE as u64;
            (*raw).vm_pgoff = (file_off >> PAGE_SHIFT) as _;
            r
        })
    }

    /// Map pages of queue-memory allocation `id`, from page `off` of it.
    fn mmap_alloc(&self, vma: &VmaNew, rel: u64, pages: u64) -> Result {
        let stride = uapi::MARROW_MMAP_ALLOC_STRIDE >> PAGE_SHIFT;
        let (id, off) = (rel / stride, rel % stride);
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        let inner = self.inner.lock();
        let buf = inner.bufs.iter().find(|b| b.id == id).ok_or(EINVAL)?;
        if off.checked_add(pages).is_none_or(|end| end > (buf.bytes >> PAGE_SHIFT) as u64) {
            return Err(EINVAL);
        }
        if !buf.dev.present() {
            return Err(ENODEV);
        }
        let raw = vma.as_ptr();
        // SAFETY: inside f_op->mmap for this new vma (mmap lock held). The
        // DMA API reads vm_pgoff as the page offset into the buffer
        // (kernel/dma/direct.c dma_direct_mmap), so it is set to that, as
        // drivers do before dma_mmap_coherent(). (cpu, bus, bytes) are what
        // dma_alloc_attrs returned for this device; the buffer outlives the
        // mapping because the mapping holds the file whose release frees it.
        to_result(unsafe {
            let user_pgoff = (*raw).vm_pgoff;
            (*raw).vm_pgoff = off as _;
            let r = bindings::dma_mmap_attrs(buf.dev.device(), raw, buf.cpu.as_ptr(), buf.bus, buf.bytes, 0);
            // Back to the user's offset (below 2^56), clear of the windows' range.
            (*raw).vm_pgoff = user_pgoff;
            r
        })
    }
}

#[vtable]
impl MiscDevice for MarrowFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        let uid = file.cred().euid().into_raw().val;
        let space = SpaceRef::new(file)?;
        KBox::try_pin_init(
            try_pin_init!(MarrowFile {
                uid,
                _space: space,
                inner <- new_mutex!(Inner { selected: None, bufs: KVec::new(), next_id: 0 }),
            }),
            GFP_KERNEL,
        )
    }

    fn ioctl(me: Pin<&MarrowFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            uapi::MARROW_IOC_ADD_WINDOW => Self::ioctl_add_window(arg),
            uapi::MARROW_IOC_SELECT_WINDOW => me.ioctl_select(arg),
            uapi::MARROW_IOC_WINDOW_INFO => Self::ioctl_info(arg),
            uapi::MARROW_IOC_ALLOC => me.ioctl_alloc(arg),
            _ => Err(ENOTTY),
        }
    }

    fn mmap(me: Pin<&MarrowFile>, _file: &File, vma: &VmaNew) -> Result {
        // MAP_PRIVATE would make a copy-on-write mapping of device memory.
        if vma.flags() & vmflags::SHARED == 0 {
            return Err(EINVAL);
        }
        // Doorbells and queues are data, never code.
        if vma.executable() {
            return Err(EPERM);
        }
        vma.try_clear_mayexec()?;
        // SAFETY: the vma is valid during f_op->mmap; VmaNew has no accessor
        // for vm_pgoff (rust/kernel/mm/virt.rs in 7.3).
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff } as u64;
        let pages = ((vma.end() - vma.start()) >> PAGE_SHIFT) as u64;
        let base = uapi::MARROW_MMAP_ALLOC_BASE >> PAGE_SHIFT;
        if pgoff >= base { me.mmap_alloc(vma, pgoff - base, pages) } else { me.mmap_window(vma, pgoff, pages) }
    }
}

#[pin_data(PinnedDrop)]
struct MarrowModule {
    /// The load-time window was accepted (or none was asked for).
    _params: (),
    #[pin]
    _miscdev: MiscDeviceRegistration<MarrowFile>,
    /// Last: registered once the device exists, unregistered after it is gone.
    #[pin]
    _notifier: BusNotifier,
}

fn load_time_window() -> Result {
    let pci = module_parameters::win_pci.value();
    if pci == WIN_PCI_NONE {
        return Ok(());
    }
    let w = MarrowWindow {
        domain: (pci >> WIN_PCI_DOMAIN_SHIFT) as u16,
        bus: (pci >> WIN_PCI_BUS_SHIFT) as u8,
        devfn: pci as u8,
        bar: module_parameters::win_bar.value(),
        flags: module_parameters::win_flags.value(),
        index: 0,
        pgoff: module_parameters::win_pgoff.value(),
        npages: module_parameters::win_pages.value(),
    };
    add_window(&w).map(|_| ()).inspect_err(|e| pr_err!("load-time window refused: {:?}\n", e))
}

impl kernel::InPlaceModule for MarrowModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // SAFETY: called once, before anything can take the locks.
        unsafe {
            WINDOWS.init();
            QUOTA.init();
            SPACES.init();
        }
        pr_info!("max_user_bytes={}\n", module_parameters::max_user_bytes.value());
        // Fields initialise in order: the device appears only once the
        // load-time window is in place.
        try_pin_init!(Self {
            _params: load_time_window()?,
            _miscdev <- MiscDeviceRegistration::register(MiscDeviceOptions { name: c"marrow" }),
            _notifier <- BusNotifier::register(),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for MarrowModule {
    fn drop(self: Pin<&mut Self>) {
        // No file is open (each holds a module reference), so no window is in
        // use: drop them and their device references.
        let mut table = WINDOWS.lock();
        for slot in table.0.iter_mut() {
            *slot = None;
        }
        drop(table);
        let left = OUTSTANDING_BYTES.load(Ordering::Relaxed);
        if left != 0 {
            pr_err!("leak: {} bytes of queue memory still allocated at unload\n", left);
        } else {
            pr_info!("unloaded, no queue memory outstanding\n");
        }
    }
}
