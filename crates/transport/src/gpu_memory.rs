//! GPU memory the host allocates and copies in and out of: a window
//! (`cuMemAlloc`, zeroed), bounds-checked copies to and from it, and a GCRB
//! page uploaded into one. The P2P transport (`crate::p2p`) exports
//! windows to peers; the GPU runs (`crate::gpu`) keep their GCRB in one.

use crate::TransportError;
use crate::gpu::{Gpu, cuda};
use cudarc::driver::sys as cu;
use marrow_mmio::Region;

/// A PE's window: GPU memory its peer maps (and the memory of a
/// `DeviceGcrb`). Allocated with `cuMemAlloc`, not from a stream-ordered
/// pool: `cuIpcGetMemHandle` refuses pool memory (CUDA_ERROR_INVALID_VALUE)
/// unless the pool was made for IPC, and so does `cuStreamWriteValue64`.
#[derive(Debug)]
pub struct Window {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    /// Device address in this process.
    pub addr: u64,
    /// Bytes.
    pub len: usize,
}

impl Drop for Window {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `addr` came from cuMemAlloc in `Gpu::window` and is
            // freed once, here; kernels using it were synchronized by then
            // (every launch helper synchronizes its stream).
            let _ = unsafe { cu::cuMemFree_v2(self.addr) };
        }
    }
}

impl Gpu {
    /// `len` zeroed bytes of this GPU's memory, for peers to map.
    pub fn window(&self, len: usize) -> Result<Window, TransportError> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        let mut addr: cu::CUdeviceptr = 0;
        // SAFETY: `addr` is a valid out-pointer.
        unsafe { cu::cuMemAlloc_v2(&mut addr, len) }.result().map_err(cuda)?;
        let w = Window { ctx: self.ctx.clone(), addr, len };
        // SAFETY: `addr..addr+len` was just allocated.
        unsafe { cu::cuMemsetD8_v2(addr, 0, len) }.result().map_err(cuda)?;
        Ok(w)
    }

    /// Copy host bytes into a window at `off`.
    pub fn write_window(&self, w: &Window, off: usize, data: &[u8]) -> Result<(), TransportError> {
        check_range(w, off, data.len())?;
        self.ctx.bind_to_thread().map_err(cuda)?;
        // SAFETY: `off..off+len` lies inside the window (checked); the source is a live slice.
        unsafe { cu::cuMemcpyHtoD_v2(w.addr + off as u64, data.as_ptr().cast(), data.len()) }.result().map_err(cuda)
    }

    /// Copy a window's bytes at `off` out to the host.
    pub fn read_window(&self, w: &Window, off: usize, out: &mut [u8]) -> Result<(), TransportError> {
        check_range(w, off, out.len())?;
        self.ctx.bind_to_thread().map_err(cuda)?;
        // SAFETY: `off..off+len` lies inside the window (checked); the destination is a live slice.
        unsafe { cu::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), w.addr + off as u64, out.len()) }.result().map_err(cuda)
    }
}

/// `off..off + len` must lie inside `w`.
pub(crate) fn check_range(w: &Window, off: usize, len: usize) -> Result<(), TransportError> {
    if off.checked_add(len).is_none_or(|end| end > w.len) {
        return Err(TransportError::Window(marrow_mmio::OutOfBounds { offset: off, len, size: w.len }));
    }
    Ok(())
}

/// A GCRB living in GPU memory. NVSHMEM keeps its per-QP counters
/// ("mvars") in global memory for the same reason: thousands of threads
/// spinning on atomics over PCIe starve the ones doing work. The rings,
/// doorbells and CQ stay in host memory, where the NIC (here the softnic)
/// reads and writes them.
#[derive(Debug)]
pub struct DeviceGcrb {
    win: Window,
    /// The device address kernels take.
    pub addr: u64,
}

impl Gpu {
    /// Copy a filled GCRB page (host) into GPU memory. The memory comes
    /// from `cuMemAlloc`, not a stream-ordered pool: the P2P relay's stream
    /// writes its copy count into the GCRB (`cuStreamWriteValue64`), which
    /// refuses pool memory with CUDA_ERROR_INVALID_VALUE (measured on the
    /// H200, `docs/runs/2026-11-29-p2p-h200x2-relay-fda3c02.txt`).
    pub fn upload(&self, page: &Region) -> Result<DeviceGcrb, TransportError> {
        let mut host = vec![0u8; page.len()];
        page.read_bytes(0, &mut host)?;
        let win = self.window(host.len())?;
        self.write_window(&win, 0, &host)?;
        Ok(DeviceGcrb { addr: win.addr, win })
    }

    /// Copy a GCRB back from GPU memory into `page` once the kernels on the
    /// stream are done, so the host can decode its error block, heads and
    /// trace.
    pub fn download(&self, d: &DeviceGcrb, page: &Region) -> Result<(), TransportError> {
        self.stream.synchronize().map_err(cuda)?;
        let mut host = vec![0u8; d.win.len];
        self.read_window(&d.win, 0, &mut host)?;
        page.write_bytes(0, &host)?;
        Ok(())
    }
}
