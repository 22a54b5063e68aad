//! libibverbs.so.1 and libmlx5.so.1, opened with `dlopen` at run time, so
//! marrow builds and runs on machines without rdma-core and says what is
//! missing when asked for the mlx5 backend.
//!
//! Only exported symbols are looked up (`nm -D libibverbs.so.1`). Many
//! `ibv_*` names in `verbs.h` are `static inline` wrappers over a provider's
//! ops table (`ibv_post_send`, `ibv_poll_cq`, the `ibv_query_port` macro);
//! marrow does not need them: the device code posts and polls itself, and
//! the exported `ibv_query_port` (IBVERBS_1.1) serves the port query.

use crate::VerbsError;
use crate::ffi::*;
use core::ffi::{c_char, c_int, c_void};

/// Environment variable naming the libibverbs to open (default `libibverbs.so.1`).
pub const ENV_IBVERBS: &str = "MARROW_IBVERBS_LIB";
/// Environment variable naming the libmlx5 to open (default `libmlx5.so.1`).
pub const ENV_MLX5: &str = "MARROW_MLX5_LIB";

macro_rules! fns {
    ($name:ident { $($f:ident : fn($($a:ty),*) $(-> $r:ty)?),* $(,)? }) => {
        /// Function pointers looked up in the library.
        #[allow(missing_docs)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name { $(pub $f: unsafe extern "C" fn($($a),*) $(-> $r)?),* }
        impl $name {
            fn load(lib: &libloading::Library, path: &str) -> Result<Self, VerbsError> {
                Ok($name { $($f: {
                    // SAFETY: the declared signature is the one in rdma-core's
                    // verbs.h / mlx5dv.h for this exported symbol; the pointer
                    // is used only while `lib` (kept in `Verbs`) stays loaded.
                    let s = unsafe { lib.get::<unsafe extern "C" fn($($a),*) $(-> $r)?>(concat!(stringify!($f), "\0").as_bytes()) };
                    *s.map_err(|e| VerbsError::SymbolMissing { lib: path.to_string(), symbol: stringify!($f), detail: e.to_string() })?
                }),* })
            }
        }
    };
}

fns!(IbvFns {
    ibv_get_device_list: fn(*mut c_int) -> *mut *mut c_void,
    ibv_free_device_list: fn(*mut *mut c_void),
    ibv_get_device_name: fn(*mut c_void) -> *const c_char,
    ibv_open_device: fn(*mut c_void) -> *mut c_void,
    ibv_close_device: fn(*mut c_void) -> c_int,
    ibv_alloc_pd: fn(*mut c_void) -> *mut c_void,
    ibv_dealloc_pd: fn(*mut c_void) -> c_int,
    ibv_create_cq: fn(*mut c_void, c_int, *mut c_void, *mut c_void, c_int) -> *mut c_void,
    ibv_destroy_cq: fn(*mut c_void) -> c_int,
    ibv_create_qp: fn(*mut c_void, *mut ibv_qp_init_attr) -> *mut c_void,
    ibv_destroy_qp: fn(*mut c_void) -> c_int,
    ibv_modify_qp: fn(*mut c_void, *mut ibv_qp_attr, c_int) -> c_int,
    ibv_reg_mr: fn(*mut c_void, *mut c_void, usize, c_int) -> *mut ibv_mr,
    ibv_dereg_mr: fn(*mut ibv_mr) -> c_int,
    ibv_query_port: fn(*mut c_void, u8, *mut ibv_port_attr) -> c_int,
    ibv_query_gid: fn(*mut c_void, u8, c_int, *mut ibv_gid) -> c_int,
});

