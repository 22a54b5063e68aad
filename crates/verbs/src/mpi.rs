//! libmpi, opened with `dlopen` at run time (never linked at build time), for
//! the bootstrap's all-gather under `mpirun`: rank, size and
//! `MPI_Allgather` of byte records.
//!
//! Two ABIs, told apart by a symbol:
//! - Open MPI (`libmpi.so.40`, Open MPI 4/5): `MPI_Comm` and `MPI_Datatype`
//!   are pointers to predefined global objects; `MPI_COMM_WORLD` is
//!   `&ompi_mpi_comm_world` and `MPI_BYTE` is `&ompi_mpi_byte` (Open MPI's
//!   mpi.h: `OMPI_PREDEFINED_GLOBAL(MPI_Comm, ompi_mpi_comm_world)`).
//!   Detected by `dlsym("ompi_mpi_comm_world")`.
//! - MPICH (`libmpi.so.12`, also Intel MPI and MVAPICH): handles are `int`s;
//!   Debian 12's libmpich-dev 4.0.2 `mpich/mpi.h` has `typedef int MPI_Comm;`,
//!   `#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)`, `typedef int
//!   MPI_Datatype;` and `#define MPI_BYTE ((MPI_Datatype)0x4c00010d)`.
//!
//! Only the MPI-1 calls below are used; their C signatures are the same in
//! both (MPI standard, chapter 5 and 8). `tests/mpi_bootstrap.rs` runs Open
//! MPI; the MPICH path was run by hand (Debian 12 mpich 4.0.2 unpacked,
//! `mpiexec.hydra -launcher fork -np 2 marrow-mpi-probe` with
//! `MARROW_MPI_LIB=…/libmpich.so.12`: both ranks gathered both records).

use crate::VerbsError;
use core::ffi::{c_char, c_int, c_void};

/// Environment variable naming the libmpi to open (then only it is tried).
pub const ENV_MPI_LIB: &str = "MARROW_MPI_LIB";
/// Tried in order when [`ENV_MPI_LIB`] is unset.
/// (`libmpich.so.12`: Debian's libmpich12 has no `libmpi.so.12`.)
pub const DEFAULT_LIBS: [&str; 4] = ["libmpi.so.40", "libmpi.so.12", "libmpich.so.12", "libmpi.so"];
/// MPICH's names first: what to try under MPICH/Hydra's `mpiexec` (which
/// sets `PMI_RANK`, not `OMPI_COMM_WORLD_RANK`) on a host with both MPIs.
pub const MPICH_FIRST: [&str; 4] = ["libmpi.so.12", "libmpich.so.12", "libmpi.so.40", "libmpi.so"];
/// MPICH's `MPI_COMM_WORLD` (mpich/mpi.h).
pub const MPICH_COMM_WORLD: c_int = 0x4400_0000;
/// MPICH's `MPI_BYTE` (mpich/mpi.h).
pub const MPICH_BYTE: c_int = 0x4c00_010d;
const MPI_SUCCESS: c_int = 0;

/// The calls that take a communicator or datatype, over the handle type `H`.
struct Handled<H> {
    comm_world: H,
    byte: H,
    comm_rank: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    comm_size: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    allgather: unsafe extern "C" fn(*const c_void, c_int, H, *mut c_void, c_int, H, H) -> c_int,
}

impl<H: Copy> Handled<H> {
    fn load(lib: &libloading::Library, path: &str, comm_world: H, byte: H) -> Result<Self, VerbsError> {
        Ok(Handled {
            comm_world,
            byte,
            comm_rank: sym(lib, path, "MPI_Comm_rank")?,
            comm_size: sym(lib, path, "MPI_Comm_size")?,
            allgather: sym(lib, path, "MPI_Allgather")?,
        })
    }
}

enum Abi {
    OpenMpi(Handled<*mut c_void>),
    Mpich(Handled<c_int>),
}

fn sym<T: Copy>(lib: &libloading::Library, path: &str, name: &'static str) -> Result<T, VerbsError> {
    let mut z = name.as_bytes().to_vec();
    z.push(0);
    // SAFETY: every `T` asked for here is the `extern "C"` signature of that
    // MPI function in mpi.h (with the ABI's handle type); the pointer is used
    // only while `lib` (kept in `Mpi`) stays loaded.
    let s = unsafe { lib.get::<T>(z.as_slice()) };
    s.map(|s| *s).map_err(|e| VerbsError::Bootstrap(format!("{path} has no {name} ({e}): not an MPI library")))
}

/// libmpi, loaded; [`Mpi::init`] starts it, and dropping an `Mpi` that
/// initialised MPI calls `MPI_Finalize`.
pub struct Mpi {
    /// The library opened (name or path), for messages.
    pub path: String,
    initialized: unsafe extern "C" fn(*mut c_int) -> c_int,
    init: unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char) -> c_int,
    finalized: unsafe extern "C" fn(*mut c_int) -> c_int,
    finalize: unsafe extern "C" fn() -> c_int,
    abi: Abi,
    we_initialized: bool,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("path", &self.path)
            .field("flavour", &self.flavour())
            .field("we_initialized", &self.we_initialized)
            .finish()
    }
}

