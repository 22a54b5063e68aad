//! Running the device code on a GPU: cudarc with dynamic loading, so marrow
//! builds and its CPU tests run where no CUDA exists; the kernels
//! (`kernels/gpu/marrow_kernels.cu` over `marrow/device.h`) are compiled at
//! run time by the machine's own NVRTC, for its own architecture, and the
//! PTX is kept for the next run with the same inputs ([`crate::kernel_cache`]).
//!
//! The softnic's rings, doorbell records, UAR pages and CQs and the PE
//! buffers are shared host memory (memfd); the GPU reaches them through
//! `cuMemHostRegister` (DEVICEMAP | PORTABLE), as NVSHMEM maps NIC buffers
//! that live in host memory (docs/SOURCES.md §2.5).

use crate::TransportError;
use crate::kernel_cache::{self, Kept, KernelOrigin, KeyInputs};
use cudarc::driver::sys as cu;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};
use cudarc::nvrtc::{CompileOptions, Ptx};
use marrow_mmio::Region;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The device code, embedded so the binary needs no source tree at run time.
const SOURCES: &[(&str, &str)] = &[
    ("marrow/device.h", include_str!("../../../kernels/include/marrow/device.h")),
    ("marrow/channel.h", include_str!("../../../kernels/include/marrow/channel.h")),
    ("marrow/cq.h", include_str!("../../../kernels/include/marrow/cq.h")),
    ("marrow/encoder.h", include_str!("../../../kernels/include/marrow/encoder.h")),
    ("marrow/post_shared.h", include_str!("../../../kernels/include/marrow/post_shared.h")),
    ("marrow/post_exclusive.h", include_str!("../../../kernels/include/marrow/post_exclusive.h")),
    ("marrow/p2p.h", include_str!("../../../kernels/include/marrow/p2p.h")),
    ("marrow/platform.h", include_str!("../../../kernels/include/marrow/platform.h")),
    ("marrow/barriers.h", include_str!("../../../kernels/include/marrow/barriers.h")),
    ("marrow/group.h", include_str!("../../../kernels/include/marrow/group.h")),
    ("marrow/copy.h", include_str!("../../../kernels/include/marrow/copy.h")),
    ("marrow/generated/mlx5.h", include_str!("../../../kernels/include/marrow/generated/mlx5.h")),
    ("marrow/generated/gcrb.h", include_str!("../../../kernels/include/marrow/generated/gcrb.h")),
];
const KERNELS: &str = include_str!("../../../kernels/gpu/marrow_kernels.cu");

/// The device code's tuning knobs from `MARROW_NVRTC_DEFINE`
/// (`NAME=VALUE,NAME=VALUE`): `-D` options for NVRTC, so one binary can
/// measure a knob's settings side by side (kernels/README.md lists them).
/// Only `MARROW_` names with plain values are taken, so the variable cannot
/// smuggle other compiler options in.
fn tuning_defines(var: Option<&str>) -> Result<Vec<String>, TransportError> {
    let Some(var) = var.filter(|v| !v.trim().is_empty()) else { return Ok(Vec::new()) };
    var.split(',')
        .map(|d| {
            let d = d.trim();
            let (name, value) = d.split_once('=').unwrap_or((d, "1"));
            let plain = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if name.starts_with("MARROW_") && plain(name) && plain(value) {
                Ok(format!("-D{name}={value}"))
            } else {
                Err(TransportError::Config(format!(
                    "MARROW_NVRTC_DEFINE: {d:?} is not MARROW_NAME=VALUE (letters, digits, _)"
                )))
            }
        })
        .collect()
}

/// NVRTC's options for the kernels, other than the architecture and the
/// include path.
fn nvrtc_options() -> Result<Vec<String>, TransportError> {
    let mut options = vec!["--std=c++17".to_string()];
    options.extend(tuning_defines(std::env::var("MARROW_NVRTC_DEFINE").ok().as_deref())?);
    Ok(options)
}

/// NVRTC's (major, minor) version.
fn nvrtc_version() -> Result<(i32, i32), TransportError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers; the library is loaded (callers
    // checked `is_culib_present`).
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(cuda)?;
    Ok((major, minor))
}

/// The cache key of the kernels for `arch` with `options`.
fn kernels_key(arch: &str, options: &[String]) -> Result<String, TransportError> {
    Ok(KeyInputs { nvrtc: nvrtc_version()?, arch, options, sources: SOURCES, kernels: KERNELS }.key())
}

