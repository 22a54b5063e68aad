//! The PTX of marrow's kernels, kept between runs.
//!
//! Every GPU command compiles `kernels/gpu/marrow_kernels.cu` with the
//! machine's NVRTC, which takes tens of seconds on a small host. The PTX
//! depends on nothing but NVRTC's version, the architecture, the options
//! and the sources, so it is kept under the SHA-256 of exactly those, and a
//! later run with the same inputs loads it instead. A change to any input
//! (a new marrow, another NVRTC, a `MARROW_NVRTC_DEFINE` knob) makes another
//! key, never a stale hit.
//!
//! Where: `MARROW_KERNEL_CACHE=DIR`, or `off` for none; by default
//! `$XDG_CACHE_HOME/marrow/kernels`, else `$HOME/.cache/marrow/kernels`
//! (the XDG base directory rule). A file is written only once the driver
//! has loaded the PTX, under a temporary name then renamed, so a reader sees
//! a whole file or none; a file the driver refuses is compiled again and
//! replaced. The [`KEEP`] most recently written files stay; older ones go
//! when a new one is stored.

use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variable that moves the cache or turns it off.
pub const ENV: &str = "MARROW_KERNEL_CACHE";

/// Everything the PTX depends on.
#[derive(Debug, Clone, Copy)]
pub struct KeyInputs<'a> {
    /// NVRTC's (major, minor) version.
    pub nvrtc: (i32, i32),
    /// `sm_XY`.
    pub arch: &'a str,
    /// NVRTC's options, other than the architecture and the include path
    /// (a temporary directory that holds `sources`).
    pub options: &'a [String],
    /// The headers, by include path.
    pub sources: &'a [(&'a str, &'a str)],
    /// The translation unit.
    pub kernels: &'a str,
}

