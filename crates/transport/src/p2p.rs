//! Transport P2P: the same device API between GPUs of one node, through
//! peer mappings instead of a NIC. Each PE is a process with one GPU and one
//! window of GPU memory; it exports the window with CUDA IPC
//! (`cuIpcGetMemHandle`), opens its peer's (`cuIpcOpenMemHandle`, lazy peer
//! access over NVLink or PCIe), and hands the device code a GCRB whose
//! `transport` is P2P and whose key table holds both windows as mapped in
//! this process. Puts and gets are then the threads' own stores and loads,
//! atomics system-scope atomics, quiet a system-scope fence (device.h,
//! "peer-to-peer").

use crate::TransportError;
use crate::gpu::{Gpu, Grid, cuda};
pub use crate::gpu_memory::Window;
use crate::gpu_memory::check_range;
use cudarc::driver::PushKernelArg;
use cudarc::driver::sys as cu;
use marrow_gcrb::GcrbTransport;
use marrow_mmio::Region;

/// The 64 bytes of a `CUipcMemHandle`, as sent between PEs.
pub type IpcHandle = [u8; 64];

/// The peer's window, mapped into this process (unmapped when dropped).
#[derive(Debug)]
pub struct PeerWindow {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    /// Device address of the peer's window in this process.
    pub addr: u64,
}

impl Drop for PeerWindow {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `addr` came from cuIpcOpenMemHandle in `Gpu::import`
            // and is closed once, here, after the kernels that used it were
            // synchronized.
            let _ = unsafe { cu::cuIpcCloseMemHandle(self.addr) };
        }
    }
}

impl Gpu {
    /// The IPC handle that lets another process map `w`.
    pub fn export(&self, w: &Window) -> Result<IpcHandle, TransportError> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        let mut h = cu::CUipcMemHandle_st { reserved: [0; 64] };
        // SAFETY: `w.addr` is the base of a live cuMemAlloc allocation (the
        // window's CudaSlice); `h` is a valid out-pointer.
        unsafe { cu::cuIpcGetMemHandle(&mut h, w.addr) }.result().map_err(cuda)?;
        Ok(h.reserved.map(|c| c as u8))
    }

    /// Map a peer's window from its IPC handle (lazy peer access).
    pub fn import(&self, handle: &IpcHandle) -> Result<PeerWindow, TransportError> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        let h = cu::CUipcMemHandle_st { reserved: handle.map(|b| b as std::ffi::c_char) };
        let mut addr: cu::CUdeviceptr = 0;
        let flags = cu::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: `addr` is a valid out-pointer; the handle came from
        // cuIpcGetMemHandle in another process (a wrong one is refused by
        // the driver with an error, not mapped).
        unsafe { cu::cuIpcOpenMemHandle_v2(&mut addr, h, flags) }.result().map_err(cuda)?;
        Ok(PeerWindow { ctx: self.ctx.clone(), addr })
    }

    /// The floor for P2P bandwidth: `reps` back-to-back copies of `len`
    /// bytes by the copy engine from `src` into the peer's window (what
    /// `cudaMemcpyPeer` does under unified addressing), one synchronize.
    pub fn copy_to_peer(
        &self,
        dst: &PeerWindow,
        dst_off: u64,
        src: &Window,
        src_off: u64,
        len: usize,
        reps: u32,
    ) -> Result<std::time::Duration, TransportError> {
        check_range(src, src_off as usize, len)?;
        self.ctx.bind_to_thread().map_err(cuda)?;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            // SAFETY: the source range lies in our window (checked); the
            // destination is the peer's mapped window, sized by the caller
            // like ours (both PEs allocate the same window).
            unsafe { cu::cuMemcpyDtoDAsync_v2(dst.addr + dst_off, src.addr + src_off, len, self.stream.cu_stream()) }
                .result()
                .map_err(cuda)?;
        }
        self.stream.synchronize().map_err(cuda)?;
        Ok(t.elapsed())
    }

    /// `marrow_p2p_put_block_kernel` launched `reps` times back to back on
    /// `grid` (through TMA bulk stores with `tma`), each launch putting the
    /// message `inner` times before its quiet; one synchronize: the wall
    /// time and the first failing rc.
    #[allow(clippy::too_many_arguments)]
    pub fn p2p_put(
        &self,
        page: u64,
        pe: u32,
        roff: u64,
        loff: u64,
        len: u64,
        grid: Grid,
        reps: u32,
        inner: u32,
        tma: bool,
    ) -> Result<(std::time::Duration, i32), TransportError> {
        let tma = u32::from(tma);
        let f = self.function("marrow_p2p_put_block_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(grid.blocks as usize).map_err(cuda)?;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            let mut b = self.stream.launch_builder(&f);
            b.arg(&page).arg(&pe).arg(&roff).arg(&loff).arg(&len).arg(&tma).arg(&inner).arg(&mut rc);
            // SAFETY: matches marrow_p2p_put_block_kernel (u8*, u32, u64, u64, u64, u32, u32, int*);
            // `page` is a P2P GCRB whose windows are live.
            unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        }
        self.stream.synchronize().map_err(cuda)?;
        let dt = t.elapsed();
        let rcs = self.stream.clone_dtoh(&rc).map_err(cuda)?;
        Ok((dt, rcs.into_iter().find(|&r| r != 0).unwrap_or(0)))
    }

    /// `marrow_p2p_wait_check_kernel`: wait for the signal, then count the
    /// bytes that differ from the seeded pattern: (rc, mismatches).
    pub fn p2p_wait_check(
        &self,
        page: u64,
        sig_loff: u64,
        value: u64,
        data_loff: u64,
        len: u64,
        seed: u32,
    ) -> Result<(i32, u64), TransportError> {
        let f = self.function("marrow_p2p_wait_check_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut bad = self.stream.alloc_zeros::<u64>(1).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&sig_loff).arg(&value).arg(&data_loff).arg(&len).arg(&seed).arg(&mut bad).arg(&mut rc);
        // SAFETY: matches marrow_p2p_wait_check_kernel (u8*, u64, u64, u64, u64, u32, u64*, int*).
        unsafe { b.launch(Grid { blocks: 1, threads: 512 }.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?[0], self.stream.clone_dtoh(&bad).map_err(cuda)?[0]))
    }

    /// `marrow_p2p_pingpong_kernel` as `rank`: values `base+1..=base+iters`
    /// through the 8-byte slot at `slot`: (rc, ns total).
    #[allow(clippy::too_many_arguments)]
    pub fn p2p_pingpong(
        &self,
        page: u64,
        rank: u32,
        slot: u64,
        base: u64,
        iters: u32,
        floor: bool,
    ) -> Result<(i32, u64), TransportError> {
        let f = self.function("marrow_p2p_pingpong_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut ns = self.stream.alloc_zeros::<u64>(1).map_err(cuda)?;
        let floor = u32::from(floor);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&rank).arg(&slot).arg(&base).arg(&iters).arg(&floor).arg(&mut ns).arg(&mut rc);
        // SAFETY: matches marrow_p2p_pingpong_kernel (u8*, u32, u64, u64, u32, u32, u64*, int*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?[0], self.stream.clone_dtoh(&ns).map_err(cuda)?[0]))
    }
}