/// Compile the kernels for `arch` with NVRTC alone (no driver needed).
/// Returns the PTX and NVRTC's time.
fn compile(arch: &str, options: Vec<String>) -> Result<(String, f64), TransportError> {
    let dir = std::env::temp_dir().join(format!("marrow-kernels-{}-{arch}", std::process::id()));
    let written = SOURCES.iter().try_for_each(|(path, text)| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(&dir))?;
        std::fs::write(p, text)
    });
    let t = std::time::Instant::now();
    let ptx = written.map_err(TransportError::from).and_then(|()| {
        let opts = CompileOptions {
            arch: Some(Box::leak(arch.to_string().into_boxed_str())),
            include_paths: vec![dir.display().to_string()],
            options,
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(cuda)
    });
    let secs = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    Ok((ptx?.to_src(), secs))
}

/// The kernels for `ctx`'s GPU: from the cache when it holds PTX the
/// driver takes, else compiled, loaded, then kept (kernel_cache.rs).
fn load_kernels(ctx: &Arc<CudaContext>, arch: &str) -> Result<(Arc<CudaModule>, KernelOrigin), TransportError> {
    let options = nvrtc_options()?;
    let key = kernels_key(arch, &options)?;
    let dir = kernel_cache::dir();
    let mut refused = None;
    if let Some(d) = dir.as_deref()
        && let Some(ptx) = kernel_cache::load(d, &key)
    {
        match ctx.load_module(Ptx::from_src(ptx)) {
            Ok(module) => return Ok((module, KernelOrigin::Loaded(kernel_cache::file(d, &key)))),
            Err(e) => refused = Some(format!("{e:?}")),
        }
    }
    let (ptx, secs) = compile(arch, options)?;
    let module = ctx.load_module(Ptx::from_src(ptx.clone())).map_err(cuda)?;
    let kept = match dir {
        None => Kept::Off,
        Some(d) => match kernel_cache::store(&d, &key, &ptx) {
            Ok(file) => {
                kernel_cache::prune(&d, kernel_cache::KEEP, &file);
                Kept::At(file)
            }
            Err(e) => Kept::Failed(format!("{}: {e}", d.display())),
        },
    };
    Ok((module, KernelOrigin::Compiled { secs, kept, refused }))
}

/// Compile the kernels for `arch` (`sm_90`) with NVRTC alone and keep the
/// PTX in `dir`, as a GPU run on this NVRTC would find it: a cache filled
/// where no GPU is. Returns the file and NVRTC's time. The driver has not
/// checked this PTX; one that refuses it compiles and replaces it.
pub fn precompile(arch: &str, dir: &Path) -> Result<(PathBuf, f64), TransportError> {
    // SAFETY: only probes whether the library can be loaded.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(TransportError::Unavailable("libnvrtc.so (the CUDA runtime compiler)"));
    }
    let options = nvrtc_options()?;
    let key = kernels_key(arch, &options)?;
    let (ptx, secs) = compile(arch, options)?;
    Ok((kernel_cache::store(dir, &key, &ptx)?, secs))
}

/// A GPU with marrow's kernels loaded.
#[derive(Debug)]
pub struct Gpu {
    /// The context.
    pub ctx: Arc<CudaContext>,
    /// The stream kernels run on.
    pub stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    /// `sm_XY` the kernels were compiled for.
    pub arch: String,
    /// Device name.
    pub name: String,
    /// Whether the kernels were compiled now or loaded from the cache.
    pub kernels: KernelOrigin,
}

pub(crate) fn cuda(e: impl std::fmt::Debug) -> TransportError {
    TransportError::Cuda(format!("{e:?}"))
}

impl Gpu {
    /// Open GPU 0 and compile the kernels with its NVRTC. Without a driver
    /// or NVRTC this returns [`TransportError::Unavailable`] naming the library.
    pub fn open() -> Result<Gpu, TransportError> {
        Self::open_ordinal(0)
    }

    /// How many GPUs the driver sees (an error without a driver).
    pub fn count() -> Result<usize, TransportError> {
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { cu::is_culib_present() } {
            return Err(TransportError::Unavailable("libcuda.so (no NVIDIA driver), so no GPU path"));
        }
        Ok(CudaContext::device_count().map_err(cuda)?.max(0) as usize)
    }