fn open(path: &str) -> Result<libloading::Library, String> {
    // RTLD_GLOBAL: Open MPI's components (mca_*.so, dlopened by MPI_Init)
    // resolve symbols of libmpi/libopen-pal from the global scope; opened
    // RTLD_LOCAL they fail with "undefined symbol" (the mpi4py problem).
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
    // SAFETY: loading libmpi runs its ELF constructors, which set up
    // internal state only; MPI itself starts at MPI_Init.
    unsafe { libloading::os::unix::Library::open(Some(path), flags) }.map(libloading::Library::from).map_err(|e| {
        // libloading's Display is only "dlopen failed"; dlerror's text is the source.
        std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string())
    })
}

impl Mpi {
    /// Open libmpi: [`ENV_MPI_LIB`] when set, else [`DEFAULT_LIBS`] in order.
    pub fn load() -> Result<Mpi, VerbsError> {
        match std::env::var(ENV_MPI_LIB) {
            Ok(p) if !p.is_empty() => Self::load_from(&[p.as_str()]),
            _ => Self::load_from(&DEFAULT_LIBS),
        }
    }

    /// Open the first of `paths` that loads.
    pub fn load_from(paths: &[&str]) -> Result<Mpi, VerbsError> {
        let mut tried = Vec::new();
        for &path in paths {
            match open(path) {
                Ok(lib) => return Self::from_lib(lib, path),
                Err(e) => tried.push(e),
            }
        }
        Err(VerbsError::MpiMissing { tried: paths.join(", "), detail: tried.join("; ") })
    }

    fn from_lib(lib: libloading::Library, path: &str) -> Result<Mpi, VerbsError> {
        // SAFETY: a data symbol looked up as `*mut c_void` yields its address
        // (Open MPI's predefined objects), which is only passed back to libmpi.
        let ompi = |name: &[u8]| unsafe { lib.get::<*mut c_void>(name) }.ok().map(|s| *s);
        let abi = match (ompi(b"ompi_mpi_comm_world\0"), ompi(b"ompi_mpi_byte\0")) {
            (Some(world), Some(byte)) => Abi::OpenMpi(Handled::load(&lib, path, world, byte)?),
            (Some(_), None) => {
                return Err(VerbsError::Bootstrap(format!(
                    "{path} has ompi_mpi_comm_world but no ompi_mpi_byte: an Open MPI marrow does not know"
                )));
            }
            _ if sym::<unsafe extern "C" fn()>(&lib, path, "MPIR_Err_return_comm").is_ok()
                || sym::<unsafe extern "C" fn()>(&lib, path, "PMPI_Init").is_ok() =>
            {
                Abi::Mpich(Handled::load(&lib, path, MPICH_COMM_WORLD, MPICH_BYTE)?)
            }
            _ => {
                return Err(VerbsError::Bootstrap(format!(
                    "{path} is neither Open MPI nor MPICH (no ompi_mpi_comm_world, no PMPI_Init)"
                )));
            }
        };
        Ok(Mpi {
            path: path.to_string(),
            initialized: sym(&lib, path, "MPI_Initialized")?,
            init: sym(&lib, path, "MPI_Init")?,
            finalized: sym(&lib, path, "MPI_Finalized")?,
            finalize: sym(&lib, path, "MPI_Finalize")?,
            abi,
            we_initialized: false,
            _lib: lib,
        })
    }

