//! What the mlx5 backend would find on this host, read from sysfs and procfs
//! (the live trees or captured copies), without opening any device: the
//! RDMA devices and their ports, whether each is mlx5, how GPU memory would
//! be registered, and which doorbell mode would be chosen, with the reason.
//!
//! Sources: `/sys/class/infiniband/<dev>/{device/driver,ports/<n>/link_layer,
//! ports/<n>/state,fw_ver,hca_type}` (the kernel's ib_core sysfs ABI,
//! Documentation/ABI/stable/sysfs-class-infiniband), `/proc/driver/nvidia/
//! params` (the nvidia driver's `RegistryDwords`), `/sys/module/
//! nvidia_peermem`, `/proc/driver/nvidia/version` (open or proprietary
//! kernel modules) and `/proc/sys/kernel/osrelease` (dma-buf needs ≥ 5.12).

use crate::hostfile;
use serde::Serialize;
use std::path::Path;

/// One port of an RDMA device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    /// 1-based port number.
    pub num: u8,
    /// `InfiniBand` or `Ethernet` (RoCE), as sysfs spells it.
    pub link_layer: String,
    /// `4: ACTIVE` and so on.
    pub state: String,
}

/// One RDMA device under `/sys/class/infiniband`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaDevice {
    /// `mlx5_0`, `rxe0`…
    pub name: String,
    /// Kernel driver of the PCI function (`mlx5_core`), when linked.
    pub driver: Option<String>,
    /// Driven by mlx5 (ConnectX/BlueField): the name or the driver says so.
    pub mlx5: bool,
    /// PCI address of the function.
    pub pci: Option<String>,
    /// Firmware version.
    pub fw_ver: Option<String>,
    /// `MT4129` and so on.
    pub hca_type: Option<String>,
    /// Ports.
    pub ports: Vec<Port>,
}

/// How the device code's doorbell reaches the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DoorbellMode {
    /// The UAR page is mapped into the GPU (`cudaHostRegister(...,
    /// cudaHostRegisterIoMemory)`): GPU threads store the doorbell themselves.
    GpuDoorbell,
    /// The GPU writes the doorbell value into a host mailbox; a CPU thread
    /// forwards it to the UAR (`PeerMappingOverride` missing, or the mapping refused).
    CpuProxy,
    /// No GPU: the device code runs on CPU threads and stores to the UAR directly.
    Host,
}

/// How GPU buffers get registered with the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GpuMemPath {
    /// `cuMemGetHandleForAddressRange` dma-buf → `ibv_reg_dmabuf_mr` /
    /// `mlx5dv_devx_umem_reg_ex`.
    DmaBuf,
    /// `nvidia_peermem` lets `ibv_reg_mr` pin GPU memory.
    Peermem,
    /// Neither: only host-pinned buffers.
    None,
}

/// The probe's findings.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// RDMA devices in sysfs.
    pub devices: Vec<RdmaDevice>,
    /// The nvidia driver is loaded.
    pub nvidia: bool,
    /// `PeerMappingOverride=1` is in the driver's `RegistryDwords`.
    pub peer_mapping_override: bool,
    /// The mode the backend would start in.
    pub mode: DoorbellMode,
    /// Why.
    pub mode_reason: String,
    /// GPU memory registration path.
    pub gpu_mem: GpuMemPath,
    /// Why.
    pub gpu_mem_reason: String,
    /// Soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited or unreadable),
    /// from `<proc>/self/limits`: `ibv_reg_mr` pins what it registers and
    /// fails with ENOMEM past it.
    pub memlock: Option<u64>,
    /// Whether `<proc>/self/limits` was read and names the limit: `memlock`
    /// `None` means unlimited only when this is true.
    pub memlock_known: bool,
}

/// Bytes `marrow bench mlx5` registers (its buffer) plus what verbs pins
/// for its rings: below this the run cannot start.
pub const MEMLOCK_NEEDED: u64 = 2 << 20;

