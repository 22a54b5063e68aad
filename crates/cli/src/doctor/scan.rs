//! Reads the PCI functions of a sysfs tree: each `bus/pci/devices/<BDF>`
//! link, resolved to its place under `devices/` (which gives the chain of
//! bridges above it), with its `config`, `numa_node` and `resource` files.
//! Works the same on the live `/sys` and on a captured copy.

use marrow_pcie::Config;
use std::path::{Path, PathBuf};

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
    /// Sizes of the regions in sysfs `resource`, by BAR index (0 = none).
    pub bar_sizes: Vec<u64>,
    /// Whether `/sys/class/infiniband/*/device` points here.
    pub infiniband: Option<String>,
}

impl Function {
    pub fn cfg(&self) -> Option<Config<'_>> {
        Config::new(&self.config).ok()
    }
    pub fn vendor_device(&self) -> (u16, u16) {
        self.cfg().map(|c| (c.vendor_id(), c.device_id())).unwrap_or((0xffff, 0xffff))
    }
    pub fn class(&self) -> u32 {
        self.cfg().map(|c| c.class()).unwrap_or(0)
    }
    /// An NVIDIA display (0x0300) or 3D (0x0302) controller.
    pub fn is_gpu(&self) -> bool {
        let (v, _) = self.vendor_device();
        v == 0x10de && matches!(self.class() >> 8, 0x0300 | 0x0302)
    }
    /// A Mellanox/NVIDIA networking function, or anything with an RDMA device.
    pub fn is_rdma_nic(&self) -> bool {
        let (v, _) = self.vendor_device();
        self.infiniband.is_some() || (v == 0x15b3 && self.class() >> 16 == 0x02)
    }
}

/// Reads every function under `sysfs/bus/pci/devices`.
pub fn scan(sysfs: &Path) -> Result<Vec<Function>, String> {
    let dir = sysfs.join("bus/pci/devices");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ib = infiniband_devices(sysfs);
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let link = entry.path();
        let real = std::fs::canonicalize(&link).map_err(|e| format!("{}: {e}", link.display()))?;
        let all: Vec<String> = real.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        // Everything after the last `devices` component: pciDDDD:BB, bridges, the function.
        let after = all.iter().rposition(|c| c == "devices").map_or(all.len(), |i| i + 1);
        let parts = &all[after..];
        let Some((root, rest)) = parts.split_first().filter(|(r, _)| r.starts_with("pci")) else {
            return Err(format!(
                "{} resolves to {}, not under a pciDDDD:BB host bridge",
                link.display(),
                real.display()
            ));
        };
        let Some((bdf, ancestors)) = rest.split_last() else {
            return Err(format!("{}: no function below {root}", real.display()));
        };
        let config = std::fs::read(real.join("config")).map_err(|e| format!("{}/config: {e}", real.display()))?;
        out.push(Function {
            bdf: bdf.clone(),
            root: root.clone(),
            ancestors: ancestors.iter().filter(|a| is_bdf(a)).cloned().collect(),
            numa_node: read_trim(&real.join("numa_node")).and_then(|s| s.parse().ok()).unwrap_or(-1),
            config,
            bar_sizes: read_trim(&real.join("resource")).map(|r| resource_sizes(&r)).unwrap_or_default(),
            infiniband: ib.iter().find(|(_, dev)| dev == &real).map(|(name, _)| name.clone()),
        });
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}

fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// sysfs `resource`: one `start end flags` line per region, hex.
fn resource_sizes(text: &str) -> Vec<u64> {
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
            Some((e.file_name().to_string_lossy().into_owned(), dev))
        })
        .collect()
}
