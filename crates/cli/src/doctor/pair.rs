//! One GPU–NIC pair: the path class with `nvidia-smi topo -m` meanings, the
//! ACS control of every bridge on the path, and the verdict. Classification
//! follows NCCL's graph (`docs/SOURCES.md` §3.1): a device's node is
//! two sysfs components up, a BDF there is a switch and `pciDDDD:BB` a CPU;
//! ACS follows Linux p2pdma (§3.2): RR, CR or EC on any bridge between the
//! two and their common upstream bridge sends peer-to-peer to the root complex.

use super::scan::Function;
use marrow_pcie::acs::P2P_REDIRECT;
use serde::Serialize;

/// `nvidia-smi topo -m` classes, nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum PathClass {
    /// At most a single PCIe switch.
    PIX,
    /// Several PCIe bridges, not through the host bridge.
    PXB,
    /// Through a PCIe host bridge (the CPU's root complex).
    PHB,
    /// Between host bridges within one NUMA node.
    NODE,
    /// Across the SMP interconnect between NUMA nodes.
    SYS,
}

impl PathClass {
    pub fn meaning(self) -> &'static str {
        match self {
            Self::PIX => "at most a single PCIe switch",
            Self::PXB => "multiple PCIe bridges, without the host bridge",
            Self::PHB => "through the PCIe host bridge (the CPU)",
            Self::NODE => "between PCIe host bridges within one NUMA node",
            Self::SYS => "across the interconnect between NUMA nodes",
        }
    }
}

/// ACS on one bridge of the path.
#[derive(Debug, Clone, Serialize)]
pub struct BridgeAcs {
    pub bdf: String,
    /// `None`: the bridge has no ACS capability (or the dump stops short).
    pub acs_ctl: Option<u16>,
    pub acs_offset: Option<u16>,
    /// RR, CR or EC set: peer-to-peer is redirected upstream.
    pub redirects: bool,
    /// Bytes of config space readable (sysfs gives 64 to non-root users:
    /// then the extended capabilities, ACS among them, cannot be seen).
    pub config_bytes: usize,
    /// The bridge's DPC has triggered (PCIe 6.0 §7.9.14.4): why, and from whom.
    pub dpc_triggered: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub gpu: String,
    pub nic: String,
    pub class: PathClass,
    pub bridges: Vec<BridgeAcs>,
    pub nic_ats: Option<bool>,
    pub verdict: Verdict,
    pub reason: String,
    pub fix: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Peer-to-peer goes straight through the switch fabric.
    Ok,
    /// Works, through the CPU: NCCL turns GPUDirect RDMA off by default.
    Degraded,
    /// Peer-to-peer is forced through the root complex, or cannot work.
    Blocked,
    /// A bridge's extended config space could not be read (not root?).
    Unknown,
}

/// The node NCCL would attach a device to: its grandparent if that is a
/// bridge (a switch upstream port), else the CPU (`None`).
fn switch_node(f: &Function) -> Option<&str> {
    let n = f.ancestors.len();
    (n >= 2).then(|| f.ancestors[n - 2].as_str())
}

pub fn classify(g: &Function, n: &Function) -> (PathClass, usize) {
    let common = g.ancestors.iter().zip(&n.ancestors).take_while(|(a, b)| a == b).count();
    if g.root != n.root {
        let class = if g.numa_node == n.numa_node && g.numa_node >= 0 { PathClass::NODE } else { PathClass::SYS };
        return (class, 0);
    }
    if common == 0 {
        return (PathClass::PHB, 0);
    }
    // Functions of one device (a dual-port NIC's .0 and .1), or devices on
    // one bridge's bus: no bridge between them, whatever hangs above.
    if common == g.ancestors.len() && common == n.ancestors.len() {
        return (PathClass::PIX, common);
    }
    match (switch_node(g), switch_node(n)) {
        (Some(a), Some(b)) if a == b => (PathClass::PIX, common),
        (Some(_), Some(_)) => (PathClass::PXB, common),
        // One of them hangs directly off a root port: the path meets the CPU.
        _ => (PathClass::PHB, common),
    }
}

/// Bridges strictly below the common ancestor on both sides, plus the
/// common ancestor itself when it is a bridge (p2pdma checks both sides).
fn path_bridges<'a>(g: &'a Function, n: &'a Function, common: usize) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    if common > 0 {
        v.push(&g.ancestors[common - 1]);
    }
    v.extend(g.ancestors[common..].iter().map(String::as_str));
    v.extend(n.ancestors[common..].iter().map(String::as_str));
    v
}