    /// Succeeds when the driver and NVRTC load and at least `n` GPUs exist;
    /// otherwise [`TransportError::Unavailable`] names what is missing (so a
    /// command can tell missing hardware from a failed check).
    pub fn require(n: usize) -> Result<(), TransportError> {
        let have = Self::count()?;
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(TransportError::Unavailable("libnvrtc.so (the CUDA runtime compiler)"));
        }
        match have {
            have if have >= n => Ok(()),
            0 => Err(TransportError::Unavailable("a GPU: the driver sees none")),
            1 => Err(TransportError::Unavailable("a second GPU: the driver sees one")),
            _ => Err(TransportError::Unavailable("more GPUs than the driver sees")),
        }
    }

    /// Open GPU `ordinal` (CUDA's numbering) and compile the kernels for it.
    pub fn open_ordinal(ordinal: usize) -> Result<Gpu, TransportError> {
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { cu::is_culib_present() } {
            return Err(TransportError::Unavailable("libcuda.so (no NVIDIA driver), so no GPU path"));
        }
        // SAFETY: as above, for NVRTC.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(TransportError::Unavailable("libnvrtc.so (the CUDA runtime compiler)"));
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda)?;
        let (major, minor) = ctx.compute_capability().map_err(cuda)?;
        let arch = format!("sm_{major}{minor}");
        let name = ctx.name().map_err(cuda)?;
        let (module, kernels) = load_kernels(&ctx, &arch)?;
        // Kernels run on a non-blocking stream: a copy the softnic makes on
        // another stream while a kernel waits for that very copy's CQE must
        // not be serialized behind the kernel (the legacy default stream
        // would).
        let stream = ctx.new_stream().map_err(cuda)?;
        Ok(Gpu { ctx, stream, module, arch, name, kernels })
    }

    /// A kernel by name.
    pub fn function(&self, name: &str) -> Result<CudaFunction, TransportError> {
        self.module.load_function(name).map_err(cuda)
    }

    /// Map `region` (host memory) into the GPU. marrow hands the device the
    /// host's own addresses (the GCRB holds them), so the mapping must be
    /// identity, which unified addressing gives on 64-bit Linux; anything
    /// else is reported rather than translated.
    pub fn register(&self, region: &Region) -> Result<(), TransportError> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        let ptr = region.base_addr() as *mut std::ffi::c_void;
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `ptr..ptr+len` is a live shared mapping (the Region's
        // contract) that stays mapped while the GPU uses it: the World that
        // owns it outlives every kernel launched on it.
        unsafe { cu::cuMemHostRegister_v2(ptr, region.len(), flags) }.result().map_err(cuda)?;
        let mut dptr: cu::CUdeviceptr = 0;
        // SAFETY: `ptr` was just registered; `dptr` is a valid out-pointer.
        unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dptr, ptr, 0) }.result().map_err(cuda)?;
        if dptr as usize != region.base_addr() {
            return Err(TransportError::Missing(
                "identity host/device addresses for registered memory (this GPU maps them elsewhere)",
            ));
        }
        Ok(())
    }
}

impl Gpu {
    /// Undo [`Gpu::register`] (before the memory is unmapped, so that a later
    /// mapping at the same address can be registered again).
    pub fn unregister(&self, region: &Region) -> Result<(), TransportError> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        // SAFETY: unregisters a range `register` registered; the GPU no
        // longer uses it (callers synchronize first).
        unsafe { cu::cuMemHostUnregister(region.base_addr() as *mut std::ffi::c_void) }.result().map_err(cuda)
    }

    /// `cuMemcpy` of `len` bytes between two registered host regions (the
    /// copy engine, unified addresses): the floor for put bandwidth.
    pub fn memcpy(&self, dst: &Region, src: &Region, len: usize) -> Result<std::time::Duration, TransportError> {
        if len > dst.len() || len > src.len() {
            return Err(TransportError::Window(marrow_mmio::OutOfBounds {
                offset: 0,
                len,
                size: dst.len().min(src.len()),
            }));
        }
        self.ctx.bind_to_thread().map_err(cuda)?;
        let t = std::time::Instant::now();
        // SAFETY: both ranges are registered host memory of at least `len`
        // bytes (checked), addressed by their unified addresses.
        unsafe { cu::cuMemcpy(dst.base_addr() as u64, src.base_addr() as u64, len) }.result().map_err(cuda)?;
        self.ctx.synchronize().map_err(cuda)?;
        Ok(t.elapsed())
    }
}