impl Gpu {
    /// `marrow_get_at_kernel`: one thread gets `len` bytes: the result code.
    pub fn get_at(&self, page: u64, pe: u32, roff: u64, loff: u64, len: u32) -> Result<i32, TransportError> {
        let f = self.function("marrow_get_at_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&roff).arg(&loff).arg(&len).arg(&mut rc);
        // SAFETY: matches marrow_get_at_kernel (u8*, u32, u64, u64, u32, int*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok(self.stream.clone_dtoh(&rc).map_err(cuda)?[0])
    }

    /// `marrow_put_signal_kernel`: one thread, put_signal then quiet: the result code.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal(
        &self,
        page: u64,
        pe: u32,
        roff: u64,
        loff: u64,
        len: u32,
        sig_roff: u64,
        sig_add: u64,
        scratch_loff: u64,
    ) -> Result<i32, TransportError> {
        let f = self.function("marrow_put_signal_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page)
            .arg(&pe)
            .arg(&roff)
            .arg(&loff)
            .arg(&len)
            .arg(&sig_roff)
            .arg(&sig_add)
            .arg(&scratch_loff)
            .arg(&mut rc);
        // SAFETY: matches marrow_put_signal_kernel (u8*, u32, u64, u64, u32, u64, u64, u64, int*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok(self.stream.clone_dtoh(&rc).map_err(cuda)?[0])
    }
}

/// The relay's copy engine on a GPU: copies on a stream of their own (so
/// they run while the posting kernel waits), each followed in that stream
/// by a write of the count of copies made into the GCRB's `cons_idx`.
#[derive(Debug)]
pub struct CudaCopyEngine {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    done_addr: u64,
    bound: bool,
}

impl Gpu {
    /// A copy engine for a relay whose device GCRB is at `page`.
    pub fn relay_engine(&self, page: u64) -> Result<CudaCopyEngine, TransportError> {
        let stream = self.ctx.new_stream().map_err(cuda)?;
        Ok(CudaCopyEngine {
            ctx: self.ctx.clone(),
            stream,
            done_addr: page + crate::p2p_relay::done_offset() as u64,
            bound: false,
        })
    }
}

impl crate::p2p_relay::CopyEngine for CudaCopyEngine {
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<(), String> {
        if !self.bound {
            self.ctx.bind_to_thread().map_err(|e| e.to_string())?;
            self.bound = true;
        }
        // SAFETY: the relay checked both ranges against the local window
        // and the peer windows mapped in this process, which outlive it.
        unsafe { cu::cuMemcpyDtoDAsync_v2(dst, src, len as usize, self.stream.cu_stream()) }
            .result()
            .map_err(|e| format!("cuMemcpyDtoDAsync: {e:?}"))
    }

