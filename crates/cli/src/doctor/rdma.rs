//! The "RDMA backend" section of `marrow doctor`: can the mlx5 backend run
//! here, on which devices, in which doorbell mode, and why; and every RDMA
//! device of any provider with the backends it can run (mlx5 direct
//! doorbells on a ConnectX; the verbs proxy on any device, libibverbs alone). The library
//! check loads rdma-core for real (this host); devices, ports and the mode
//! come from the sysfs/procfs roots given (live or captured).

use crate::print::escape;
use marrow_verbs::probe::{self, DoorbellMode, GpuMemPath, RdmaDevice};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct Backend {
    /// `loaded (paths)` or the loader's error naming the package.
    pub libibverbs: String,
    pub libibverbs_ok: bool,
    pub devices: Vec<RdmaDevice>,
    pub mode: DoorbellMode,
    pub mode_reason: String,
    pub gpu_mem: GpuMemPath,
    pub gpu_mem_reason: String,
    /// Soft memlock limit in bytes; `None` when unlimited or unknown.
    pub memlock: Option<u64>,
    /// Whether the limit could be read at all (`<proc>/self/limits`).
    pub memlock_known: bool,
    /// Set when the backend cannot start: what is missing.
    pub blocker: Option<String>,
    /// libibverbs alone (what the verbs proxy loads): `loaded (path)` or the error.
    pub verbs_proxy_lib: String,
    /// Set when the verbs proxy cannot start on any device: what is missing.
    pub verbs_proxy_blocker: Option<String>,
}

/// The backends device `d` can run: the verbs proxy on any provider, and
/// the mlx5 direct doorbells on a ConnectX as well.
pub fn backends(d: &RdmaDevice) -> &'static [&'static str] {
    if d.mlx5 { &["mlx5 direct doorbells", "verbs proxy"] } else { &["verbs proxy"] }
}

fn active(d: &RdmaDevice) -> bool {
    d.ports.iter().any(|p| p.state.contains("ACTIVE"))
}

pub fn read(sysfs: &Path, proc_root: &Path) -> Backend {
    let (libibverbs, libibverbs_ok) = match marrow_verbs::Verbs::load() {
        Ok(v) => (format!("loaded ({}, {})", v.paths.0, v.paths.1), true),
        Err(e) => (e.to_string(), false),
    };
    let p = probe::probe(sysfs, proc_root, marrow_transport::mlx5::is_root());
    let blocker = if !libibverbs_ok {
        Some(libibverbs.clone())
    } else if !p.devices.iter().any(|d| d.mlx5) {
        Some(escape(&probe::no_device_reason(sysfs)).into_owned())
    } else if !p.devices.iter().filter(|d| d.mlx5).any(|d| d.ports.iter().any(|port| port.state.contains("ACTIVE"))) {
        Some(
            "no mlx5 port is ACTIVE: check the cable and link (ibstat), and on InfiniBand a running subnet manager"
                .into(),
        )
    } else if p.memlock.is_some_and(|m| m < probe::MEMLOCK_NEEDED) {
        Some(format!(
            "max locked memory is {} KiB: ibv_reg_mr pins what it registers and fails with ENOMEM; run ulimit -l unlimited (or set memlock in /etc/security/limits.conf)",
            p.memlock.unwrap_or(0) >> 10
        ))
    } else {
        None
    };
    let (verbs_proxy_lib, ibv_ok) = match marrow_verbs::Ibverbs::load() {
        Ok(v) => (format!("loaded ({})", v.path), true),
        Err(e) => (e.to_string(), false),
    };
    let verbs_proxy_blocker = if !ibv_ok {
        Some(verbs_proxy_lib.clone())
    } else if p.devices.is_empty() {
        Some(format!(
            "{}; any Ethernet NIC can carry Soft-RoCE: rdma link add rxe0 type rxe netdev IF",
            escape(&probe::no_device_reason(sysfs))
        ))
    } else if !p.devices.iter().any(active) {
        Some("no RDMA port is ACTIVE (RoCE: is the netdev up? rxe: rdma link add rxe0 type rxe netdev IF)".into())
    } else {
        None
    };
    let memlock = p.memlock;
    let memlock_known = p.memlock_known;
    Backend {
        libibverbs,
        libibverbs_ok,
        devices: p.devices.into_iter().map(escaped).collect(),
        mode: p.mode,
        mode_reason: p.mode_reason,
        gpu_mem: p.gpu_mem,
        gpu_mem_reason: p.gpu_mem_reason,
        memlock,
        memlock_known,
        blocker,
        verbs_proxy_lib,
        verbs_proxy_blocker,
    }
}