/// A timed loop of one GPU thread (blocking puts, ping-pongs): its result
/// code, the loop's total on the GPU clock, and each iteration's ns (empty
/// when the loop failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed {
    /// The device code's result: 0, or a device error code.
    pub rc: i32,
    /// The whole loop, in ns of the GPU clock.
    pub total_ns: u64,
    /// Each iteration, in ns of the GPU clock.
    pub each_ns: Vec<u64>,
}

/// A timed loop's device outputs ([`Gpu::timed_outputs`]).
pub(crate) struct TimedOutputs {
    pub(crate) rc: CudaSlice<i32>,
    pub(crate) ns: CudaSlice<u64>,
    pub(crate) each: CudaSlice<u64>,
    iters: u32,
}

/// Where a ping-pong runs (registered host addresses): the GPU's word,
/// and the ring of `walk` 64-byte slots it reads its answers from, answer
/// i in slot (`first` + i) % `walk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingPongRing {
    /// The word the GPU writes i to.
    pub ping: u64,
    /// The first slot of the ring.
    pub pong: u64,
    /// Slots in the ring.
    pub walk: u32,
    /// Where the walk starts: answer 1 is in slot `first` + 1.
    pub first: u32,
}

/// A launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
}

impl Grid {
    /// One thread.
    pub const ONE: Grid = Grid { blocks: 1, threads: 1 };

    /// Threads in all.
    pub fn size(&self) -> usize {
        (self.blocks * self.threads) as usize
    }

    pub(crate) fn config(&self) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: (self.blocks, 1, 1),
            block_dim: (self.threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The kernels of the form `(page, pe, len, iters, rc[])`.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwKernel {
    /// `marrow_put_kernel`: every thread puts.
    Put,
    /// `marrow_put_warp_kernel`: whole warps put together.
    PutWarp,
    /// `marrow_get_kernel`: every thread gets.
    Get,
}

impl RwKernel {
    /// The kernel's name.
    pub fn name(self) -> &'static str {
        match self {
            RwKernel::Put => "marrow_put_kernel",
            RwKernel::PutWarp => "marrow_put_warp_kernel",
            RwKernel::Get => "marrow_get_kernel",
        }
    }
}

use cudarc::driver::PushKernelArg;

impl Gpu {
    /// Run `k` on `grid`: each thread moves `iters` messages of `len` bytes
    /// between its slots of the local window and of PE `pe`. Returns every
    /// thread's result code.
    pub fn rw(
        &self,
        k: RwKernel,
        page: u64,
        pe: u32,
        len: u32,
        iters: u32,
        grid: Grid,
    ) -> Result<Vec<i32>, TransportError> {
        let f = self.function(k.name())?;
        let mut rc = self.stream.alloc_zeros::<i32>(grid.size()).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&len).arg(&iters).arg(&mut rc);
        // SAFETY: the arguments are those of the kernel's signature in
        // marrow_kernels.cu (u8*, u32, u32, u32, int*); `page` is a GCRB
        // registered with `register`, whose rings the kernel reaches.
        unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.stream.clone_dtoh(&rc).map_err(cuda)
    }

