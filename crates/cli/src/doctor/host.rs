//! Host settings that decide whether GPU-initiated RDMA can work: the IOMMU
//! mode, the nvidia driver's parameters, and how NIC and GPU memory meet
//! (nvidia_peermem or DMA-BUF). Sources: `docs/SOURCES.md` §2.5 and §3.3
//! (NCCL's `gdr.cc`; NVSHMEM and DeepEP issues for the driver parameters).

use crate::print::escape;
use marrow_verbs::hostfile::{self, PROC_TEXT_MAX};
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

/// What the host files hold, as read: `None` when absent, `Err` with the
/// reason when there but unreadable.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// `<proc>/cmdline`.
    pub cmdline: Option<Result<Vec<u8>, String>>,
    /// `<proc>/driver/nvidia/params`.
    pub nvidia_params: Option<Result<Vec<u8>, String>>,
    /// Entries of `<sysfs>/class/iommu`.
    pub iommu_units: usize,
    /// `<sysfs>/module/nvidia` exists.
    pub nvidia_module: bool,
    /// `<sysfs>/module/nvidia_peermem` exists.
    pub nvidia_peermem: bool,
}

fn read_proc_text(p: &Path) -> Option<Result<Vec<u8>, String>> {
    match hostfile::read(p, PROC_TEXT_MAX) {
        Ok(b) => Some(Ok(b)),
        Err(e) if e.is_absent() => None,
        Err(e) => Some(Err(format!("{}: {e}", crate::print::escape_path(p)))),
    }
}

pub fn read(sysfs: &Path, proc_root: &Path) -> Host {
    from_files(Files {
        cmdline: read_proc_text(&proc_root.join("cmdline")),
        nvidia_params: read_proc_text(&proc_root.join("driver/nvidia/params")),
        iommu_units: std::fs::read_dir(sysfs.join("class/iommu")).map(|d| d.count()).unwrap_or(0),
        nvidia_module: sysfs.join("module/nvidia").exists(),
        nvidia_peermem: sysfs.join("module/nvidia_peermem").exists(),
    })
}

/// The host settings from the files' contents; an unreadable file is a note.
pub fn from_files(files: Files) -> Host {
    let mut notes = Vec::new();
    let mut text = |f: Option<Result<Vec<u8>, String>>| match f {
        Some(Ok(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
        Some(Err(e)) => {
            notes.push(format!("cannot read {e}"));
            None
        }
        None => None,
    };
    let cmdline = text(files.cmdline).unwrap_or_default();
    let params_text = text(files.nvidia_params);
    let cmdline_iommu: Vec<String> = cmdline
        .split_whitespace()
        .filter(|w| w.contains("iommu") || w.starts_with("pci="))
        .map(|w| escape(w).into_owned())
        .collect();
    let iommu_units = files.iommu_units;
    let pt = cmdline_iommu.iter().any(|w| w == "iommu=pt" || w == "iommu.passthrough=1");
    let iommu = match (iommu_units, pt) {
        (0, _) => "off (no /sys/class/iommu units): DMA addresses are physical".to_string(),
        (n, true) => format!("on, passthrough ({n} units, iommu=pt): device DMA is not translated"),
        (n, false) => format!(
            "on, translating ({n} units, no iommu=pt): peer-to-peer needs IOMMU mappings, and ACS redirect makes P2P fault"
        ),
    };
    let nvidia_params: Vec<(String, String)> = params_text
        .as_deref()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), escape(v.trim().trim_matches('"')).into_owned()))
        .filter(|(k, _)| matches!(k.as_str(), "EnableStreamMemOPs" | "RegistryDwords"))
        .collect();
    let nvidia_driver = params_text.is_some() || files.nvidia_module;
    let nvidia_peermem = files.nvidia_peermem;
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