/// The soft "Max locked memory" limit from a `/proc/<pid>/limits` text.
pub fn memlock_limit(limits: &str) -> Option<u64> {
    let l = limits.lines().find(|l| l.starts_with("Max locked memory"))?;
    let soft = l.trim_start_matches("Max locked memory").split_whitespace().next()?;
    soft.parse().ok()
}

fn read_trim(p: &Path) -> Option<String> {
    hostfile::read_text(p, hostfile::ATTRIBUTE_MAX).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The RDMA devices under `<sysfs>/class/infiniband`, sorted by name.
pub fn devices(sysfs: &Path) -> Vec<RdmaDevice> {
    let dir = sysfs.join("class/infiniband");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let d = dir.join(&name);
            let link_name = |p: &Path| {
                std::fs::read_link(p).ok().and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
            };
            let driver = link_name(&d.join("device/driver"));
            let pci = link_name(&d.join("device"));
            let mut ports: Vec<Port> = std::fs::read_dir(d.join("ports"))
                .map(|r| {
                    r.filter_map(|e| e.ok())
                        .filter_map(|e| {
                            let num: u8 = e.file_name().to_string_lossy().parse().ok()?;
                            Some(Port {
                                num,
                                link_layer: read_trim(&e.path().join("link_layer")).unwrap_or_else(|| "unknown".into()),
                                state: read_trim(&e.path().join("state")).unwrap_or_else(|| "unknown".into()),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            ports.sort_by_key(|p| p.num);
            let mlx5 = name.starts_with("mlx5_") || driver.as_deref() == Some("mlx5_core");
            RdmaDevice {
                fw_ver: read_trim(&d.join("fw_ver")),
                hca_type: read_trim(&d.join("hca_type")),
                name,
                driver,
                mlx5,
                pci,
                ports,
            }
        })
        .collect()
}

/// `major.minor` of a kernel release string (`6.1.0-13-amd64` → (6, 1)).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The doorbell mode and GPU memory path this host would get, from its
/// nvidia parameters and modules. `is_root`: the nvidia driver lets an
/// administrator map MMIO to the GPU without `PeerMappingOverride`
/// (`osmemdesc.c`, quoted in open-gpu-kernel-modules discussion #1053).
pub fn probe(sysfs: &Path, proc_root: &Path, is_root: bool) -> Probe {
    let devices = devices(sysfs);
    let params = hostfile::read_text(&proc_root.join("driver/nvidia/params"), hostfile::PROC_TEXT_MAX);
    let nvidia = params.is_some() || sysfs.join("module/nvidia").exists();
    let registry = params
        .as_deref()
        .unwrap_or("")
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.trim() == "RegistryDwords")
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
        })
        .unwrap_or_default();
    let peer_mapping_override =
        registry.split(';').any(|kv| kv.trim().replace(' ', "").eq_ignore_ascii_case("PeerMappingOverride=1"));
    let (mode, mode_reason) = if !nvidia {
        (
            DoorbellMode::Host,
            "no nvidia driver loaded: the device code runs on CPU threads and stores to the UAR itself".to_string(),
        )
    } else if peer_mapping_override {
        (DoorbellMode::GpuDoorbell, "RegistryDwords has PeerMappingOverride=1: the UAR can be mapped into the GPU with cudaHostRegister(IoMemory)".to_string())
    } else if is_root {
        (DoorbellMode::GpuDoorbell, "running as root: the driver maps MMIO into the GPU for administrators without PeerMappingOverride (falls back to the CPU proxy if cudaHostRegister(IoMemory) is refused)".to_string())
    } else {
        (
            DoorbellMode::CpuProxy,
            "PeerMappingOverride=1 is not in the nvidia RegistryDwords and this is not root: cudaHostRegister(IoMemory) of the UAR would be refused, so a CPU thread forwards doorbells (set options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\" and reload the driver for GPU doorbells)".to_string(),
        )
    };
    let kernel = read_trim(&proc_root.join("sys/kernel/osrelease"));
    let kver = kernel.as_deref().and_then(kernel_version);
    let open_modules =
        read_trim(&proc_root.join("driver/nvidia/version")).is_some_and(|v| v.contains("Open Kernel Module"));
    let peermem = sysfs.join("module/nvidia_peermem").exists();
    let (gpu_mem, gpu_mem_reason) = if !nvidia {
        (GpuMemPath::None, "no nvidia driver: host-pinned buffers only".to_string())
    } else if open_modules && kver.is_some_and(|v| v >= (5, 12)) {
        (
            GpuMemPath::DmaBuf,
            format!("open nvidia kernel modules and kernel {} (dma-buf needs >= 5.12)", kernel.unwrap_or_default()),
        )
    } else if peermem {
        (GpuMemPath::Peermem, "nvidia_peermem is loaded".to_string())
    } else {
        (
            GpuMemPath::None,
            format!(
                "neither dma-buf ({}) nor nvidia_peermem (not loaded): GPU buffers cannot be registered; modprobe nvidia_peermem or use the open kernel modules",
                if open_modules {
                    format!("kernel {} < 5.12", kernel.unwrap_or_default())
                } else {
                    "proprietary kernel modules".to_string()
                }
            ),
        )
    };
    let limits = hostfile::read_text(&proc_root.join("self/limits"), hostfile::PROC_TEXT_MAX);
    let memlock = limits.as_deref().and_then(memlock_limit);
    let memlock_known = limits.as_deref().is_some_and(|t| t.lines().any(|l| l.starts_with("Max locked memory")));
    Probe { devices, nvidia, peer_mapping_override, mode, mode_reason, gpu_mem, gpu_mem_reason, memlock, memlock_known }
}

/// Why there is no usable RDMA device, naming what to install or load.
pub fn no_device_reason(sysfs: &Path) -> String {
    let dir = sysfs.join("class/infiniband");
    let devs = devices(sysfs);
    if !dir.exists() || devs.is_empty() {
        return format!(
            "{} is empty or absent; on a ConnectX node install rdma-core and ibverbs-providers and load the driver (modprobe mlx5_core mlx5_ib)",
            dir.display()
        );
    }
    let names: Vec<String> =
        devs.iter().map(|d| format!("{} ({})", d.name, d.driver.as_deref().unwrap_or("driver unknown"))).collect();
    format!("no mlx5 device among {}: marrow's backend drives ConnectX (mlx5) only", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("marrow-verbs-probe-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn add_dev(root: &Path, name: &str, driver: &str, bdf: &str, ll: &str) {
        let pci = root.join("sys/devices/pci0000:00").join(bdf);
        fs::create_dir_all(&pci).unwrap();
        let drv = root.join("sys/bus/pci/drivers").join(driver);
        fs::create_dir_all(&drv).unwrap();
        std::os::unix::fs::symlink(&drv, pci.join("driver")).unwrap();
        let d = root.join("sys/class/infiniband").join(name);
        fs::create_dir_all(d.join("ports/1")).unwrap();
        std::os::unix::fs::symlink(&pci, d.join("device")).unwrap();
        fs::write(d.join("ports/1/link_layer"), format!("{ll}\n")).unwrap();
        fs::write(d.join("ports/1/state"), "4: ACTIVE\n").unwrap();
        fs::write(d.join("fw_ver"), "28.39.1002\n").unwrap();
        fs::write(d.join("hca_type"), "MT4129\n").unwrap();
    }

    #[test]
    fn finds_mlx5_devices_ports_and_link_layers() {
        let r = tree("devs");
        add_dev(&r, "mlx5_0", "mlx5_core", "0000:17:00.0", "InfiniBand");
        add_dev(&r, "rxe0", "virtio-pci", "0000:00:03.0", "Ethernet");
        let d = devices(&r.join("sys"));
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].name.as_str(), d[0].mlx5, d[0].driver.as_deref(), d[0].pci.as_deref()),
            ("mlx5_0", true, Some("mlx5_core"), Some("0000:17:00.0"))
        );
        assert_eq!(d[0].ports, vec![Port { num: 1, link_layer: "InfiniBand".into(), state: "4: ACTIVE".into() }]);
        assert_eq!((d[0].fw_ver.as_deref(), d[0].hca_type.as_deref()), (Some("28.39.1002"), Some("MT4129")));
        assert!(!d[1].mlx5);
        assert!(!no_device_reason(&r.join("sys")).contains("is empty"));
        fs::remove_dir_all(r.join("sys/class/infiniband/mlx5_0")).unwrap();
        let why = no_device_reason(&r.join("sys"));
        assert!(why.contains("no mlx5 device among rxe0 (virtio-pci)"), "{why}");
        let _ = fs::remove_dir_all(&r);
    }

    #[test]
    fn no_infiniband_class_names_what_to_install() {
        let r = tree("empty");
        let why = no_device_reason(&r.join("sys"));
        assert!(
            why.contains("class/infiniband is empty or absent")
                && why.contains("ibverbs-providers")
                && why.contains("mlx5_ib"),
            "{why}"
        );
        let p = probe(&r.join("sys"), &r.join("proc"), false);
        assert!(p.devices.is_empty());
        assert_eq!((p.mode, p.gpu_mem), (DoorbellMode::Host, GpuMemPath::None));
        let _ = fs::remove_dir_all(&r);
    }

    #[test]
    fn mode_follows_peer_mapping_override_and_root() {
        let r = tree("mode");
        let proc_ = r.join("proc");
        fs::create_dir_all(proc_.join("driver/nvidia")).unwrap();
        fs::create_dir_all(proc_.join("sys/kernel")).unwrap();
        fs::write(proc_.join("driver/nvidia/params"), "EnableStreamMemOPs: 1\nRegistryDwords: \"\"\n").unwrap();
        fs::write(proc_.join("sys/kernel/osrelease"), "6.1.0-13-amd64\n").unwrap();
        fs::write(
            proc_.join("driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06\n",
        )
        .unwrap();
        let p = probe(&r.join("sys"), &proc_, false);
        assert_eq!(p.mode, DoorbellMode::CpuProxy);
        assert!(
            p.mode_reason.contains("PeerMappingOverride=1 is not in") && p.mode_reason.contains("NVreg_RegistryDwords"),
            "{}",
            p.mode_reason
        );
        assert_eq!(p.gpu_mem, GpuMemPath::DmaBuf);
        assert_eq!(probe(&r.join("sys"), &proc_, true).mode, DoorbellMode::GpuDoorbell);
        fs::write(
            proc_.join("driver/nvidia/params"),
            "RegistryDwords: \"RMForceStaticBar1=1;PeerMappingOverride=1;\"\n",
        )
        .unwrap();
        let p = probe(&r.join("sys"), &proc_, false);
        assert!(p.peer_mapping_override);
        assert_eq!(p.mode, DoorbellMode::GpuDoorbell);
        // Proprietary modules: dma-buf is out; peermem decides.
        fs::write(proc_.join("driver/nvidia/version"), "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06\n")
            .unwrap();
        assert_eq!(probe(&r.join("sys"), &proc_, false).gpu_mem, GpuMemPath::None);
        fs::create_dir_all(r.join("sys/module/nvidia_peermem")).unwrap();
        assert_eq!(probe(&r.join("sys"), &proc_, false).gpu_mem, GpuMemPath::Peermem);
        let _ = fs::remove_dir_all(&r);
    }

    #[test]
    fn memlock_limits_parse() {
        let t = "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                8388608              bytes     \n";
        assert_eq!(memlock_limit(t), Some(65536));
        assert_eq!(memlock_limit("Max locked memory         unlimited            unlimited            bytes\n"), None);
        assert_eq!(memlock_limit(""), None);
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(kernel_version("6.1.0-13-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("5.11.22"), Some((5, 11)));
        assert!(kernel_version("5.11.0").unwrap() < (5, 12));
        assert_eq!(kernel_version("x"), None);
    }
}