    /// `marrow_fetch_add_kernel`: every thread adds 1 to PE `pe`'s word at
    /// `roff` `iters` times. Returns the result codes and every fetched value.
    pub fn fetch_add(
        &self,
        page: u64,
        pe: u32,
        roff: u64,
        iters: u32,
        result_base: u64,
        grid: Grid,
    ) -> Result<(Vec<i32>, Vec<u64>), TransportError> {
        let f = self.function("marrow_fetch_add_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(grid.size()).map_err(cuda)?;
        let mut olds = self.stream.alloc_zeros::<u64>(grid.size() * iters as usize).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&roff).arg(&iters).arg(&result_base).arg(&mut olds).arg(&mut rc);
        // SAFETY: matches marrow_fetch_add_kernel (u8*, u32, u64, u32, u64, u64*, int*).
        unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?, self.stream.clone_dtoh(&olds).map_err(cuda)?))
    }

    /// `marrow_lone_lane_kernel` on one warp of an exclusive channel: the
    /// warp's put-and-quiet result per lane, then lane 0's lone put (33 codes).
    pub fn lone_lane(&self, page: u64, pe: u32) -> Result<Vec<i32>, TransportError> {
        let f = self.function("marrow_lone_lane_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(33).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&mut rc);
        // SAFETY: matches marrow_lone_lane_kernel (u8*, u32, int*); rc holds 33 ints.
        unsafe { b.launch(Grid { blocks: 1, threads: 32 }.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.stream.clone_dtoh(&rc).map_err(cuda)
    }

    /// `marrow_compare_swap_kernel` on one thread: (result code, old value).
    pub fn compare_swap(
        &self,
        page: u64,
        pe: u32,
        roff: u64,
        compare: u64,
        swap: u64,
        result_loff: u64,
    ) -> Result<(i32, u64), TransportError> {
        let f = self.function("marrow_compare_swap_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut old = self.stream.alloc_zeros::<u64>(1).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&roff).arg(&compare).arg(&swap).arg(&result_loff).arg(&mut old).arg(&mut rc);
        // SAFETY: matches marrow_compare_swap_kernel (u8*, u32, u64, u64, u64, u64, u64*, int*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?[0], self.stream.clone_dtoh(&old).map_err(cuda)?[0]))
    }

    /// `marrow_put_latency_kernel`: one thread, `iters` blocking 8-byte puts.
    pub fn put_latency(&self, page: u64, pe: u32, iters: u32) -> Result<Timed, TransportError> {
        let f = self.function("marrow_put_latency_kernel")?;
        let mut t = self.timed_outputs(iters)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&iters).arg(&mut t.ns).arg(&mut t.each).arg(&mut t.rc);
        // SAFETY: matches marrow_put_latency_kernel (u8*, u32, u32, u64*, u64*, int*); `each` holds `iters` values.
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.timed(&t)
    }

    /// Where a timed loop of `iters` iterations writes its code, its total
    /// and each iteration's ns, zeroed.
    pub(crate) fn timed_outputs(&self, iters: u32) -> Result<TimedOutputs, TransportError> {
        Ok(TimedOutputs {
            rc: self.stream.alloc_zeros::<i32>(1).map_err(cuda)?,
            ns: self.stream.alloc_zeros::<u64>(1).map_err(cuda)?,
            each: self.stream.alloc_zeros::<u64>(iters.max(1) as usize).map_err(cuda)?,
            iters,
        })
    }

    /// A timed loop's results, once its kernel is done: iterations after a
    /// failure are left out.
    pub(crate) fn timed(&self, t: &TimedOutputs) -> Result<Timed, TransportError> {
        let rc = self.stream.clone_dtoh(&t.rc).map_err(cuda)?[0];
        let total_ns = self.stream.clone_dtoh(&t.ns).map_err(cuda)?[0];
        let mut each_ns = self.stream.clone_dtoh(&t.each).map_err(cuda)?;
        each_ns.truncate(if rc == 0 { t.iters as usize } else { 0 });
        Ok(Timed { rc, total_ns, each_ns })
    }

    /// `marrow_post_rate_kernel` on `grid`: every thread posts `iters` 8-byte
    /// `put_nbi` (whole warps together with `warp`) on channel `pages[warp
    /// index % pages.len()]`, then `quiet`. Returns every thread's result
    /// code and the posting span in GPU-clock ns.
    pub fn post_rate(
        &self,
        pages: &[u64],
        pe: u32,
        iters: u32,
        warp: bool,
        grid: Grid,
    ) -> Result<(Vec<i32>, u64), TransportError> {
        let f = self.function("marrow_post_rate_kernel")?;
        if pages.is_empty() {
            return Err(TransportError::Missing("a channel to post on"));
        }
        let mut rc = self.stream.alloc_zeros::<i32>(grid.size()).map_err(cuda)?;
        let mut span = self.stream.clone_htod(&[u64::MAX, 0]).map_err(cuda)?;
        let dpages = self.stream.clone_htod(pages).map_err(cuda)?;
        let (npages, warp) = (pages.len() as u32, u32::from(warp));
        let mut b = self.stream.launch_builder(&f);
        b.arg(&dpages).arg(&npages).arg(&pe).arg(&iters).arg(&warp).arg(&mut span).arg(&mut rc);
        // SAFETY: matches marrow_post_rate_kernel (const u64*, u32, u32, u32, u32, u64*, int*);
        // every page is a GCRB whose rings are registered host memory.
        unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        let span = self.stream.clone_dtoh(&span).map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?, span[1].saturating_sub(span[0])))
    }

    /// `marrow_store_floor_kernel` on `grid`: the stores and fences of a post
    /// (64 B WQE, doorbell record, doorbell) into `ring` from slot `first`,
    /// `dbrec` and `db` without the protocol, the fences, doorbell record
    /// and doorbell once per `ring_every` WQEs (1: every post; 32: lazy
    /// doorbells): the span in GPU-clock ns.
    #[allow(clippy::too_many_arguments)]
    pub fn store_floor(
        &self,
        ring: u64,
        wqebbs: u32,
        first: u32,
        dbrec: u64,
        db: u64,
        iters: u32,
        ring_every: u32,
        grid: Grid,
    ) -> Result<u64, TransportError> {
        let f = self.function("marrow_store_floor_kernel")?;
        let mut span = self.stream.clone_htod(&[u64::MAX, 0]).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&ring).arg(&wqebbs).arg(&first).arg(&dbrec).arg(&db).arg(&iters).arg(&ring_every).arg(&mut span);
        // SAFETY: matches marrow_store_floor_kernel (u8*, u32, u32, u32*, u64*, u32, u32, u64*);
        // `ring`, `dbrec` and `db` are registered host memory.
        unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        let span = self.stream.clone_dtoh(&span).map_err(cuda)?;
        Ok(span[1].saturating_sub(span[0]))
    }

    /// `marrow_post_profile_kernel` on one thread: ns per post for the floor
    /// plus each protocol step in turn (see the kernel). `heads` is 3
    /// words of GPU memory it may scribble on.
    pub fn post_profile(
        &self,
        ring: u64,
        wqebbs: u32,
        dbrec: u64,
        db: u64,
        iters: u32,
    ) -> Result<Vec<u64>, TransportError> {
        let f = self.function("marrow_post_profile_kernel")?;
        let mut heads = self.stream.alloc_zeros::<u64>(3).map_err(cuda)?;
        let mut ns = self.stream.alloc_zeros::<u64>(6).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        let timeout_ns = 1_000_000_000u64;
        b.arg(&ring).arg(&wqebbs).arg(&dbrec).arg(&db).arg(&mut heads).arg(&iters).arg(&timeout_ns).arg(&mut ns);
        // SAFETY: matches marrow_post_profile_kernel (u8*, u32, u32*, u64*, u64*, u32, u64, u64*);
        // ring, dbrec and db are registered host memory, heads a device allocation.
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.stream.clone_dtoh(&ns).map_err(cuda)
    }

    /// `marrow_pingpong_kernel`: the GPU writes i (1 to `iters`) to
    /// `ring.ping`, waits for i in slot (`ring.first` + i) % `ring.walk` of
    /// the ring of 64-byte slots at `ring.pong`, with release/acquire or,
    /// `lean`, plain system-scope accesses.
    pub fn pingpong(
        &self,
        ring: PingPongRing,
        iters: u32,
        timeout_ns: u64,
        lean: bool,
    ) -> Result<Timed, TransportError> {
        let PingPongRing { ping, pong, walk, first } = ring;
        if walk == 0 {
            return Err(TransportError::Config("a ping-pong ring needs at least one slot".into()));
        }
        let lean = u32::from(lean);
        let f = self.function("marrow_pingpong_kernel")?;
        let mut t = self.timed_outputs(iters)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&ping)
            .arg(&pong)
            .arg(&walk)
            .arg(&first)
            .arg(&iters)
            .arg(&timeout_ns)
            .arg(&lean)
            .arg(&mut t.ns)
            .arg(&mut t.each)
            .arg(&mut t.rc);
        // SAFETY: matches marrow_pingpong_kernel (u64*, u64*, u32, u32, u32, u64, u32, u64*, u64*, int*); `each` holds `iters` values.
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.timed(&t)
    }
}