fns!(Mlx5Fns {
    mlx5dv_is_supported: fn(*mut c_void) -> bool,
    mlx5dv_open_device: fn(*mut c_void, *mut mlx5dv_context_attr) -> *mut c_void,
    mlx5dv_init_obj: fn(*mut mlx5dv_obj, u64) -> c_int,
    mlx5dv_devx_umem_reg: fn(*mut c_void, *mut c_void, usize, u32) -> *mut mlx5dv_devx_umem,
    mlx5dv_devx_umem_dereg: fn(*mut mlx5dv_devx_umem) -> c_int,
    mlx5dv_devx_obj_create: fn(*mut c_void, *const c_void, usize, *mut c_void, usize) -> *mut c_void,
    mlx5dv_devx_obj_modify: fn(*mut c_void, *const c_void, usize, *mut c_void, usize) -> c_int,
    mlx5dv_devx_obj_destroy: fn(*mut c_void) -> c_int,
    mlx5dv_devx_alloc_uar: fn(*mut c_void, u32) -> *mut mlx5dv_devx_uar,
    mlx5dv_devx_free_uar: fn(*mut mlx5dv_devx_uar),
    mlx5dv_devx_query_eqn: fn(*mut c_void, u32, *mut u32) -> c_int,
});

/// Symbols newer than the oldest rdma-core marrow accepts: looked up, not required.
#[derive(Clone, Copy, Debug)]
pub struct Optional {
    /// `ibv_reg_dmabuf_mr` (IBVERBS_1.12, rdma-core 34): GPU memory by dma-buf.
    pub ibv_reg_dmabuf_mr: Option<unsafe extern "C" fn(*mut c_void, u64, usize, u64, c_int, c_int) -> *mut ibv_mr>,
    /// `mlx5dv_devx_umem_reg_ex` (MLX5_1.19, rdma-core 35): UMEMs over a dma-buf.
    pub mlx5dv_devx_umem_reg_ex:
        Option<unsafe extern "C" fn(*mut c_void, *mut mlx5dv_devx_umem_in) -> *mut mlx5dv_devx_umem>,
}

/// rdma-core, loaded.
#[derive(Debug)]
pub struct Verbs {
    /// libibverbs functions.
    pub ibv: IbvFns,
    /// libmlx5 (mlx5dv) functions.
    pub mlx5: Mlx5Fns,
    /// Optional functions.
    pub opt: Optional,
    /// Paths opened, for messages.
    pub paths: (String, String),
    _libs: (libloading::Library, libloading::Library),
}

fn open(path: &str, package: &'static str) -> Result<libloading::Library, VerbsError> {
    // SAFETY: loading rdma-core runs its ELF constructors, which only
    // register providers; nothing else runs at load time.
    unsafe { libloading::Library::new(path) }.map_err(|e| VerbsError::LibraryMissing {
        lib: path.to_string(),
        package,
        detail: e.to_string(),
    })
}

impl Verbs {
    /// Open libibverbs and libmlx5 (names from [`ENV_IBVERBS`] and [`ENV_MLX5`]
    /// when set) and look up every symbol marrow calls.
    pub fn load() -> Result<Verbs, VerbsError> {
        let ibv_path = std::env::var(ENV_IBVERBS).unwrap_or_else(|_| "libibverbs.so.1".into());
        let mlx5_path = std::env::var(ENV_MLX5).unwrap_or_else(|_| "libmlx5.so.1".into());
        Self::load_from(&ibv_path, &mlx5_path)
    }

