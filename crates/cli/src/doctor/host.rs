//! Host settings that decide whether GPU-initiated RDMA can work: the IOMMU
//! mode, the nvidia driver's parameters, and how NIC and GPU memory meet
//! (nvidia_peermem or DMA-BUF). Sources: `docs/SOURCES.md` §2.5 and §3.3
//! (NCCL's `gdr.cc`; NVSHMEM and DeepEP issues for the driver parameters).

use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub iommu: String,
    pub cmdline_iommu: Vec<String>,
    /// `/proc/driver/nvidia/params` entries that matter, when present.
    pub nvidia_params: Vec<(String, String)>,
    pub nvidia_driver: bool,
    pub nvidia_peermem: bool,
    pub notes: Vec<String>,
}

pub fn read(sysfs: &Path, proc_root: &Path) -> Host {
    let cmdline = std::fs::read_to_string(proc_root.join("cmdline")).unwrap_or_default();
    let cmdline_iommu: Vec<String> = cmdline
        .split_whitespace()
        .filter(|w| w.contains("iommu") || w.starts_with("pci="))
        .map(str::to_string)
        .collect();
    let iommu_units = std::fs::read_dir(sysfs.join("class/iommu")).map(|d| d.count()).unwrap_or(0);
    let pt = cmdline_iommu.iter().any(|w| w == "iommu=pt" || w == "iommu.passthrough=1");
    let iommu = match (iommu_units, pt) {
        (0, _) => "off (no /sys/class/iommu units): DMA addresses are physical".to_string(),
        (n, true) => format!("on, passthrough ({n} units, iommu=pt): device DMA is not translated"),
        (n, false) => format!(
            "on, translating ({n} units, no iommu=pt): peer-to-peer needs IOMMU mappings, and ACS redirect makes P2P fault"
        ),
    };
    let params_text = std::fs::read_to_string(proc_root.join("driver/nvidia/params")).ok();
    let nvidia_params: Vec<(String, String)> = params_text
        .as_deref()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .filter(|(k, _)| matches!(k.as_str(), "EnableStreamMemOPs" | "RegistryDwords"))
        .collect();
    let nvidia_driver = params_text.is_some() || sysfs.join("module/nvidia").exists();
    let nvidia_peermem = sysfs.join("module/nvidia_peermem").exists();
    let mut notes = Vec::new();
    if nvidia_driver {
        let get = |k: &str| nvidia_params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        if get("EnableStreamMemOPs") != Some("1") {
            notes.push(
                "nvidia EnableStreamMemOPs is not 1: NVSHMEM/DeepEP IBGDA setups set NVreg_EnableStreamMemOPs=1".into(),
            );
        }
        if !get("RegistryDwords").is_some_and(|v| v.contains("PeerMappingOverride=1")) {
            notes.push("nvidia RegistryDwords lacks PeerMappingOverride=1: set NVreg_RegistryDwords=\"PeerMappingOverride=1;\" for GPU-initiated NIC doorbells (not needed for CPU-assisted IBGDA)".into());
        }
        if !nvidia_peermem {
            notes.push("nvidia_peermem is not loaded: GPU memory registration needs it, or DMA-BUF (open kernel modules, NCCL_DMABUF_ENABLE=1)".into());
        }
    }
    Host { iommu, cmdline_iommu, nvidia_params, nvidia_driver, nvidia_peermem, notes }
}