impl Gpu {
    /// `marrow_compute_put_kernel`: `iters` rounds of compute then an 8-byte
    /// `put_nbi`, one `quiet` at the end, GPU-initiated: (result code, ns on
    /// the GPU clock: [total, in compute, in storing the result and posting]).
    pub fn compute_put(&self, page: u64, pe: u32, iters: u32, work: u32) -> Result<(i32, [u64; 3]), TransportError> {
        let f = self.function("marrow_compute_put_kernel")?;
        let mut rc = self.stream.alloc_zeros::<i32>(1).map_err(cuda)?;
        let mut ns = self.stream.alloc_zeros::<u64>(3).map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&page).arg(&pe).arg(&iters).arg(&work).arg(&mut ns).arg(&mut rc);
        // SAFETY: matches marrow_compute_put_kernel (u8*, u32, u32, u32, u64*, int*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        let ns = self.stream.clone_dtoh(&ns).map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?[0], [ns[0], ns[1], ns[2]]))
    }

    /// One launch of `marrow_compute_kernel` and a stream synchronize: the
    /// compute step of the CPU-initiated loop.
    pub fn compute_once(&self, work: u32, out: u64) -> Result<(), TransportError> {
        let f = self.function("marrow_compute_kernel")?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&work).arg(&out);
        // SAFETY: matches marrow_compute_kernel (u32, u64*); `out` is an
        // 8-byte slot of host memory registered with `register`.
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)
    }
}

