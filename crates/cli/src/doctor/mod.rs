//! `marrow doctor`: is the PCIe path between each GPU and RDMA NIC fit for
//! GPU-initiated RDMA? Reads a sysfs tree (the live `/sys` or a captured
//! one) and `/proc`, then reports the tree with link speeds, every GPU and
//! NIC, the GPU×NIC matrix of path classes as `nvidia-smi topo -m` shows
//! it ([`topo`]), per GPU–NIC pair the path class, ACS on each bridge, ATS,
//! and a verdict with its reason and fix, and the GID table of every RDMA
//! port ([`gid_table`]). The checks follow `docs/SOURCES.md`
//! §3; PCIe registers are decoded by `marrow-pcie`.

pub mod gid_table;
pub mod host;
pub mod pair;
pub mod rdma;
pub mod scan;
pub mod topo;

use crate::pcie_out::size_text;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct DeviceLine {
    pub bdf: String,
    pub root: String,
    pub depth: usize,
    pub vendor_device: String,
    pub class: String,
    pub role: &'static str,
    pub port_type: Option<String>,
    /// `negotiated / capable`, e.g. `32GT/s x16 / 32GT/s x16`.
    pub link: Option<String>,
    pub link_degraded: bool,
    pub acs_ctl: Option<u16>,
    pub bars: Vec<String>,
    pub resizable_bars: Vec<String>,
    pub numa_node: i32,
    /// Link-health findings from DPC, Secondary PCIe, the 16 GT/s parity
    /// registers and SR-IOV state; empty when there is nothing to say.
    pub notes: Vec<String>,
}

/// What a function's own registers say about its link: a triggered DPC
/// (PCIe 6.0 §7.9.14: the port has taken the link down), lanes with errors
/// (§7.7.3.3) or data parity mismatches at 16 GT/s (§7.7.5.5-7), and how
/// many SR-IOV VFs are on (§9.3.3).
pub fn notes(cfg: &marrow_pcie::Config) -> Vec<String> {
    let mut v = Vec::new();
    match cfg.dpc() {
        Some(Ok(d)) if d.triggered => v.push(format!(
            "DPC triggered ({}, source {}): the link below this port is contained (down) until the port is recovered",
            d.trigger_reason_text(),
            marrow_pcie::routing_id::RoutingId(d.source_id)
        )),
        Some(Err(e)) => v.push(format!("DPC capability unreadable: {e}")),
        _ => {}
    }
    if let Some(Ok(s)) = cfg.secondary_pcie()
        && s.lane_error_status != 0
    {
        let lanes: Vec<String> = s.lanes_in_error().map(|l| l.to_string()).collect();
        v.push(format!("lane errors logged on lanes {} (Secondary PCIe Lane Error Status, RW1C)", lanes.join(" ")));
    }
    if let Some(Ok(p)) = cfg.physical_layer_16gt()
        && (p.local_parity_mismatch | p.first_retimer_parity_mismatch | p.second_retimer_parity_mismatch) != 0
    {
        v.push(format!(
            "16GT/s data parity mismatches: lanes {:#x} here, {:#x} at retimer 1, {:#x} at retimer 2",
            p.local_parity_mismatch, p.first_retimer_parity_mismatch, p.second_retimer_parity_mismatch
        ));
    }
    if let Some(Ok(s)) = cfg.sriov()
        && s.total_vfs > 0
    {
        v.push(format!(
            "SR-IOV: {} of {} VFs{}",
            s.num_vfs,
            s.total_vfs,
            if s.vf_enable { " enabled" } else { ", VF Enable off" }
        ));
    }
    v
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub devices: Vec<DeviceLine>,
    pub gpus: Vec<String>,
    pub nics: Vec<String>,
    /// The `nvidia-smi topo -m` matrix of GPUs and NICs.
    pub topology: topo::Topology,
    pub pairs: Vec<pair::Pair>,
    pub host: host::Host,
    /// The mlx5 backend: library, devices, doorbell mode and why.
    pub rdma: rdma::Backend,
    /// Per RDMA port: the GIDs in use and the index to use.
    pub gids: Vec<marrow_verbs::gids::PortGids>,
}

