//! Reads the PCI functions of a sysfs tree: each `bus/pci/devices/<BDF>`
//! link, resolved to its place under `devices/` (which gives the chain of
//! bridges above it), with its `config`, `numa_node` and `resource` files.
//! Works the same on the live `/sys` and on a captured copy. Files are read
//! through [`hostfile`] (regular files only, never past their size), and
//! names from the tree are escaped for the terminal as they are read.

use crate::print::escape_path;
use marrow_pcie::Config;
use marrow_verbs::hostfile::{self, ATTRIBUTE_MAX, CONFIG_MAX};
use std::path::{Path, PathBuf};

/// PCI vendor IDs (the PCI-SIG's register, as in Linux's `pci_ids.h`).
const VENDOR_NVIDIA: u16 = 0x10de;
const VENDOR_MELLANOX: u16 = 0x15b3;
/// Class codes (PCI Code and ID Assignment §1.3 and §1.4; Linux's
/// `PCI_CLASS_DISPLAY_VGA`, `PCI_CLASS_DISPLAY_3D`, `PCI_BASE_CLASS_NETWORK`).
const CLASS_DISPLAY_VGA: u16 = 0x0300;
const CLASS_DISPLAY_3D: u16 = 0x0302;
const BASE_CLASS_NETWORK: u8 = 0x02;

/// The bytes of a PCI configuration space header: less is not a config space.
const CONFIG_HEADER: usize = 64;

/// One PCI function as sysfs shows it.
#[derive(Debug, Clone)]
pub struct Function {
    pub bdf: String,
    /// The `pciDDDD:BB` host bridge directory the function hangs under.
    pub root: String,
    /// Bridges from the root down to the function's parent, as BDFs.
    pub ancestors: Vec<String>,
    pub numa_node: i32,
    pub config: Vec<u8>,
    /// Why `config` gives no vendor, device or class (empty, short, unreadable).
    pub config_problem: Option<String>,
    /// Sizes of the regions in sysfs `resource`, by BAR index (0 = none).
    pub bar_sizes: Vec<u64>,
    /// Whether `/sys/class/infiniband/*/device` points here.
    pub infiniband: Option<String>,
    /// Files of the function that are there but could not be read.
    pub warnings: Vec<String>,
}

/// A function's sysfs files as read: `None` when absent, `Err` with the
/// reason when there but unreadable.
#[derive(Debug, Clone, Default)]
pub struct Files {
    pub config: Option<Result<Vec<u8>, String>>,
    pub numa_node: Option<Result<Vec<u8>, String>>,
    pub resource: Option<Result<Vec<u8>, String>>,
}

impl Files {
    /// Reads the files of the function directory `dir`.
    pub fn read(dir: &Path) -> Files {
        Files {
            config: read_file(&dir.join("config"), CONFIG_MAX),
            numa_node: read_file(&dir.join("numa_node"), ATTRIBUTE_MAX),
            resource: read_file(&dir.join("resource"), ATTRIBUTE_MAX),
        }
    }
}