/// GPU memory the softnic reaches through the GPU's copy engine, on a stream
/// of its own (a NIC would DMA it peer to peer): a data buffer for puts,
/// gets and SENDs, registered with `Hca::reg_device_mr`.
#[derive(Debug)]
pub struct GpuBuffer {
    _buf: cudarc::driver::CudaSlice<u8>,
    /// Device address of the first byte.
    pub addr: u64,
    len: usize,
    copy: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
}

impl Gpu {
    /// Allocate `len` bytes of GPU memory (zeroed) for the softnic to DMA.
    pub fn buffer(&self, len: usize) -> Result<GpuBuffer, TransportError> {
        use cudarc::driver::DevicePtr;
        let buf = self.stream.alloc_zeros::<u8>(len).map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        let addr = {
            let (p, _sync) = buf.device_ptr(&self.stream);
            p
        };
        let copy = self.ctx.new_stream().map_err(cuda)?;
        Ok(GpuBuffer { _buf: buf, addr, len, copy, ctx: self.ctx.clone() })
    }
}

impl marrow_softnic::DeviceMemory for GpuBuffer {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), String> {
        if off.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return Err(format!("{} bytes at {off:#x} outside a {:#x}-byte GPU buffer", out.len(), self.len));
        }
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: the source range is inside the allocation (checked), the
        // destination is `out`, live for the call; the stream is synchronized
        // before returning, so the copy is complete when `out` is used.
        unsafe {
            cu::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), self.addr + off as u64, out.len(), self.copy.cu_stream())
                .result()
                .map_err(|e| format!("{e:?}"))?;
            cu::cuStreamSynchronize(self.copy.cu_stream()).result().map_err(|e| format!("{e:?}"))
        }
    }

    fn write(&self, off: usize, data: &[u8]) -> Result<(), String> {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return Err(format!("{} bytes at {off:#x} outside a {:#x}-byte GPU buffer", data.len(), self.len));
        }
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: as in `read`, host to device.
        unsafe {
            cu::cuMemcpyHtoDAsync_v2(self.addr + off as u64, data.as_ptr().cast(), data.len(), self.copy.cu_stream())
                .result()
                .map_err(|e| format!("{e:?}"))?;
            cu::cuStreamSynchronize(self.copy.cu_stream()).result().map_err(|e| format!("{e:?}"))
        }
    }
}

#[cfg(test)]
mod tuning_tests {
    use super::tuning_defines;

    #[test]
    fn tuning_defines_take_marrow_names_and_refuse_anything_else() {
        assert_eq!(tuning_defines(None).unwrap(), Vec::<String>::new());
        assert_eq!(tuning_defines(Some(" ")).unwrap(), Vec::<String>::new());
        assert_eq!(
            tuning_defines(Some("MARROW_READY_BACKOFF_NS=0, MARROW_X")).unwrap(),
            ["-DMARROW_READY_BACKOFF_NS=0", "-DMARROW_X=1"]
        );
        for bad in ["READY=1", "MARROW_A=1 -I/tmp", "MARROW_A=$(x)", "MARROW_A="] {
            let e = tuning_defines(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("MARROW_NVRTC_DEFINE"), "{bad}: {e}");
        }
    }
}