pub fn run(sysfs: &Path, proc_root: &Path) -> Result<Report, String> {
    let funcs = scan::scan(sysfs)?;
    let mut r = assemble(&funcs, host::read(sysfs, proc_root), rdma::read(sysfs, proc_root));
    topo::read_netdevs(&mut r.topology, sysfs);
    r.gids = gid_table::read(sysfs);
    Ok(r)
}

/// The tree line of a function whose config space cannot be decoded.
fn unreadable_line(f: &scan::Function, problem: &str) -> DeviceLine {
    let mut notes = vec![problem.to_owned()];
    notes.extend(f.warnings.iter().cloned());
    DeviceLine {
        bdf: f.bdf.clone(),
        root: f.root.clone(),
        depth: f.ancestors.len(),
        vendor_device: "????:????".into(),
        class: "??????".into(),
        role: "",
        port_type: None,
        link: None,
        link_degraded: false,
        acs_ctl: None,
        bars: Vec::new(),
        resizable_bars: Vec::new(),
        numa_node: f.numa_node,
        notes,
    }
}

/// The report on the functions read, the host settings and the RDMA backend
/// (NIC netdevs unknown and no GID table: [`run`] reads those from the tree).
pub fn assemble(funcs: &[scan::Function], host: host::Host, rdma: rdma::Backend) -> Report {
    let mut devices = Vec::new();
    let mut ordered: Vec<&scan::Function> = funcs.iter().collect();
    // Tree order: by host bridge, then by path from it.
    ordered.sort_by(|a, b| {
        let pa: Vec<&str> = a.ancestors.iter().map(String::as_str).chain([a.bdf.as_str()]).collect();
        let pb: Vec<&str> = b.ancestors.iter().map(String::as_str).chain([b.bdf.as_str()]).collect();
        (&a.root, pa).cmp(&(&b.root, pb))
    });
    for f in ordered {
        if let Some(problem) = &f.config_problem {
            devices.push(unreadable_line(f, problem));
            continue;
        }
        let cfg = f.cfg();
        let exp = cfg.and_then(|c| c.express());
        let (link, degraded) = match exp.and_then(|e| e.link_status.zip(e.link_capable)) {
            Some((s, c)) => (
                Some(format!("{:?} x{} / {:?} x{}", s.speed, s.width, c.speed, c.width)),
                s.speed < c.speed || s.width < c.width,
            ),
            None => (None, false),
        };
        let role = if f.is_gpu() {
            "GPU"
        } else if f.is_rdma_nic() {
            "RDMA NIC"
        } else if cfg.is_some_and(|c| c.is_bridge()) {
            "bridge"
        } else {
            ""
        };
        let interesting = !role.is_empty() && role != "bridge";
        devices.push(DeviceLine {
            bdf: f.bdf.clone(),
            root: f.root.clone(),
            depth: f.ancestors.len(),
            vendor_device: format!("{:04x}:{:04x}", f.vendor_device().0, f.vendor_device().1),
            class: format!("{:06x}", f.class()),
            role,
            port_type: exp.map(|e| format!("{:?}", e.port_type)),
            link,
            link_degraded: degraded,
            acs_ctl: cfg.and_then(|c| c.acs()).map(|a| a.control_raw),
            bars: if interesting {
                f.bar_sizes
                    .iter()
                    .enumerate()
                    .take(6)
                    .filter(|(_, s)| **s > 0)
                    .map(|(i, s)| format!("BAR{i} {}", size_text(*s)))
                    .collect()
            } else {
                Vec::new()
            },
            resizable_bars: cfg
                .map(|c| {
                    c.resizable_bars()
                        .map(|r| {
                            let max = r.supported().last().map(size_text).unwrap_or_default();
                            format!("BAR{} {} (up to {max})", r.bar_index, size_text(r.current))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            numa_node: f.numa_node,
            notes: cfg.map(|c| notes(&c)).unwrap_or_default().into_iter().chain(f.warnings.iter().cloned()).collect(),
        });
    }
    let gpus: Vec<&scan::Function> = funcs.iter().filter(|f| f.is_gpu()).collect();
    let nics: Vec<&scan::Function> = funcs.iter().filter(|f| f.is_rdma_nic()).collect();
    let mut pairs = Vec::new();
    for g in &gpus {
        for n in &nics {
            pairs.push(pair::assess(g, n, funcs));
        }
    }
    Report {
        devices,
        gpus: gpus.iter().map(|f| f.bdf.clone()).collect(),
        nics: nics
            .iter()
            .map(|f| format!("{}{}", f.bdf, f.infiniband.as_ref().map(|i| format!(" ({i})")).unwrap_or_default()))
            .collect(),
        topology: topo::build(funcs),
        pairs,
        host,
        rdma,
        gids: Vec::new(),
    }
}

pub fn render_text(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "PCIe tree (link: negotiated / capable):");
    let mut last_root = "";
    for d in &r.devices {
        if d.root != last_root {
            let _ = writeln!(o, "  {}", d.root);
            last_root = &d.root;
        }
        let mut line = format!("{}{} {} [{}]", "  ".repeat(d.depth + 2), d.bdf, d.vendor_device, d.class);
        if !d.role.is_empty() {
            let _ = write!(line, " {}", d.role);
        }
        if let Some(p) = &d.port_type
            && d.role == "bridge"
        {
            let _ = write!(line, " ({p})");
        }
        if let Some(l) = &d.link {
            let _ = write!(line, " link {l}{}", if d.link_degraded { " (below capability)" } else { "" });
        }
        if let Some(ctl) = d.acs_ctl {
            let _ = write!(line, " ACSCtl {ctl:#06x}");
        }
        if !d.bars.is_empty() {
            let _ = write!(line, " {}", d.bars.join(", "));
        }
        if !d.resizable_bars.is_empty() {
            let _ = write!(line, " ReBAR {}", d.resizable_bars.join(", "));
        }
        let _ = writeln!(o, "{line}");
        for n in &d.notes {
            let _ = writeln!(o, "{}! {n}", "  ".repeat(d.depth + 3));
        }
    }
    let _ = writeln!(o, "GPUs: {}", if r.gpus.is_empty() { "none".into() } else { r.gpus.join(", ") });
    let _ = writeln!(o, "RDMA NICs: {}", if r.nics.is_empty() { "none".into() } else { r.nics.join(", ") });
    topo::render(&r.topology, &mut o);
    let _ = writeln!(o, "IOMMU: {}", r.host.iommu);
    if !r.host.cmdline_iommu.is_empty() {
        let _ = writeln!(o, "  kernel command line: {}", r.host.cmdline_iommu.join(" "));
    }
    if r.host.nvidia_driver {
        let params: Vec<String> = r.host.nvidia_params.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        let _ = writeln!(
            o,
            "nvidia driver: {}; nvidia_peermem {}",
            params.join(" "),
            if r.host.nvidia_peermem { "loaded" } else { "not loaded" }
        );
    } else {
        let _ = writeln!(o, "nvidia driver: not loaded (no /proc/driver/nvidia/params)");
    }
    for n in &r.host.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    if r.pairs.is_empty() {
        let _ = writeln!(o, "GPU-NIC pairs: none (need at least one GPU and one RDMA NIC)");
    }
    for p in &r.pairs {
        let _ = writeln!(
            o,
            "GPU {} <-> NIC {}: {:?} -> {}",
            p.gpu,
            p.nic,
            p.class,
            format!("{:?}", p.verdict).to_uppercase()
        );
        for b in &p.bridges {
            let acs = match b.acs_ctl {
                Some(c) => format!("ACSCtl {c:#06x}{}", if b.redirects { " (redirects P2P)" } else { "" }),
                None if b.config_bytes <= 256 => {
                    format!("ACS unknown: only {} bytes of config space readable", b.config_bytes)
                }
                None => "no ACS".into(),
            };
            let _ = writeln!(o, "    bridge {} {acs}", b.bdf);
        }
        if let Some(ats) = p.nic_ats {
            let _ = writeln!(o, "    NIC ATS: {}", if ats { "enabled" } else { "present, disabled" });
        }
        let _ = writeln!(o, "    why: {}", p.reason);
        for f in &p.fix {
            let _ = writeln!(o, "    fix: {f}");
        }
    }
    rdma::render(&r.rdma, &mut o);
    gid_table::render(&r.gids, &mut o);
    o
}

/// Builds the report from file contents alone, as `marrow doctor` would on
/// a tree holding them: a chain of functions under one host bridge, each
/// with its `config`, `numa_node` and `resource`, then `cmdline` and the
/// nvidia `params`. The text and the JSON are returned. What the property
/// tests and the fuzz target drive; any bytes give a report, never a panic.
#[doc(hidden)]
pub fn report_from_contents(functions: &[[&[u8]; 3]], cmdline: &[u8], params: &[u8]) -> (String, String) {
    let root = "pci0000:00";
    let mut funcs = Vec::new();
    let mut ancestors: Vec<String> = Vec::new();
    for (i, [config, numa, resource]) in functions.iter().enumerate() {
        let bdf = format!("0000:{:02x}:00.0", i + 1);
        let files = scan::Files {
            config: Some(Ok(config.to_vec())),
            numa_node: Some(Ok(numa.to_vec())),
            resource: Some(Ok(resource.to_vec())),
        };
        funcs.push(scan::Function::from_files(&bdf, root, &ancestors, files, None));
        ancestors.push(bdf);
    }
    let host = host::from_files(host::Files {
        cmdline: Some(Ok(cmdline.to_vec())),
        nvidia_params: Some(Ok(params.to_vec())),
        ..host::Files::default()
    });
    let r = assemble(&funcs, host, rdma::Backend::unprobed());
    (render_text(&r), serde_json::to_string(&r).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Nothing in the text a terminal would obey: only line ends are controls.
    fn terminal_safe(text: &str) -> bool {
        !text.chars().any(|c| (c.is_control() && c != '\n') || crate::print::is_format_char(c))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn any_file_contents_give_a_report(
            configs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4),
            numa in "\\PC{0,8}|[\\x00-\\x{ff}]{0,8}",
            resource in "([0-9a-fx ]{0,40}\n){0,4}|[\\x00-\\x{ff}\\u{202e}]{0,40}",
            cmdline in "[\\x00-\\x{ff}\\u{2066}]{0,60}|(iommu=pt |pci=[\\x00-\\x{ff}]{0,10} ){0,3}",
            params in "((EnableStreamMemOPs|RegistryDwords|x): [\\x00-\\x{ff}\\u{202e}]{0,12}\n){0,3}",
        ) {
            let functions: Vec<[&[u8]; 3]> =
                configs.iter().map(|c| [c.as_slice(), numa.as_bytes(), resource.as_bytes()]).collect();
            let (text, json) = report_from_contents(&functions, cmdline.as_bytes(), params.as_bytes());
            prop_assert!(terminal_safe(&text), "{:?}", text);
            prop_assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
        }

        #[test]
        fn any_config_of_a_real_length_decodes_without_panic(config in proptest::collection::vec(any::<u8>(), 64..4097)) {
            let (text, _) = report_from_contents(&[[&config, b"0\n", b""]], b"", b"");
            prop_assert!(text.contains("0000:01:00.0"));
            prop_assert!(!text.contains("????:????"));
        }
    }
}
