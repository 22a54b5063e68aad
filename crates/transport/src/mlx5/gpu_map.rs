//! Making NIC memory reachable from the GPU and GPU memory reachable from
//! the NIC. Not run on the development machines (no GPU, no NIC): it
//! compiles, and its one decision, which doorbell mode a refusal leads to,
//! is a pure function tested here.
//!
//! - The UAR page: `cuMemHostRegister(uar, 4096, PORTABLE | DEVICEMAP |
//!   IOMEMORY)` then `cuMemHostGetDevicePointer`, as NVSHMEM
//!   (`ibgda_nic_mem_gpu_map`) and DOCA (`doca_gpu_verbs_export_uar`) do.
//!   The nvidia driver refuses MMIO peer mappings to non-administrators
//!   unless `NVreg_RegistryDwords="PeerMappingOverride=1;"` (the refusal is
//!   `CUDA_ERROR_NOT_PERMITTED`/`NOT_SUPPORTED`; DeepEP#509 saw error 800);
//!   marrow then falls back to the CPU proxy instead of failing.
//! - GPU buffers for the NIC: `cuMemGetHandleForAddressRange(...,
//!   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)` gives a dma-buf fd for
//!   `ibv_reg_dmabuf_mr` / `mlx5dv_devx_umem_reg_ex`.

use super::Mlx5Error;
use cudarc::driver::sys as cu;
use marrow_mlx5::raw::MLX5_ADAPTER_PAGE_SIZE;
use marrow_verbs::probe::DoorbellMode;

/// Map `len` bytes of the UAR at `uar` into the current CUDA context;
/// returns the device address of `uar`.
pub fn map_uar(gpu: &crate::gpu::Gpu, uar: *mut u8, len: usize) -> Result<u64, Mlx5Error> {
    gpu.ctx.bind_to_thread().map_err(|e| Mlx5Error::Cuda(format!("{e:?}")))?;
    let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP | cu::CU_MEMHOSTREGISTER_IOMEMORY;
    // SAFETY: `uar..uar+len` is the UAR page rdma-core mmapped for the
    // context, which outlives the channel; IOMEMORY tells CUDA it is MMIO.
    unsafe { cu::cuMemHostRegister_v2(uar.cast(), len, flags) }
        .result()
        .map_err(|e| Mlx5Error::Cuda(format!("cuMemHostRegister(UAR, IOMEMORY): {e:?}")))?;
    let mut d: cu::CUdeviceptr = 0;
    // SAFETY: registered just above; `d` is a valid out-pointer.
    unsafe { cu::cuMemHostGetDevicePointer_v2(&mut d, uar.cast(), 0) }
        .result()
        .map_err(|e| Mlx5Error::Cuda(format!("cuMemHostGetDevicePointer(UAR): {e:?}")))?;
    Ok(d)
}

/// A dma-buf file descriptor for `len` bytes of GPU memory at `dptr`.
pub fn dmabuf_fd(gpu: &crate::gpu::Gpu, dptr: u64, len: usize) -> Result<i32, Mlx5Error> {
    gpu.ctx.bind_to_thread().map_err(|e| Mlx5Error::Cuda(format!("{e:?}")))?;
    let mut fd: i32 = -1;
    // SAFETY: `fd` is a valid out-pointer for the int the driver writes;
    // `dptr..dptr+len` is a live allocation of this context.
    unsafe {
        cu::cuMemGetHandleForAddressRange(
            (&mut fd as *mut i32).cast(),
            dptr,
            len,
            cu::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
            0,
        )
    }
    .result()
    .map_err(|e| {
        Mlx5Error::Cuda(format!(
            "cuMemGetHandleForAddressRange(DMA_BUF_FD): {e:?} (needs the open kernel modules and Linux >= 5.12)"
        ))
    })?;
    Ok(fd)
}

/// The mode a channel ends up in after trying to map the UAR: the GPU rings
/// itself when the mapping succeeded, otherwise the CPU proxy, with the
/// reason carried to `marrow doctor`/`bench` output.
pub fn mode_after(mapping: &Result<u64, Mlx5Error>) -> (DoorbellMode, String) {
    match mapping {
        Ok(_) => {
            (DoorbellMode::GpuDoorbell, "the UAR is mapped into the GPU (cudaHostRegister IoMemory succeeded)".into())
        }
        // The driver's peer-mapping refusal (no PeerMappingOverride, not
        // root) is NOT_PERMITTED or NOT_SUPPORTED; INVALID_VALUE is what an
        // address that is not MMIO gets (measured on an H200: an ordinary
        // page with IOMEMORY), which no regkey fixes.
        Err(e) if e.to_string().contains("NOT_PERMITTED") || e.to_string().contains("NOT_SUPPORTED") => (
            DoorbellMode::CpuProxy,
            format!(
                "{e}; falling back to the CPU proxy (set options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\" for GPU doorbells)"
            ),
        ),
        Err(e) => (DoorbellMode::CpuProxy, format!("{e}; falling back to the CPU proxy")),
    }
}