impl Backend {
    /// The section for a host that was not probed (no library loaded, no
    /// devices): what the report is assembled with where only file contents
    /// are given, in property tests and the fuzz target.
    pub fn unprobed() -> Backend {
        let why = "not probed".to_string();
        Backend {
            libibverbs: why.clone(),
            libibverbs_ok: false,
            devices: Vec::new(),
            mode: DoorbellMode::Host,
            mode_reason: why.clone(),
            gpu_mem: GpuMemPath::None,
            gpu_mem_reason: why.clone(),
            memlock: None,
            memlock_known: false,
            blocker: Some(why.clone()),
            verbs_proxy_lib: why.clone(),
            verbs_proxy_blocker: Some(why),
        }
    }
}

/// The device with every name and attribute read from sysfs escaped for the terminal.
fn escaped(d: RdmaDevice) -> RdmaDevice {
    let e = |s: String| escape(&s).into_owned();
    RdmaDevice {
        name: e(d.name),
        driver: d.driver.map(e),
        mlx5: d.mlx5,
        pci: d.pci.map(e),
        fw_ver: d.fw_ver.map(e),
        hca_type: d.hca_type.map(e),
        ports: d
            .ports
            .into_iter()
            .map(|p| probe::Port { num: p.num, link_layer: e(p.link_layer), state: e(p.state) })
            .collect(),
    }
}

