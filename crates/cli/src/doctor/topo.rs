//! The GPU×NIC matrix of `nvidia-smi topo -m`, from sysfs alone: every GPU
//! (NVIDIA display/3D functions) and every RDMA device's PCI function
//! (`class/infiniband/*/device`), each pair given its PCIe path class as
//! [`pair::classify`] computes it for the pair checks below the matrix.
//! NVLink (`NV#`) is not in sysfs: the matrix shows PCIe paths only.

use super::pair;
use super::scan::Function;
use crate::print::escape_path;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// One row (and column) of the matrix.
#[derive(Debug, Serialize)]
pub struct Endpoint {
    /// `GPU0`, `NIC0`: nvidia-smi's names, GPUs by PCI address, NICs by RDMA device name.
    pub label: String,
    pub bdf: String,
    /// The RDMA device (`mlx5_0`), for NICs.
    pub rdma: Option<String>,
    /// The netdevs of a NIC's PCI function (`device/net/*`); `None` when
    /// they could not be read (an absent `net/` is a function without any).
    pub netdevs: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
pub struct Topology {
    /// GPUs, then NICs.
    pub endpoints: Vec<Endpoint>,
    /// `matrix[i][j]`: `X`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS` or `unknown`.
    pub matrix: Vec<Vec<String>>,
    /// What the matrix cannot show.
    pub nvlink: &'static str,
}

const NVLINK: &str =
    "NVLink (NV#) is not visible in sysfs: this matrix shows PCIe paths; run nvidia-smi topo -m for NVLink";

/// The cell for `a` and `b`. Across host bridges the class depends on the
/// NUMA nodes; a node that is not known (`numa_node` unreadable or -1)
/// leaves NODE and SYS apart unknown.
fn cell(a: &Function, b: &Function) -> String {
    if a.bdf == b.bdf {
        return "X".into();
    }
    if a.root != b.root && (a.numa_node < 0 || b.numa_node < 0) {
        return "unknown".into();
    }
    let (class, _) = pair::classify(a, b);
    format!("{class:?}")
}

/// The matrix of the functions read; NIC netdevs are unknown until [`read_netdevs`].
pub fn build(funcs: &[Function]) -> Topology {
    let mut gpus: Vec<&Function> = funcs.iter().filter(|f| f.is_gpu()).collect();
    gpus.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    let mut nics: Vec<&Function> = funcs.iter().filter(|f| f.infiniband.is_some()).collect();
    nics.sort_by_key(|f| natural(f.infiniband.as_deref()));
    let all: Vec<&Function> = gpus.iter().chain(&nics).copied().collect();
    let matrix = all.iter().map(|a| all.iter().map(|b| cell(a, b)).collect()).collect();
    let mut endpoints: Vec<Endpoint> = gpus
        .iter()
        .enumerate()
        .map(|(i, f)| Endpoint { label: format!("GPU{i}"), bdf: f.bdf.clone(), rdma: None, netdevs: None })
        .collect();
    endpoints.extend(nics.iter().enumerate().map(|(i, f)| Endpoint {
        label: format!("NIC{i}"),
        bdf: f.bdf.clone(),
        rdma: f.infiniband.clone(),
        netdevs: None,
    }));
    Topology { endpoints, matrix, nvlink: NVLINK }
}

/// `mlx5_10` after `mlx5_9`: the name's text, then its trailing number.
fn natural(name: Option<&str>) -> (String, u64, String) {
    let name = name.unwrap_or("");
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    (stem.to_owned(), name[stem.len()..].parse().unwrap_or(0), name.to_owned())
}

/// The netdevs of each NIC: `<sysfs>/class/infiniband/<dev>/device/net/*`.
pub fn read_netdevs(t: &mut Topology, sysfs: &Path) {
    for e in &mut t.endpoints {
        let Some(dev) = &e.rdma else { continue };
        let dir = sysfs.join("class/infiniband").join(dev).join("device/net");
        e.netdevs = match std::fs::read_dir(&dir) {
            Ok(rd) => {
                let mut names: Vec<String> =
                    rd.flatten().take(64).map(|n| escape_path(Path::new(&n.file_name()))).collect();
                names.sort();
                Some(names)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(Vec::new()),
            Err(_) => None,
        };
    }
}

/// The legend lines of the classes, in nvidia-smi's words.
const LEGEND: [(&str, &str); 8] = [
    ("X", "Self"),
    ("SYS", "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"),
    ("NODE", "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"),
    ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
    ("PXB", "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)"),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "not shown: NVLink is not visible in sysfs (nvidia-smi topo -m shows it)"),
    ("unknown", "across host bridges where a NUMA node is not known (numa_node unreadable or -1)"),
];

pub fn render(t: &Topology, o: &mut String) {
    let _ = writeln!(o, "Topology (nvidia-smi topo -m classes, from sysfs PCIe paths):");
    if t.endpoints.is_empty() {
        let _ = writeln!(o, "  no GPU and no RDMA device");
        return;
    }
    let mut head = format!("  {:8}", "");
    for e in &t.endpoints {
        let _ = write!(head, "{:<8}", e.label);
    }
    let _ = writeln!(o, "{}", head.trim_end());
    for (e, row) in t.endpoints.iter().zip(&t.matrix) {
        let mut line = format!("  {:<8}", e.label);
        for c in row {
            let _ = write!(line, "{c:<8}");
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
    let _ = writeln!(o, "\n  Legend:\n");
    for (k, v) in LEGEND {
        let _ = writeln!(o, "    {k:<7} = {v}");
    }
    // Counted as nvidia-smi and NCCL count: a switch is one bridge, though
    // sysfs shows its upstream and downstream ports as bridges of their own.
    let _ = writeln!(o, "\n    (a PCIe switch, its upstream and downstream ports, counts as one bridge)");
    let _ = writeln!(o, "\n  GPU and NIC Legend:\n");
    for e in &t.endpoints {
        match &e.rdma {
            None => {
                let _ = writeln!(o, "    {}: {}", e.label, e.bdf);
            }
            Some(dev) => {
                let netdev = match &e.netdevs {
                    None => "netdev unknown".to_string(),
                    Some(n) if n.is_empty() => "no netdev".to_string(),
                    Some(n) => format!("netdev {}", n.join(", ")),
                };
                let _ = writeln!(o, "    {}: {dev} ({netdev})", e.label);
            }
        }
    }
}