/// The doorbell for a channel whose device code runs on `gpu`: map the UAR
/// page holding `dv.bf_reg` into the GPU; if the driver refuses, ring
/// through `mailbox` (a host address the GPU can write, forwarded by a
/// [`marrow_verbs::proxy::DoorbellProxy`] the caller starts). Returns the
/// doorbell for [`super::setup::gcrb_setup`], the mode and why.
pub fn choose_doorbell(
    gpu: &crate::gpu::Gpu,
    dv: &marrow_verbs::device::DvQueues,
    mailbox: u64,
) -> (super::setup::Doorbell, DoorbellMode, String) {
    use super::setup::Doorbell;
    let uar_page = u64::from(MLX5_ADAPTER_PAGE_SIZE);
    let page = dv.bf_reg - dv.bf_reg % uar_page;
    let m = map_uar(gpu, page as *mut u8, uar_page as usize);
    let (mode, why) = mode_after(&m);
    match m {
        Ok(d) => (Doorbell::GpuUar(d + dv.bf_reg % uar_page), mode, why),
        Err(_) => (Doorbell::Mailbox(mailbox), mode, why),
    }
}

/// Host memory rdma-core allocated (send queue, CQ, doorbell records) made
/// reachable from the GPU at the same address: `cuMemHostRegister` of the
/// pages covering each range, overlapping ranges merged (registering a page
/// twice is an error). Returns the page ranges, for [`unregister_host`].
pub fn register_host(gpu: &crate::gpu::Gpu, ranges: &[(u64, usize)]) -> Result<Vec<(u64, usize)>, Mlx5Error> {
    let pages = page_ranges(ranges);
    gpu.ctx.bind_to_thread().map_err(|e| Mlx5Error::Cuda(format!("{e:?}")))?;
    let mut done = Vec::new();
    for &(base, len) in &pages {
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `base..base+len` covers buffers rdma-core allocated for
        // the QP and CQ, which stay mapped until the QP is destroyed; the
        // caller unregisters before that.
        let r = unsafe { cu::cuMemHostRegister_v2(base as *mut std::ffi::c_void, len, flags) }.result();
        if let Err(e) = r {
            unregister_host(gpu, &done);
            return Err(Mlx5Error::Cuda(format!("cuMemHostRegister({base:#x}, {len}): {e:?}")));
        }
        done.push((base, len));
        let mut d: cu::CUdeviceptr = 0;
        // SAFETY: registered just above; `d` is a valid out-pointer.
        unsafe { cu::cuMemHostGetDevicePointer_v2(&mut d, base as *mut std::ffi::c_void, 0) }
            .result()
            .map_err(|e| Mlx5Error::Cuda(format!("cuMemHostGetDevicePointer({base:#x}): {e:?}")))?;
        if d != base {
            unregister_host(gpu, &done);
            return Err(Mlx5Error::Cuda(format!(
                "host {base:#x} maps to device {d:#x}: the GCRB needs identical addresses"
            )));
        }
    }
    Ok(done)
}

/// Undo [`register_host`] (after the GPU stopped using the ranges).
pub fn unregister_host(gpu: &crate::gpu::Gpu, pages: &[(u64, usize)]) {
    if gpu.ctx.bind_to_thread().is_err() {
        return;
    }
    for &(base, _) in pages {
        // SAFETY: each base was registered by `register_host` and the GPU
        // no longer touches it (the caller synchronized).
        let _ = unsafe { cu::cuMemHostUnregister(base as *mut std::ffi::c_void) };
    }
}

/// The 4 KiB pages covering `ranges`, merged where they touch or overlap.
fn page_ranges(ranges: &[(u64, usize)]) -> Vec<(u64, usize)> {
    const PAGE: u64 = 4096;
    let mut v: Vec<(u64, u64)> = ranges
        .iter()
        .filter(|r| r.1 > 0)
        .map(|&(a, l)| (a - a % PAGE, (a + l as u64).next_multiple_of(PAGE)))
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out.into_iter().map(|(s, e)| (s, (e - s) as usize)).collect()
}

/// The UAR doorbell register as a window, for the CPU proxy to forward into.
pub fn uar_register(dv: &marrow_verbs::device::DvQueues) -> Result<marrow_mmio::Region, Mlx5Error> {
    let p = std::ptr::NonNull::new(dv.bf_reg as *mut u8)
        .ok_or_else(|| Mlx5Error::Queue("mlx5dv_qp.bf.reg is null".into()))?;
    // SAFETY: `bf.reg` is the BlueFlame register of the UAR page rdma-core
    // mapped for this context (8 bytes at least); it stays mapped while the
    // QP lives, and the proxy is stopped before the QP is destroyed.
    Ok(unsafe { marrow_mmio::Region::new(p, 8) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_cover_and_merge() {
        let r = page_ranges(&[(0x1010, 8), (0x1ff8, 16), (0x5000, 0x1000), (0x9000, 0), (0x4fff, 1)]);
        assert_eq!(r, vec![(0x1000, 0x2000), (0x4000, 0x2000)]);
    }

    #[test]
    fn a_refused_uar_mapping_falls_back_to_the_proxy_and_says_why() {
        let (m, why) =
            mode_after(&Err(Mlx5Error::Cuda("cuMemHostRegister(UAR, IOMEMORY): CUDA_ERROR_NOT_PERMITTED".into())));
        assert_eq!(m, DoorbellMode::CpuProxy);
        assert!(why.contains("NOT_PERMITTED") && why.contains("PeerMappingOverride=1"), "{why}");
        assert_eq!(mode_after(&Ok(0x7f00_0000_0800)).0, DoorbellMode::GpuDoorbell);
        let (m, why) = mode_after(&Err(Mlx5Error::Cuda("DriverError(CUDA_ERROR_INVALID_VALUE)".into())));
        assert_eq!(m, DoorbellMode::CpuProxy);
        assert!(!why.contains("PeerMappingOverride"), "{why}");
    }
}