    fn done(&mut self, count: u64) -> Result<(), String> {
        // SAFETY: `done_addr` is the cons_idx word of a GCRB in this GPU's
        // memory (`Gpu::upload`), live while the relay runs; the write is
        // ordered after the stream's earlier copies.
        unsafe { cu::cuStreamWriteValue64_v2(self.stream.cu_stream(), self.done_addr, count, 0) }
            .result()
            .map_err(|e| format!("cuStreamWriteValue64: {e:?}"))
    }

    fn finish(&mut self) -> Result<(), String> {
        if !self.bound {
            return Ok(());
        }
        self.stream.synchronize().map_err(|e| format!("synchronizing the relay's stream: {e:?}"))
    }
}

/// The windows a P2P GCRB names: PE `pe`'s window at `keys[pe]`, ours
/// among them at `local`.
#[derive(Clone, Copy, Debug)]
pub struct P2pSetup {
    /// Our window (device address in this process) and its length.
    pub local: (u64, u64),
    /// Every PE's window as mapped in this process, and its length (a
    /// multiple of 4 KiB; the device code refuses accesses past it).
    pub keys: [(u64, u64); 2],
    /// Timeout of every device-side wait.
    pub timeout_ns: u64,
    /// The copy-engine relay, if any (`gcrb_config.relay_*`).
    pub relay: Option<RelaySetup>,
}

/// The smallest put the relay takes unless told otherwise: 32 MiB. On two
/// H200s (NV18), 20 puts in one launch measured against the copy engine:
/// SM stores 1.95 at 1 MiB, 0.985 at 16 MiB, 0.954 at 64 MiB, 0.941 at 256
/// MiB; the relay 0.61, 0.936, 0.986, 0.996 (`docs/runs/2026-11-29-p2p-h200x2-relay-fda3c02.txt`).
pub const RELAY_MIN_KIB_DEFAULT: u32 = 32 << 10;

/// Where the device code hands large puts to the host relay
/// ([`crate::p2p_relay`]).
#[derive(Clone, Copy, Debug)]
pub struct RelaySetup {
    /// Device address of the descriptor ring (host memory the GPU maps).
    pub ring: u64,
    /// Descriptors in it (a power of two).
    pub entries: u32,
    /// Puts of at least this many KiB go to the relay.
    pub min_kib: u32,
}

/// Fill `page` as a P2P GCRB: no queues, `transport` = P2P, the windows in
/// the key table (rkeys 0: nothing translates them).
pub fn fill(page: &Region, s: &P2pSetup) -> Result<(), marrow_mmio::OutOfBounds> {
    let setup = crate::gcrb_page::GcrbSetup {
        qpn: 0,
        sq: (0, 0),
        dbrec: 0,
        db: (0, 0),
        cq: (0, 0, 0, false),
        local: (0, s.local.0, s.local.1),
        keys: [(s.keys[0].0, 0), (s.keys[1].0, 0)],
        timeout_ns: s.timeout_ns,
        trace: false,
    };
    crate::gcrb_page::fill(page, &setup)?;
    crate::gcrb_page::edit_config(page, |c| {
        c.set_transport(GcrbTransport::P2P.0);
        if let Some(r) = s.relay {
            c.set_relay_ring(r.ring).set_relay_entries(r.entries).set_relay_min_kib(r.min_kib);
        }
    })?;
    for (pe, (addr, len)) in s.keys.iter().enumerate() {
        crate::gcrb_page::set_window(
            page,
            pe,
            *addr,
            0,
            u32::try_from(len >> marrow_gcrb::GCRB_WINDOW_PAGE_SHIFT).unwrap_or(u32::MAX),
        )?;
    }
    Ok(())
}