pub fn render(b: &Backend, o: &mut String) {
    let _ = writeln!(o, "RDMA backend (mlx5):");
    let _ = writeln!(o, "  libibverbs: {}", b.libibverbs);
    if b.devices.is_empty() {
        let _ = writeln!(o, "  devices: none");
    }
    for d in &b.devices {
        let ports: Vec<String> =
            d.ports.iter().map(|p| format!("port {} {} {}", p.num, p.link_layer, p.state)).collect();
        let _ = writeln!(
            o,
            "  {}{}: {}{}{}{}; backends: {}",
            d.name,
            d.pci.as_ref().map(|p| format!(" ({p})")).unwrap_or_default(),
            match (d.mlx5, d.driver.as_deref(), &d.pci) {
                (true, _, _) => "mlx5".to_string(),
                (false, Some(drv), _) => format!("not mlx5 (driver {drv})"),
                (false, None, None) => "not mlx5 (no PCI function: a software device such as rxe or siw)".to_string(),
                (false, None, Some(_)) => "not mlx5 (driver unknown)".to_string(),
            },
            d.hca_type.as_ref().map(|t| format!(", {t}")).unwrap_or_default(),
            d.fw_ver.as_ref().map(|f| format!(", fw {f}")).unwrap_or_default(),
            if ports.is_empty() { String::new() } else { format!("; {}", ports.join(", ")) },
            backends(d).join(", ")
        );
    }
    let mode = match b.mode {
        DoorbellMode::GpuDoorbell => "GPU doorbell",
        DoorbellMode::CpuProxy => "CPU proxy",
        DoorbellMode::Host => "host (CPU threads)",
    };
    let _ = writeln!(o, "  doorbell mode: {mode}: {}", b.mode_reason);
    let mem = match b.gpu_mem {
        GpuMemPath::DmaBuf => "dma-buf",
        GpuMemPath::Peermem => "nvidia_peermem",
        GpuMemPath::None => "none",
    };
    let _ = writeln!(o, "  GPU memory registration: {mem}: {}", b.gpu_mem_reason);
    let _ = writeln!(
        o,
        "  max locked memory: {}",
        match (b.memlock, b.memlock_known) {
            (Some(m), _) => format!("{} KiB", m >> 10),
            (None, true) => "unlimited".to_string(),
            (None, false) => "unknown (the limits file could not be read)".to_string(),
        }
    );
    match &b.blocker {
        Some(why) => {
            let _ = writeln!(o, "  backend: unavailable: {why}");
        }
        None => {
            let _ = writeln!(
                o,
                "  backend: ready (marrow bench mlx5 --listen 0.0.0.0:18515 on one node, --connect on the other)"
            );
        }
    }
    let _ = writeln!(o, "verbs proxy (any provider, libibverbs alone: {}):", b.verbs_proxy_lib);
    match &b.verbs_proxy_blocker {
        Some(why) => {
            let _ = writeln!(o, "  verbs proxy: unavailable: {why}");
        }
        None => {
            let ready: Vec<&str> = b.devices.iter().filter(|d| active(d)).map(|d| d.name.as_str()).collect();
            let _ = writeln!(
                o,
                "  verbs proxy: ready on {} (marrow bench verbs --device {} --listen 0.0.0.0:18900, --connect on the peer)",
                ready.join(", "),
                ready.first().copied().unwrap_or("DEV")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_fake_tree_with_a_connectx_and_no_regkey_says_cpu_proxy_and_why() {
        let r = std::env::temp_dir().join(format!("marrow-doctor-rdma-{}", std::process::id()));
        let _ = fs::remove_dir_all(&r);
        let pci = r.join("sys/devices/pci0000:00/0000:17:00.0");
        fs::create_dir_all(&pci).unwrap();
        fs::create_dir_all(r.join("sys/bus/pci/drivers/mlx5_core")).unwrap();
        std::os::unix::fs::symlink(r.join("sys/bus/pci/drivers/mlx5_core"), pci.join("driver")).unwrap();
        let ib = r.join("sys/class/infiniband/mlx5_0");
        fs::create_dir_all(ib.join("ports/1")).unwrap();
        std::os::unix::fs::symlink(&pci, ib.join("device")).unwrap();
        fs::write(ib.join("ports/1/link_layer"), "Ethernet\n").unwrap();
        fs::write(ib.join("ports/1/state"), "4: ACTIVE\n").unwrap();
        fs::write(ib.join("hca_type"), "MT4129\n").unwrap();
        // Soft-RoCE: no PCI function, any provider.
        let rxe = r.join("sys/class/infiniband/rxe0");
        fs::create_dir_all(rxe.join("ports/1")).unwrap();
        fs::write(rxe.join("ports/1/link_layer"), "Ethernet\n").unwrap();
        fs::write(rxe.join("ports/1/state"), "4: ACTIVE\n").unwrap();
        fs::create_dir_all(r.join("proc/driver/nvidia")).unwrap();
        fs::write(r.join("proc/driver/nvidia/params"), "RegistryDwords: \"\"\n").unwrap();
        fs::create_dir_all(r.join("proc/self")).unwrap();
        fs::write(
            r.join("proc/self/limits"),
            "Max locked memory         unlimited            unlimited            bytes\n",
        )
        .unwrap();
        let b = read(&r.join("sys"), &r.join("proc"));
        let mut o = String::new();
        render(&b, &mut o);
        assert!(o.contains("mlx5_0 (0000:17:00.0): mlx5, MT4129; port 1 Ethernet 4: ACTIVE"), "{o}");
        assert!(o.contains("ACTIVE; backends: mlx5 direct doorbells, verbs proxy\n"), "{o}");
        assert!(
            o.contains(
                "rxe0: not mlx5 (no PCI function: a software device such as rxe or siw); port 1 Ethernet 4: ACTIVE; backends: verbs proxy\n"
            ),
            "{o}"
        );
        if b.verbs_proxy_blocker.is_none() {
            assert!(o.contains("verbs proxy: ready on mlx5_0, rxe0"), "{o}");
        } else {
            assert!(o.contains("verbs proxy: unavailable: libibverbs"), "{o}");
        }
        if !marrow_transport::mlx5::is_root() {
            assert!(o.contains("doorbell mode: CPU proxy: PeerMappingOverride=1 is not in"), "{o}");
        }
        // The library is real on this host: loaded when rdma-core is installed.
        if b.libibverbs_ok {
            assert!(o.contains("backend: ready"), "{o}");
        } else {
            assert!(o.contains("backend: unavailable") && o.contains("apt install"), "{o}");
        }
        assert!(o.contains("max locked memory: unlimited"), "{o}");
        // A small memlock limit blocks the backend, with the fix.
        fs::write(
            r.join("proc/self/limits"),
            "Max locked memory         65536                65536                bytes\n",
        )
        .unwrap();
        let b = read(&r.join("sys"), &r.join("proc"));
        if b.libibverbs_ok {
            assert!(
                b.blocker.as_deref().is_some_and(|w| w.contains("64 KiB") && w.contains("ulimit -l unlimited")),
                "{:?}",
                b.blocker
            );
        }
        let _ = fs::remove_dir_all(&r);
    }

    #[test]
    fn no_devices_names_what_to_install() {
        let r = std::env::temp_dir().join(format!("marrow-doctor-rdma-empty-{}", std::process::id()));
        let b = read(&r.join("sys"), &r.join("proc"));
        let mut o = String::new();
        render(&b, &mut o);
        assert!(o.contains("devices: none") && o.contains("doorbell mode: host (CPU threads)"), "{o}");
        assert!(o.contains("backend: unavailable"), "{o}");
        assert!(b.blocker.unwrap().contains(if b.libibverbs_ok { "mlx5_ib" } else { "apt install" }));
    }
}