pub fn assess(g: &Function, n: &Function, all: &[Function]) -> Pair {
    let (class, common) = classify(g, n);
    let mut bridges = Vec::new();
    for bdf in path_bridges(g, n, common) {
        let func = all.iter().find(|f| f.bdf == bdf);
        let acs = func.and_then(|f| f.cfg().and_then(|c| c.acs()));
        bridges.push(BridgeAcs {
            config_bytes: func.map_or(0, |f| f.config.len()),
            bdf: bdf.to_string(),
            acs_ctl: acs.map(|a| a.control_raw),
            acs_offset: acs.map(|a| a.offset),
            redirects: acs.is_some_and(|a| a.control.intersects(P2P_REDIRECT)),
            dpc_triggered: func
                .and_then(|f| f.cfg())
                .and_then(|c| c.dpc())
                .and_then(Result::ok)
                .filter(|d| d.triggered)
                .map(|d| {
                    format!("{}, source {}", d.trigger_reason_text(), marrow_pcie::routing_id::RoutingId(d.source_id))
                }),
        });
    }
    let nic_ats = n.cfg().and_then(|c| c.ats()).map(|a| a.enabled);
    let redirecting: Vec<&BridgeAcs> = bridges.iter().filter(|b| b.redirects).collect();
    let unreadable: Vec<&BridgeAcs> = bridges.iter().filter(|b| b.config_bytes <= 256).collect();
    let contained: Vec<&BridgeAcs> = bridges.iter().filter(|b| b.dpc_triggered.is_some()).collect();
    let (verdict, reason, fix) = if !contained.is_empty() {
        let names: Vec<String> =
            contained.iter().map(|b| format!("{} ({})", b.bdf, b.dpc_triggered.as_deref().unwrap_or(""))).collect();
        (
            Verdict::Blocked,
            format!(
                "Downstream Port Containment has triggered at {}: the port took its link down after an uncorrectable error, so the devices below it are unreachable",
                names.join(", ")
            ),
            vec![
                "find the error that tripped it: the AER status of the source device and of the port, and the kernel log ('DPC: containment event')".to_string(),
                "then let the kernel's DPC service recover the port (pcie_ports=native), or reset the slot and rescan: echo 1 > /sys/bus/pci/rescan".to_string(),
            ],
        )
    } else if redirecting.is_empty() && !unreadable.is_empty() && class <= PathClass::PXB {
        let names: Vec<String> = unreadable.iter().map(|b| format!("{} ({} bytes)", b.bdf, b.config_bytes)).collect();
        (
            Verdict::Unknown,
            format!(
                "{class:?}, but the extended config space of {} is not readable, so ACS cannot be checked",
                names.join(", ")
            ),
            vec![
                "run marrow doctor as root: sysfs gives other users only the first 64 bytes of config space"
                    .to_string(),
            ],
        )
    } else if !redirecting.is_empty() && class <= PathClass::PXB {
        let names: Vec<&str> = redirecting.iter().map(|b| b.bdf.as_str()).collect();
        let mut fix: Vec<String> = redirecting
            .iter()
            .map(|b| {
                let ctl = b.acs_ctl.unwrap_or(0);
                let cleared = ctl & !P2P_REDIRECT.bits();
                format!(
                    "setpci -s {} ECAP_ACS+0x6.w={cleared:04x}   # ACSCtl {ctl:#06x} -> {cleared:#06x}: clears ReqRedir, CmpltRedir, EgressCtrl (lost at reboot)",
                    b.bdf
                )
            })
            .collect();
        fix.push(format!("or boot with pci=disable_acs_redir={}", names.join(";")));
        (
            Verdict::Blocked,
            format!(
                "ACS redirect (ReqRedir/CmpltRedir/EgressCtrl) is on at {}: peer-to-peer requests and completions go up to the root complex instead of across the switch; with the IOMMU translating they fault, without it they rely on the root complex forwarding peer-to-peer, which many CPUs do slowly or not at all",
                names.join(", ")
            ),
            fix,
        )
    } else {
        match class {
            PathClass::PIX | PathClass::PXB => (
                Verdict::Ok,
                format!(
                    "{class:?}: {}, no ACS redirect on the path; NCCL enables GPUDirect RDMA at this distance by default",
                    class.meaning()
                ),
                Vec::new(),
            ),
            PathClass::PHB | PathClass::NODE => (
                Verdict::Degraded,
                format!(
                    "{class:?}: {}; NCCL turns GPUDirect RDMA off past PXB by default, and root-complex peer-to-peer throughput depends on the CPU",
                    class.meaning()
                ),
                vec![
                    "put the GPU and NIC under one PCIe switch, or set NCCL_NET_GDR_LEVEL=PHB to try anyway"
                        .to_string(),
                ],
            ),
            PathClass::SYS => (
                Verdict::Blocked,
                format!("SYS: {}; GPUDirect RDMA across sockets is not supported for production use", class.meaning()),
                vec!["use a NIC on the GPU's NUMA node".to_string()],
            ),
        }
    };
    Pair { gpu: g.bdf.clone(), nic: n.bdf.clone(), class, bridges, nic_ats, verdict, reason, fix }
}