    /// `"Open MPI"` or `"MPICH"`: which ABI the library has.
    pub fn flavour(&self) -> &'static str {
        match self.abi {
            Abi::OpenMpi(_) => "Open MPI",
            Abi::Mpich(_) => "MPICH",
        }
    }

    fn check(call: &str, rc: c_int) -> Result<(), VerbsError> {
        if rc == MPI_SUCCESS { Ok(()) } else { Err(VerbsError::Bootstrap(format!("{call} returned {rc}"))) }
    }

    /// `MPI_Init(NULL, NULL)` unless MPI is already initialised (by the
    /// application); only then does dropping this `Mpi` finalise it.
    pub fn init(&mut self) -> Result<(), VerbsError> {
        let mut flag: c_int = 0;
        // SAFETY: MPI_Initialized writes one int; callable before MPI_Init.
        Self::check("MPI_Initialized", unsafe { (self.initialized)(&mut flag) })?;
        if flag != 0 {
            return Ok(());
        }
        let mut done: c_int = 0;
        // SAFETY: as above; MPI_Finalized may be called at any time.
        Self::check("MPI_Finalized", unsafe { (self.finalized)(&mut done) })?;
        if done != 0 {
            return Err(VerbsError::Bootstrap(
                "MPI was already finalised in this process; it cannot start again".into(),
            ));
        }
        // SAFETY: MPI_Init accepts NULL argc/argv (MPI-2 and later).
        Self::check("MPI_Init", unsafe { (self.init)(std::ptr::null_mut(), std::ptr::null_mut()) })?;
        self.we_initialized = true;
        Ok(())
    }

    /// This process's rank in `MPI_COMM_WORLD` (after [`Mpi::init`]).
    pub fn rank(&self) -> Result<usize, VerbsError> {
        let mut r: c_int = -1;
        // SAFETY: a valid communicator handle of this ABI and one int out.
        let rc = unsafe {
            match &self.abi {
                Abi::OpenMpi(h) => (h.comm_rank)(h.comm_world, &mut r),
                Abi::Mpich(h) => (h.comm_rank)(h.comm_world, &mut r),
            }
        };
        Self::check("MPI_Comm_rank", rc)?;
        usize::try_from(r).map_err(|_| VerbsError::Bootstrap(format!("MPI_Comm_rank gave {r}")))
    }

    /// The number of ranks in `MPI_COMM_WORLD` (after [`Mpi::init`]).
    pub fn size(&self) -> Result<usize, VerbsError> {
        let mut s: c_int = -1;
        // SAFETY: a valid communicator handle of this ABI and one int out.
        let rc = unsafe {
            match &self.abi {
                Abi::OpenMpi(h) => (h.comm_size)(h.comm_world, &mut s),
                Abi::Mpich(h) => (h.comm_size)(h.comm_world, &mut s),
            }
        };
        Self::check("MPI_Comm_size", rc)?;
        usize::try_from(s)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| VerbsError::Bootstrap(format!("MPI_Comm_size gave {s}")))
    }

    /// `MPI_Allgather` of `n` bytes from `send` into `recv` (`n * size` bytes).
    fn allgather_raw(&self, send: &[u8], recv: &mut [u8]) -> Result<(), VerbsError> {
        let n = c_int::try_from(send.len()).map_err(|_| {
            VerbsError::Bootstrap(format!("record of {} bytes is too large for MPI_Allgather", send.len()))
        })?;
        let size = self.size()?;
        if recv.len() != send.len() * size {
            return Err(VerbsError::Bootstrap(format!(
                "receive buffer of {} bytes for {size} records of {n}",
                recv.len()
            )));
        }
        // SAFETY: `send` holds n bytes and `recv` n * size bytes (checked
        // above), both live for the call; handles are this ABI's
        // MPI_COMM_WORLD and MPI_BYTE. MPI_Allgather is blocking, so neither
        // buffer is used after it returns.
        let rc = unsafe {
            match &self.abi {
                Abi::OpenMpi(h) => {
                    (h.allgather)(send.as_ptr().cast(), n, h.byte, recv.as_mut_ptr().cast(), n, h.byte, h.comm_world)
                }
                Abi::Mpich(h) => {
                    (h.allgather)(send.as_ptr().cast(), n, h.byte, recv.as_mut_ptr().cast(), n, h.byte, h.comm_world)
                }
            }
        };
        Self::check("MPI_Allgather", rc)
    }

    /// Every rank's `mine`, by rank. Records may differ in length: the
    /// lengths are gathered first, then records padded to the longest.
    pub fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, VerbsError> {
        let size = self.size()?;
        let mut lens = vec![0u8; 8 * size];
        self.allgather_raw(&(mine.len() as u64).to_le_bytes(), &mut lens)?;
        let lens: Vec<usize> =
            lens.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize).collect();
        let max = lens.iter().copied().max().unwrap_or(0);
        if max == 0 {
            return Ok(vec![Vec::new(); size]);
        }
        let mut send = mine.to_vec();
        send.resize(max, 0);
        let mut all = vec![0u8; max * size];
        self.allgather_raw(&send, &mut all)?;
        Ok(all.chunks_exact(max).zip(&lens).map(|(c, &l)| c[..l].to_vec()).collect())
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        if !self.we_initialized {
            return;
        }
        let mut done: c_int = 0;
        // SAFETY: MPI_Finalized may be called at any time; MPI_Finalize once,
        // by us who called MPI_Init, and only if nobody finalised already.
        unsafe {
            if (self.finalized)(&mut done) == MPI_SUCCESS && done == 0 {
                (self.finalize)();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_libmpi_names_the_packages() {
        let e = Mpi::load_from(&["/nonexistent/libmpi.so.40"]).unwrap_err();
        assert!(matches!(e, VerbsError::MpiMissing { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("/nonexistent/libmpi.so.40")
                && e.contains("apt install libopenmpi3 openmpi-bin")
                && e.contains(ENV_MPI_LIB)
                && e.contains("No such file"),
            "{e}"
        );
    }

    #[test]
    fn a_library_that_is_not_mpi_is_refused() {
        // libc loads everywhere and has no MPI symbol.
        let e = Mpi::load_from(&["libc.so.6"]).unwrap_err().to_string();
        assert!(e.contains("neither Open MPI nor MPICH"), "{e}");
    }
}