fn read_file(p: &Path, cap: usize) -> Option<Result<Vec<u8>, String>> {
    match hostfile::read(p, cap) {
        Ok(b) => Some(Ok(b)),
        Err(e) if e.is_absent() => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

/// Why `config` cannot be decoded, if it cannot.
pub fn config_problem(config: &[u8]) -> Option<String> {
    match config.len() {
        0 => Some("config is empty: vendor, device and class unknown".into()),
        n if n < CONFIG_HEADER => Some(format!(
            "config has {n} bytes, less than the {CONFIG_HEADER}-byte header: vendor, device and class unknown"
        )),
        n if n > CONFIG_MAX => Some(format!("config has {n} bytes, more than a function's {CONFIG_MAX}: not decoded")),
        _ => None,
    }
}

/// The first line of an attribute file, trimmed, as text.
fn attribute_text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

impl Function {
    /// A function from its place in the tree and the contents of its files:
    /// whatever the bytes, a function comes out, with warnings for what is wrong.
    pub fn from_files(bdf: &str, root: &str, ancestors: &[String], files: Files, infiniband: Option<String>) -> Self {
        let Files { config, numa_node, resource } = files;
        let mut warnings = Vec::new();
        let mut keep = |name: &str, f: Option<Result<Vec<u8>, String>>| match f {
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                warnings.push(format!("{name}: {e}"));
                None
            }
            None => None,
        };
        let numa = keep("numa_node", numa_node);
        let resource = keep("resource", resource);
        let (config, config_problem) = match config {
            Some(Ok(b)) => {
                let p = config_problem(&b);
                (b, p)
            }
            Some(Err(e)) => (Vec::new(), Some(format!("config unreadable: {e}"))),
            None => (Vec::new(), Some("no config file: vendor, device and class unknown".into())),
        };
        Function {
            bdf: bdf.to_owned(),
            root: root.to_owned(),
            ancestors: ancestors.to_vec(),
            numa_node: numa.and_then(|b| attribute_text(&b).parse().ok()).unwrap_or(-1),
            config: if config_problem.is_some() { Vec::new() } else { config },
            config_problem,
            bar_sizes: resource.map(|r| resource_sizes(&attribute_text(&r))).unwrap_or_default(),
            infiniband,
            warnings,
        }
    }

    pub fn cfg(&self) -> Option<Config<'_>> {
        Config::new(&self.config).ok()
    }
    pub fn vendor_device(&self) -> (u16, u16) {
        self.cfg().map(|c| (c.vendor_id(), c.device_id())).unwrap_or((u16::MAX, u16::MAX))
    }
    pub fn class(&self) -> u32 {
        self.cfg().map(|c| c.class()).unwrap_or(0)
    }
    /// An NVIDIA display (0x0300) or 3D (0x0302) controller.
    pub fn is_gpu(&self) -> bool {
        let (v, _) = self.vendor_device();
        v == VENDOR_NVIDIA
            && self.cfg().is_some_and(|c| matches!(c.class_subclass(), CLASS_DISPLAY_VGA | CLASS_DISPLAY_3D))
    }
    /// A Mellanox/NVIDIA networking function, or anything with an RDMA device.
    pub fn is_rdma_nic(&self) -> bool {
        let (v, _) = self.vendor_device();
        self.infiniband.is_some()
            || (v == VENDOR_MELLANOX && self.cfg().is_some_and(|c| c.base_class() == BASE_CLASS_NETWORK))
    }
}

/// Reads every function under `sysfs/bus/pci/devices`.
pub fn scan(sysfs: &Path) -> Result<Vec<Function>, String> {
    let dir = sysfs.join("bus/pci/devices");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", escape_path(&dir)))?;
    let ib = infiniband_devices(sysfs);
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let link = entry.path();
        let real = std::fs::canonicalize(&link).map_err(|e| format!("{}: {e}", escape_path(&link)))?;
        let all: Vec<String> = real.components().map(|c| escape_path(Path::new(c.as_os_str()))).collect();
        // Everything after the last `devices` component: pciDDDD:BB, bridges, the function.
        let after = all.iter().rposition(|c| c == "devices").map_or(all.len(), |i| i + 1);
        let parts = &all[after..];
        let Some((root, rest)) = parts.split_first().filter(|(r, _)| r.starts_with("pci")) else {
            return Err(format!(
                "{} resolves to {}, not under a pciDDDD:BB host bridge",
                escape_path(&link),
                escape_path(&real)
            ));
        };
        let Some((bdf, ancestors)) = rest.split_last() else {
            return Err(format!("{}: no function below {root}", escape_path(&real)));
        };
        let bridges: Vec<String> = ancestors.iter().filter(|a| is_bdf(a)).cloned().collect();
        let infiniband = ib.iter().find(|(_, dev)| dev == &real).map(|(name, _)| name.clone());
        out.push(Function::from_files(bdf, root, &bridges, Files::read(&real), infiniband));
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}

fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

/// sysfs `resource`: one `start end flags` line per region, hex.
pub fn resource_sizes(text: &str) -> Vec<u64> {
    text.lines()
        .map(|l| {
            let v: Vec<u64> =
                l.split_whitespace().filter_map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok()).collect();
            match v.as_slice() {
                [start, end, _] if end > start => end - start + 1,
                _ => 0,
            }
        })
        .collect()
}

/// `class/infiniband/<name>/device` links, resolved.
fn infiniband_devices(sysfs: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(sysfs.join("class/infiniband")) else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| {
            let dev = std::fs::canonicalize(e.path().join("device")).ok()?;
            Some((escape_path(Path::new(&e.file_name())), dev))
        })
        .collect()
}