    /// Open the two libraries by these names or paths.
    pub fn load_from(ibv_path: &str, mlx5_path: &str) -> Result<Verbs, VerbsError> {
        let (ibv_path, mlx5_path) = (ibv_path.to_string(), mlx5_path.to_string());
        let ibv_lib = open(&ibv_path, "libibverbs1")?;
        let mlx5_lib = open(&mlx5_path, "ibverbs-providers")?;
        let ibv = IbvFns::load(&ibv_lib, &ibv_path)?;
        let mlx5 = Mlx5Fns::load(&mlx5_lib, &mlx5_path)?;
        // SAFETY: signatures as declared in verbs.h (ibv_reg_dmabuf_mr) and
        // mlx5dv.h (mlx5dv_devx_umem_reg_ex); kept only while the libraries live.
        let opt = unsafe {
            Optional {
                ibv_reg_dmabuf_mr: ibv_lib.get(b"ibv_reg_dmabuf_mr\0").ok().map(|s: libloading::Symbol<_>| *s),
                mlx5dv_devx_umem_reg_ex: mlx5_lib
                    .get(b"mlx5dv_devx_umem_reg_ex\0")
                    .ok()
                    .map(|s: libloading::Symbol<_>| *s),
            }
        };
        Ok(Verbs { ibv, mlx5, opt, paths: (ibv_path, mlx5_path), _libs: (ibv_lib, mlx5_lib) })
    }

    /// Names of the RDMA devices libibverbs lists, each with whether mlx5dv
    /// drives it.
    pub fn devices(&self) -> Result<Vec<(String, bool)>, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: ibv_get_device_list writes the count into `n` and returns a
        // NULL-terminated array of `n` devices, or NULL with errno set.
        let list = unsafe { (self.ibv.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            return Err(list_failed(std::io::Error::last_os_error()));
        }
        let mut out = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n, the array's length; each entry is a valid device
            // until ibv_free_device_list below, and its name a C string.
            unsafe {
                let dev = *list.add(i);
                let name = std::ffi::CStr::from_ptr((self.ibv.ibv_get_device_name)(dev)).to_string_lossy().into_owned();
                out.push((name, (self.mlx5.mlx5dv_is_supported)(dev)));
            }
        }
        // SAFETY: `list` came from ibv_get_device_list and is freed once.
        unsafe { (self.ibv.ibv_free_device_list)(list) };
        Ok(out)
    }
}

/// libibverbs alone, for a device of any provider (the verbs proxy):
/// rxe, EFA, eRDMA and the rest have no libmlx5 to load.
#[derive(Debug)]
pub struct Ibverbs {
    /// libibverbs functions.
    pub ibv: IbvFns,
    /// `ibv_reg_dmabuf_mr`, when this rdma-core has it.
    pub reg_dmabuf: Option<unsafe extern "C" fn(*mut c_void, u64, usize, u64, c_int, c_int) -> *mut ibv_mr>,
    /// Path opened, for messages.
    pub path: String,
    _lib: libloading::Library,
}

impl Ibverbs {
    /// Open libibverbs ([`ENV_IBVERBS`] names another) and look up the
    /// exported functions the proxy calls.
    pub fn load() -> Result<Ibverbs, VerbsError> {
        let path = std::env::var(ENV_IBVERBS).unwrap_or_else(|_| "libibverbs.so.1".into());
        let lib = open(&path, "libibverbs1")?;
        let ibv = IbvFns::load(&lib, &path)?;
        // SAFETY: the signature of verbs.h's ibv_reg_dmabuf_mr; kept only while `lib` lives.
        let reg_dmabuf = unsafe { lib.get(b"ibv_reg_dmabuf_mr\0").ok().map(|s: libloading::Symbol<_>| *s) };
        Ok(Ibverbs { ibv, reg_dmabuf, path, _lib: lib })
    }
}

/// `ibv_get_device_list` returned NULL. ENOSYS is what a machine without
/// the kernel's uverbs interface gets (libibverbs finds no
/// `/sys/class/infiniband_verbs`): that is "no RDMA device", not a bug.
pub fn list_failed(err: std::io::Error) -> VerbsError {
    if err.raw_os_error() == Some(38) {
        VerbsError::NoDevice(format!(
            "ibv_get_device_list failed with ENOSYS (no kernel uverbs: /sys/class/infiniband_verbs is absent); {}",
            crate::probe::no_device_reason(std::path::Path::new("/sys"))
        ))
    } else {
        VerbsError::Call { call: "ibv_get_device_list", err }
    }
}