impl KeyInputs<'_> {
    /// The SHA-256 of the inputs, in hex. Each part goes in after its
    /// length, so no two different lists of parts hash the same bytes.
    pub fn key(&self) -> String {
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(b"marrow kernels v1");
        part(&self.nvrtc.0.to_le_bytes());
        part(&self.nvrtc.1.to_le_bytes());
        part(self.arch.as_bytes());
        part(&(self.options.len() as u64).to_le_bytes());
        self.options.iter().for_each(|o| part(o.as_bytes()));
        part(&(self.sources.len() as u64).to_le_bytes());
        for (path, text) in self.sources {
            part(path.as_bytes());
            part(text.as_bytes());
        }
        part(self.kernels.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The cache directory for these variables' values: `var` is
/// [`ENV`]'s, `xdg` `XDG_CACHE_HOME`'s, `home` `HOME`'s. `None`: no cache
/// (turned off, or nowhere to put one). Relative XDG paths are ignored, as
/// the XDG base directory specification asks.
pub fn dir_from(var: Option<&OsStr>, xdg: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    let set = |v: Option<&OsStr>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(v) = set(var) {
        return (v.as_os_str() != "off").then_some(v);
    }
    if let Some(x) = set(xdg).filter(|x| x.is_absolute()) {
        return Some(x.join("marrow/kernels"));
    }
    set(home).map(|h| h.join(".cache/marrow/kernels"))
}

/// The cache directory from this process's environment.
pub fn dir() -> Option<PathBuf> {
    dir_from(
        std::env::var_os(ENV).as_deref(),
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// The file that holds `key`'s PTX.
pub fn file(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.ptx"))
}

/// `key`'s PTX, if the cache holds it (an unreadable file counts as none).
pub fn load(dir: &Path, key: &str) -> Option<String> {
    std::fs::read_to_string(file(dir, key)).ok()
}

/// Keep `ptx` under `key`: written to a name of this process's, then
/// renamed over the final name, so that a concurrent reader sees a whole
/// file or none. Returns the file.
pub fn store(dir: &Path, key: &str, ptx: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = file(dir, key);
    let tmp = dir.join(format!(".{key}.ptx.{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, ptx).and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| path)
}

/// Files a cache keeps: each build of marrow, NVRTC or knob setting makes
/// a key of its own (about 4 MiB of PTX each), and nothing else would ever
/// remove the old ones.
pub const KEEP: usize = 16;

/// Remove all but the `keep` most recently written `.ptx` files of `dir`
/// (`stay`, the file just stored, always stays). Returns how many went. Files other than
/// the cache's own are never touched; a file that cannot be removed is
/// left, since the next store tries again.
pub fn prune(dir: &Path, keep: usize, stay: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension() == Some(OsStr::new("ptx")) && p != stay)
        .filter_map(|p| std::fs::metadata(&p).and_then(|m| m.modified()).ok().map(|t| (t, p)))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    files.iter().skip(keep.saturating_sub(1)).filter(|(_, p)| std::fs::remove_file(p).is_ok()).count()
}

/// What became of freshly compiled PTX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Kept in this file.
    At(PathBuf),
    /// No cache: [`ENV`] is `off`, or neither it, `XDG_CACHE_HOME` nor
    /// `HOME` names a place.
    Off,
    /// The store failed, with this error.
    Failed(String),
}

/// Where a [`crate::gpu::Gpu`]'s kernels came from.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelOrigin {
    /// Compiled by this machine's NVRTC.
    Compiled {
        /// NVRTC's time, in seconds.
        secs: f64,
        /// What became of the PTX.
        kept: Kept,
        /// Why a cached file was not used, when one existed: the driver
        /// refused it.
        refused: Option<String>,
    },
    /// Loaded from the cache.
    Loaded(PathBuf),
}

impl fmt::Display for KernelOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelOrigin::Loaded(p) => write!(f, "kernels loaded from {} ({ENV}=off compiles them)", p.display()),
            KernelOrigin::Compiled { secs, kept, refused } => {
                write!(f, "kernels compiled by this machine's NVRTC in {secs:.1} s")?;
                if let Some(r) = refused {
                    write!(f, " (the cached PTX was refused by the driver: {r})")?;
                }
                match kept {
                    Kept::At(p) => write!(f, ", kept in {}", p.display()),
                    Kept::Off => write!(f, ", not kept ({ENV}=off, or no HOME)"),
                    Kept::Failed(e) => write!(f, ", not kept: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(options: &'a [String], sources: &'a [(&'a str, &'a str)]) -> KeyInputs<'a> {
        KeyInputs { nvrtc: (13, 0), arch: "sm_90", options, sources, kernels: "__global__ void k() {}" }
    }

    #[test]
    fn every_input_changes_the_key() {
        let opts = vec!["--std=c++17".to_string()];
        let srcs = [("marrow/a.h", "int a;"), ("marrow/b.h", "int b;")];
        let base = inputs(&opts, &srcs);
        let k = base.key();
        assert_eq!(k.len(), 64);
        assert_eq!(k, inputs(&opts, &srcs).key(), "the key is a function of its inputs");
        let more = vec!["--std=c++17".to_string(), "-DMARROW_FAST_PATH=0".to_string()];
        let moved = [("marrow/a.h", "int a;int b;"), ("marrow/b.h", "")];
        let renamed = [("marrow/c.h", "int a;"), ("marrow/b.h", "int b;")];
        let others = [
            KeyInputs { nvrtc: (13, 1), ..base },
            KeyInputs { nvrtc: (12, 0), ..base },
            KeyInputs { arch: "sm_100", ..base },
            KeyInputs { options: &more, ..base },
            KeyInputs { sources: &moved, ..base },
            KeyInputs { sources: &renamed, ..base },
            KeyInputs { sources: &srcs[..1], ..base },
            KeyInputs { kernels: "__global__ void k() { }", ..base },
        ];
        for o in &others {
            assert_ne!(o.key(), k, "{o:?} hashed like the base");
        }
    }

    #[test]
    fn where_the_cache_lives() {
        fn s(v: &str) -> Option<&OsStr> {
            Some(OsStr::new(v))
        }
        assert_eq!(dir_from(s("off"), s("/x"), s("/h")), None);
        assert_eq!(dir_from(s("/c"), s("/x"), s("/h")), Some(PathBuf::from("/c")));
        assert_eq!(dir_from(s(""), s("/x"), s("/h")), Some(PathBuf::from("/x/marrow/kernels")));
        assert_eq!(dir_from(None, s("rel"), s("/h")), Some(PathBuf::from("/h/.cache/marrow/kernels")));
        assert_eq!(dir_from(None, None, s("/h")), Some(PathBuf::from("/h/.cache/marrow/kernels")));
        assert_eq!(dir_from(None, None, None), None);
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("marrow-kc-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn store_then_load() {
        let d = scratch("roundtrip");
        assert_eq!(load(&d, "k1"), None);
        let p = store(&d.join("deeper"), "k1", ".version 9.0\n").expect("store");
        assert_eq!(p, d.join("deeper/k1.ptx"));
        assert_eq!(load(&d.join("deeper"), "k1").as_deref(), Some(".version 9.0\n"));
        store(&d.join("deeper"), "k1", ".version 9.1\n").expect("replace");
        assert_eq!(load(&d.join("deeper"), "k1").as_deref(), Some(".version 9.1\n"));
        let names: Vec<_> = std::fs::read_dir(d.join("deeper")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("k1.ptx")], "no temporary file is left");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn prune_keeps_the_newest_and_nothing_else_is_touched() {
        let d = scratch("prune");
        let t0 = std::time::SystemTime::now() - std::time::Duration::from_secs(1000);
        for i in 0..6u64 {
            let p = store(&d, &format!("k{i}"), "ptx").unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(t0 + std::time::Duration::from_secs(i * 10)).unwrap();
        }
        std::fs::write(d.join("notes.txt"), "not the cache's").unwrap();
        // k0 is the oldest, but it is the one just used: it stays.
        assert_eq!(prune(&d, 3, &file(&d, "k0")), 3);
        let mut left: Vec<String> =
            std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["k0.ptx", "k4.ptx", "k5.ptx", "notes.txt"]);
        assert_eq!(prune(&d, 3, &file(&d, "k0")), 0, "nothing more to remove");
        assert_eq!(prune(&d.join("absent"), 3, &file(&d, "k0")), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_store_says_why_and_leaves_nothing() {
        let d = scratch("failed");
        std::fs::create_dir_all(&d).unwrap();
        let blocker = d.join("not-a-dir");
        std::fs::write(&blocker, "a file where the cache directory should be").unwrap();
        let e = store(&blocker, "k", "ptx").expect_err("a file is no directory");
        assert!(!e.to_string().is_empty());
        assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "a file where the cache directory should be");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_printed_line_names_the_origin() {
        let loaded = KernelOrigin::Loaded(PathBuf::from("/c/ab.ptx"));
        assert_eq!(loaded.to_string(), "kernels loaded from /c/ab.ptx (MARROW_KERNEL_CACHE=off compiles them)");
        let kept = KernelOrigin::Compiled { secs: 31.24, kept: Kept::At(PathBuf::from("/c/ab.ptx")), refused: None };
        assert_eq!(kept.to_string(), "kernels compiled by this machine's NVRTC in 31.2 s, kept in /c/ab.ptx");
        let refused = KernelOrigin::Compiled {
            secs: 1.0,
            kept: Kept::Failed("Permission denied".into()),
            refused: Some("CUDA_ERROR_INVALID_PTX".into()),
        };
        assert_eq!(
            refused.to_string(),
            "kernels compiled by this machine's NVRTC in 1.0 s (the cached PTX was refused by the driver: \
             CUDA_ERROR_INVALID_PTX), not kept: Permission denied"
        );
        let off = KernelOrigin::Compiled { secs: 2.0, kept: Kept::Off, refused: None };
        assert!(off.to_string().ends_with("not kept (MARROW_KERNEL_CACHE=off, or no HOME)"));
    }
}
