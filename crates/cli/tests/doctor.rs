//! `marrow doctor` on sysfs trees assembled from the real config dumps in
//! tests/fixtures/pcie: a Haswell-E root port (8086:2f04, ACS RR/CR on), a
//! PLX PEX 8796 upstream port, PLX PEX 9716 downstream ports, the H200 and a
//! ConnectX-3 Pro (15b3:1007). The 9716 dump is 256 bytes; its ports get
//! an ACS capability at 0x100 (PLX PEX87xx/97xx ports carry one; nccl #304)
//! whose control register each test sets. Expected classes are nvidia-smi's
//! meanings as NCCL computes them (docs/SOURCES.md §3.1).

mod common;

use marrow_pcie::dump::parse_lspci_text;
use std::path::PathBuf;
use std::process::Command;

fn fixture_fn(file: &str, addr: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/fixtures/pcie/{file}", env!("CARGO_MANIFEST_DIR"));
    if file.ends_with(".config") {
        return std::fs::read(path).unwrap();
    }
    let text = std::fs::read_to_string(path).unwrap();
    parse_lspci_text(&text).unwrap().into_iter().find(|f| f.address.ends_with(addr)).unwrap().bytes
}

fn root_port() -> Vec<u8> {
    fixture_fn("pciutils-tests/cap-aer-root", "00:02.0")
}
fn root_port_no_acs_redirect() -> Vec<u8> {
    fixture_fn("pcics/8086_2030.lspci-x.txt", "00:00.0")
}
fn upstream_port() -> Vec<u8> {
    let f = fixture_fn("pciutils-tests/cap-multicast", "");
    assert_eq!(&f[0..4], &[0xb5, 0x10, 0x96, 0x87]);
    f
}
/// The PEX 9716 downstream port with an ACS capability (cap: SV TB RR CR UF
/// EC DT) at 0x100 and `acs_ctl` in its control register.
fn downstream_port(acs_ctl: u16) -> Vec<u8> {
    let mut f = fixture_fn("pciutils-tests/cap-dpc", "");
    assert_eq!(&f[0..4], &[0xb5, 0x10, 0x16, 0x97]);
    f.resize(4096, 0);
    f[0x100..0x104].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
    f[0x104..0x106].copy_from_slice(&0x007fu16.to_le_bytes());
    f[0x106..0x108].copy_from_slice(&acs_ctl.to_le_bytes());
    f
}
fn gpu() -> Vec<u8> {
    fixture_fn("h200-vm/10de_2335_h200_00-06.0.config", "")
}
fn nic() -> Vec<u8> {
    let f = fixture_fn("pciutils-tests/cap-aer-root", "03:00.0");
    assert_eq!(&f[0..4], &[0xb3, 0x15, 0x07, 0x10]);
    f
}

struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("marrow-doctor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        std::fs::create_dir_all(root.join("proc")).unwrap();
        Tree { root }
    }
    /// Adds a function at `path` (`pci0000:00/0000:00:02.0/...`).
    fn add(&self, path: &str, config: Vec<u8>, numa: i32) -> &Self {
        let dir = self.root.join("sys/devices").join(path);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config"), config).unwrap();
        std::fs::write(dir.join("numa_node"), format!("{numa}\n")).unwrap();
        let bdf = path.rsplit('/').next().unwrap();
        std::os::unix::fs::symlink(format!("../../../devices/{path}"), self.root.join("sys/bus/pci/devices").join(bdf))
            .unwrap();
        self
    }
    fn proc_file(&self, rel: &str, text: &str) -> &Self {
        let p = self.root.join("proc").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }
    fn doctor(&self, json: bool) -> (i32, String) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_marrow"));
        c.args(["doctor", "--sysfs-root"]).arg(self.root.join("sys")).arg("--proc-root").arg(self.root.join("proc"));
        if json {
            c.arg("--json");
        }
        finish_within(c, 60)
    }
    /// `marrow doctor` with its address space capped at 1 GiB, so that a
    /// read without bound fails in the child rather than filling the machine.
    fn doctor_bounded(&self) -> (i32, String) {
        let mut c = Command::new("sh");
        c.arg("-c").arg("ulimit -v 1048576 && exec \"$0\" \"$@\"").arg(env!("CARGO_BIN_EXE_marrow"));
        c.args(["doctor", "--sysfs-root"]).arg(self.root.join("sys")).arg("--proc-root").arg(self.root.join("proc"));
        finish_within(c, 60)
    }
    /// The directory of the function at `path`, made without any file.
    fn bare(&self, path: &str) -> PathBuf {
        let dir = self.root.join("sys/devices").join(path);
        std::fs::create_dir_all(&dir).unwrap();
        let bdf = path.rsplit('/').next().unwrap();
        std::os::unix::fs::symlink(format!("../../../devices/{path}"), self.root.join("sys/bus/pci/devices").join(bdf))
            .unwrap();
        dir
    }
    fn fifo(&self, rel: &str) {
        let p = self.root.join(rel);
        let _ = std::fs::remove_file(&p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        assert!(Command::new("mkfifo").arg(&p).status().unwrap().success());
    }
}

/// The exit status and the output: stdout, then stderr.
fn finish_within(c: Command, secs: u64) -> (i32, String) {
    let r = common::finish_within(c, secs);
    let text = r.stdout + &r.stderr;
    (r.code.unwrap_or_else(|| panic!("marrow doctor was killed by a signal:\n{text}")), text)
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn one_switch(name: &str, acs_ctl: u16) -> Tree {
    let t = Tree::new(name);
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0", upstream_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", downstream_port(acs_ctl), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", downstream_port(acs_ctl), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", nic(), 0);
    t
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn one_switch_with_acs_redirect_is_blocked_and_names_the_bridges() {
    // 0x001d = SV|RR|CR|UF, what nccl #2079 found on AMD GPP bridges.
    let t = one_switch("acs-on", 0x001d);
    let (code, out) = t.doctor(false);
    eprintln!("{out}"); // shown with --nocapture: the report an engineer reads
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("GPU 0000:03:00.0 <-> NIC 0000:04:00.0: PIX -> BLOCKED"), "{out}");
    assert!(out.contains("bridge 0000:02:00.0 ACSCtl 0x001d (redirects P2P)"), "{out}");
    assert!(out.contains("setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0011"), "{out}");
    assert!(out.contains("setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0011"), "{out}");
    assert!(out.contains("pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"), "{out}");
    // The root port's own ACS redirect is above the switch: not on the path.
    assert!(!out.contains("bridge 0000:00:02.0"), "{out}");
    let (_, j) = t.doctor(true);
    let j = json(&j);
    assert_eq!(j["pairs"][0]["verdict"], "blocked");
    assert_eq!(j["pairs"][0]["class"], "PIX");
}

#[test]
fn one_switch_without_acs_redirect_is_ok() {
    let t = one_switch("acs-off", 0x0000);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PIX -> OK"), "{out}");
    assert!(out.contains("0000:03:00.0 10de:2335 [030200] GPU link 32GT/s x16 / 32GT/s x16"), "{out}");
}

#[test]
fn two_switch_levels_are_pxb() {
    let t = Tree::new("pxb");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0", upstream_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", upstream_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0", gpu(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:06:00.0", nic(), 0);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PXB -> OK"), "{out}");
}

#[test]
fn different_root_ports_are_phb() {
    let t = Tree::new("phb");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:00/0000:00:03.0", root_port_no_acs_redirect(), 0)
        .add("pci0000:00/0000:00:02.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:00/0000:00:03.0/0000:04:00.0", nic(), 0);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PHB -> DEGRADED"), "{out}");
}

#[test]
fn different_sockets_are_sys_and_same_node_host_bridges_are_node() {
    let t = Tree::new("sys");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:80/0000:80:02.0", root_port_no_acs_redirect(), 1)
        .add("pci0000:00/0000:00:02.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:80/0000:80:02.0/0000:81:00.0", nic(), 1);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("SYS -> BLOCKED"), "{out}");

    let t = Tree::new("node");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:40/0000:40:02.0", root_port_no_acs_redirect(), 0)
        .add("pci0000:00/0000:00:02.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:40/0000:40:02.0/0000:41:00.0", nic(), 0);
    let (_, out) = t.doctor(false);
    assert!(out.contains("NODE -> DEGRADED"), "{out}");
}

#[test]
fn host_settings_are_reported() {
    let t = one_switch("host", 0);
    std::fs::create_dir_all(t.root.join("sys/class/iommu/dmar0")).unwrap();
    t.proc_file("cmdline", "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt quiet\n").proc_file(
        "driver/nvidia/params",
        "ResmanDebugLevel: 4294967295\nEnableStreamMemOPs: 0\nRegistryDwords: \"\"\n",
    );
    let (_, out) = t.doctor(false);
    assert!(out.contains("IOMMU: on, passthrough (1 units, iommu=pt)"), "{out}");
    assert!(out.contains("kernel command line: intel_iommu=on iommu=pt"), "{out}");
    assert!(out.contains("EnableStreamMemOPs is not 1"), "{out}");
    assert!(out.contains("PeerMappingOverride=1"), "{out}");
    assert!(out.contains("nvidia_peermem is not loaded"), "{out}");
}

/// An RDMA device found through /sys/class/infiniband rather than its
/// vendor ID, with ATS enabled (the pciutils PASID/PRI/ATS dump).
#[test]
fn infiniband_class_device_and_its_ats() {
    let t = Tree::new("ib");
    let ats_fn = fixture_fn("pciutils-tests/cap-pasid-pri", "");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0", upstream_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", ats_fn, 0);
    let ib = t.root.join("sys/class/infiniband/mlx5_0");
    std::fs::create_dir_all(&ib).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0",
        ib.join("device"),
    )
    .unwrap();
    let (code, out) = t.doctor(false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("RDMA NICs: 0000:04:00.0 (mlx5_0)"), "{out}");
    assert!(out.contains("NIC ATS: enabled"), "{out}");
}

/// As a non-root user sees sysfs: 64 bytes of config space per function.
#[test]
fn truncated_config_space_gives_unknown_not_ok() {
    let t = Tree::new("nonroot");
    let cut = |mut v: Vec<u8>| {
        v.truncate(64);
        v
    };
    t.add("pci0000:00/0000:00:02.0", cut(root_port()), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0", cut(upstream_port()), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", cut(downstream_port(0x001d)), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", cut(downstream_port(0x001d)), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", cut(gpu()), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", cut(nic()), 0);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PIX -> UNKNOWN"), "{out}");
    assert!(out.contains("ACS unknown: only 64 bytes of config space readable"), "{out}");
    assert!(out.contains("run marrow doctor as root"), "{out}");
}

#[test]
fn unreadable_tree_is_an_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["doctor", "--sysfs-root", "/nonexistent-marrow"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("/nonexistent-marrow/bus/pci/devices"), "{err}");
}

/// A downstream port whose DPC has triggered (PCIe 6.0 §7.9.14.4: status
/// bit 0, reason 2 = ERR_FATAL, source 03:00.0) cuts the GPU off: blocked,
/// with the port named, whatever ACS says.
#[test]
fn dpc_triggered_on_the_path_is_blocked() {
    let mut port = downstream_port(0);
    // ACS at 0x100 now points to a DPC capability at 0x140.
    port[0x100..0x104].copy_from_slice(&(0x000du32 | (1 << 16) | (0x140 << 20)).to_le_bytes());
    port[0x140..0x144].copy_from_slice(&(0x001du32 | (1 << 16)).to_le_bytes());
    port[0x144..0x14c].copy_from_slice(&[0xc0, 0x00, 0x01, 0x00, 0x05, 0x00, 0x00, 0x03]);
    let t = Tree::new("dpc");
    t.add("pci0000:00/0000:00:02.0", root_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0", upstream_port(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", port, 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", downstream_port(0), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", gpu(), 0)
        .add("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", nic(), 0);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PIX -> BLOCKED"), "{out}");
    assert!(
        out.contains("Downstream Port Containment has triggered at 0000:02:00.0 (ERR_FATAL received, source 03:00.0)"),
        "{out}"
    );
    assert!(out.contains("! DPC triggered (ERR_FATAL received, source 03:00.0)"), "{out}");
    // The Haswell-E root port fixture really has lane errors logged on all eight lanes (lspci agrees).
    assert!(out.contains("! lane errors logged on lanes 0 1 2 3 4 5 6 7"), "{out}");
    let (_, out) = t.doctor(true);
    let j = json(&out);
    assert_eq!(j["pairs"][0]["verdict"], "blocked");
    assert_eq!(
        j["pairs"][0]["bridges"].as_array().unwrap().iter().filter(|b| !b["dpc_triggered"].is_null()).count(),
        1
    );
}

/// FIFOs where doctor reads a config, a sysfs attribute and procfs files:
/// each is opened without blocking, refused as not a regular file and named
/// in a warning; the rest of the report is unchanged.
#[test]
fn fifos_anywhere_doctor_reads_are_refused_without_blocking() {
    let t = one_switch("fifo", 0);
    t.fifo("sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/numa_node");
    t.fifo("sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0/resource");
    let dir = t.bare("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:05:00.0");
    assert!(Command::new("mkfifo").arg(dir.join("config")).status().unwrap().success());
    t.fifo("proc/cmdline");
    t.fifo("proc/driver/nvidia/params");
    t.fifo("proc/self/limits");
    let ib = t.root.join("sys/class/infiniband/mlx5_0");
    std::fs::create_dir_all(ib.join("ports/1")).unwrap();
    t.fifo("sys/class/infiniband/mlx5_0/ports/1/state");
    t.fifo("sys/class/infiniband/mlx5_0/fw_ver");
    let (code, out) = t.doctor(false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PIX -> OK"), "{out}");
    assert!(out.contains("0000:05:00.0 ????:???? [??????]"), "{out}");
    assert!(out.contains("! config unreadable: a FIFO, not a regular file"), "{out}");
    assert!(out.contains("! numa_node: a FIFO, not a regular file"), "{out}");
    assert!(out.contains("! resource: a FIFO, not a regular file"), "{out}");
    assert!(out.contains("proc/cmdline: a FIFO, not a regular file"), "{out}");
    assert!(out.contains("proc/driver/nvidia/params: a FIFO, not a regular file"), "{out}");
    assert!(out.contains("mlx5_0: mlx5; port 1 unknown unknown"), "{out}");
}

/// A config linked to /dev/zero is a character device: refused at once, not
/// read until memory runs out.
#[test]
fn a_config_linked_to_dev_zero_is_refused_not_read_without_bound() {
    let t = one_switch("devzero", 0);
    let dir = t.bare("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:05:00.0");
    std::os::unix::fs::symlink("/dev/zero", dir.join("config")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("numa_node")).unwrap();
    let (code, out) = t.doctor_bounded();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("! config unreadable: a character device, not a regular file"), "{out}");
    assert!(out.contains("! numa_node: a character device, not a regular file"), "{out}");
}

/// Configs of 0 and 63 bytes (no header) and of 5000 bytes (more than a
/// function has) are warned about, not shown as ffff:ffff.
#[test]
fn empty_short_and_oversized_configs_are_warned_not_shown_as_ffff() {
    let t = one_switch("short", 0);
    let base = "pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0";
    t.add(&format!("{base}/0000:05:00.0"), Vec::new(), 0)
        .add(&format!("{base}/0000:06:00.0"), nic()[..63].to_vec(), 0)
        .add(&format!("{base}/0000:07:00.0"), [nic(), vec![0; 5000]].concat()[..5000].to_vec(), 0);
    let (code, out) = t.doctor(false);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("ffff:ffff"), "{out}");
    assert!(out.contains("0000:05:00.0 ????:???? [??????]"), "{out}");
    assert!(out.contains("! config is empty: vendor, device and class unknown"), "{out}");
    assert!(out.contains("! config has 63 bytes, less than the 64-byte header"), "{out}");
    assert!(out.contains("! config unreadable: longer than 4096 bytes, the most such a file has"), "{out}");
    let (_, j) = t.doctor(true);
    let j = json(&j);
    let short = j["devices"].as_array().unwrap().iter().find(|d| d["bdf"] == "0000:06:00.0").unwrap().clone();
    assert_eq!(short["vendor_device"], "????:????");
}

/// Directory names (a function, an RDMA device) holding terminal escapes,
/// control and bidi characters are printed escaped, in text and JSON.
#[test]
fn names_with_escapes_controls_and_bidi_are_printed_escaped() {
    let t = one_switch("names", 0);
    let evil = "0000:05:00.0\x1b[2J\x07\u{202e}cba";
    t.add(&format!("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/{evil}"), nic(), 0);
    let ib = t.root.join("sys/class/infiniband/mlx5_\x1b]0;owned\x07");
    std::fs::create_dir_all(&ib).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0",
        ib.join("device"),
    )
    .unwrap();
    for json in [false, true] {
        let (_, out) = t.doctor(json);
        let raw = ['\x1b', '\x07', '\u{202e}'];
        assert!(!out.contains(raw), "raw control or bidi character in:\n{out:?}");
        let want =
            if json { "0000:05:00.0\\\\x1b[2J\\\\x07\\\\u{202e}cba" } else { "0000:05:00.0\\x1b[2J\\x07\\u{202e}cba" };
        assert!(out.contains(want), "{want} not in:\n{out}");
        let want = if json { "mlx5_\\\\x1b]0;owned\\\\x07" } else { "(mlx5_\\x1b]0;owned\\x07)" };
        assert!(out.contains(want), "{want} not in:\n{out}");
    }
}

/// Links `class/infiniband/<name>/device` to the function at `path`, with
/// the netdevs given under the function's `net/`.
fn rdma_device(t: &Tree, name: &str, path: &str, netdevs: &[&str]) {
    let ib = t.root.join("sys/class/infiniband").join(name);
    std::fs::create_dir_all(&ib).unwrap();
    std::os::unix::fs::symlink(format!("../../../devices/{path}"), ib.join("device")).unwrap();
    for n in netdevs {
        std::fs::create_dir_all(t.root.join("sys/devices").join(path).join("net").join(n)).unwrap();
    }
}

/// The cells of the matrix row `label` (`GPU0   X   PIX ...`).
fn matrix_row(out: &str, label: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label) && l.split_whitespace().any(|w| w == "X"))
        .unwrap_or_else(|| panic!("no matrix row {label} in:\n{out}"));
    line.split_whitespace().skip(1).map(str::to_owned).collect()
}

const SW1: &str = "pci0000:00/0000:00:02.0/0000:01:00.0";

/// One socket: GPU0 and NIC0 under one switch (PIX), GPU1 under a second
/// switch below it (PXB), NIC1 on another root port (PHB).
#[test]
fn matrix_of_one_socket_is_pix_pxb_phb() {
    let t = Tree::new("topo-one-socket");
    let gpu1 = format!("{SW1}/0000:02:02.0/0000:05:00.0/0000:06:00.0/0000:07:00.0");
    t.add("pci0000:00/0000:00:02.0", root_port_no_acs_redirect(), 0)
        .add(SW1, upstream_port(), 0)
        .add(&format!("{SW1}/0000:02:00.0"), downstream_port(0), 0)
        .add(&format!("{SW1}/0000:02:01.0"), downstream_port(0), 0)
        .add(&format!("{SW1}/0000:02:02.0"), downstream_port(0), 0)
        .add(&format!("{SW1}/0000:02:00.0/0000:03:00.0"), gpu(), 0)
        .add(&format!("{SW1}/0000:02:01.0/0000:04:00.0"), nic(), 0)
        .add(&format!("{SW1}/0000:02:02.0/0000:05:00.0"), upstream_port(), 0)
        .add(&format!("{SW1}/0000:02:02.0/0000:05:00.0/0000:06:00.0"), downstream_port(0), 0)
        .add(&gpu1, gpu(), 0)
        .add("pci0000:00/0000:00:03.0", root_port_no_acs_redirect(), 0)
        .add("pci0000:00/0000:00:03.0/0000:08:00.0", nic(), 0);
    rdma_device(&t, "mlx5_0", &format!("{SW1}/0000:02:01.0/0000:04:00.0"), &["eth0"]);
    rdma_device(&t, "mlx5_1", "pci0000:00/0000:00:03.0/0000:08:00.0", &[]);
    let (_, out) = t.doctor(false);
    eprintln!("{out}");
    assert!(out.contains("GPU0    GPU1    NIC0    NIC1"), "{out}");
    assert_eq!(matrix_row(&out, "GPU0"), ["X", "PXB", "PIX", "PHB"], "{out}");
    assert_eq!(matrix_row(&out, "GPU1"), ["PXB", "X", "PXB", "PHB"], "{out}");
    assert_eq!(matrix_row(&out, "NIC0"), ["PIX", "PXB", "X", "PHB"], "{out}");
    assert_eq!(matrix_row(&out, "NIC1"), ["PHB", "PHB", "PHB", "X"], "{out}");
    for l in ["GPU0: 0000:03:00.0", "GPU1: 0000:07:00.0", "NIC0: mlx5_0 (netdev eth0)", "NIC1: mlx5_1 (no netdev)"] {
        assert!(out.contains(l), "{l:?} not in:\n{out}");
    }
    assert!(out.contains("PIX     = Connection traversing at most a single PCIe bridge"), "{out}");
    assert!(out.contains("NV#     = not shown: NVLink is not visible in sysfs"), "{out}");
    let (_, j) = t.doctor(true);
    let j = json(&j);
    assert_eq!(j["topology"]["matrix"][0], serde_json::json!(["X", "PXB", "PIX", "PHB"]));
    assert_eq!(j["topology"]["endpoints"][2]["rdma"], "mlx5_0");
    assert_eq!(j["topology"]["endpoints"][2]["netdevs"], serde_json::json!(["eth0"]));
    assert_eq!(j["topology"]["endpoints"][0]["bdf"], "0000:03:00.0");
}

/// Two sockets: GPU0 and NIC0 under one switch (PIX), GPU1 on another host
/// bridge of the same node (NODE), NIC1 on the other socket (SYS); then
/// NIC1's NUMA node unknown: NODE or SYS cannot be told.
#[test]
fn matrix_of_two_sockets_is_node_and_sys_and_unknown_without_numa() {
    let t = Tree::new("topo-two-sockets");
    let nic1 = "pci0000:80/0000:80:02.0/0000:81:00.0";
    t.add("pci0000:00/0000:00:02.0", root_port_no_acs_redirect(), 0)
        .add(SW1, upstream_port(), 0)
        .add(&format!("{SW1}/0000:02:00.0"), downstream_port(0), 0)
        .add(&format!("{SW1}/0000:02:01.0"), downstream_port(0), 0)
        .add(&format!("{SW1}/0000:02:00.0/0000:03:00.0"), gpu(), 0)
        .add(&format!("{SW1}/0000:02:01.0/0000:04:00.0"), nic(), 0)
        .add("pci0000:40/0000:40:02.0", root_port_no_acs_redirect(), 0)
        .add("pci0000:40/0000:40:02.0/0000:41:00.0", gpu(), 0)
        .add("pci0000:80/0000:80:02.0", root_port_no_acs_redirect(), 1)
        .add(nic1, nic(), 1);
    rdma_device(&t, "mlx5_0", &format!("{SW1}/0000:02:01.0/0000:04:00.0"), &["ens1f0np0"]);
    rdma_device(&t, "mlx5_1", nic1, &["ens2f0np0"]);
    let (_, out) = t.doctor(false);
    assert_eq!(matrix_row(&out, "GPU0"), ["X", "NODE", "PIX", "SYS"], "{out}");
    assert_eq!(matrix_row(&out, "GPU1"), ["NODE", "X", "NODE", "SYS"], "{out}");
    assert_eq!(matrix_row(&out, "NIC1"), ["SYS", "SYS", "SYS", "X"], "{out}");
    assert!(out.contains("NIC1: mlx5_1 (netdev ens2f0np0)"), "{out}");
    std::fs::write(t.root.join("sys/devices").join(nic1).join("numa_node"), "-1\n").unwrap();
    let (_, out) = t.doctor(false);
    assert_eq!(matrix_row(&out, "NIC1"), ["unknown", "unknown", "unknown", "X"], "{out}");
    assert_eq!(matrix_row(&out, "GPU0"), ["X", "NODE", "PIX", "unknown"], "{out}");
}

/// A RoCE port with v1 and v2 GIDs, link-local and IPv4-mapped, empty
/// entries, and one whose type cannot be read.
#[test]
fn gid_table_with_roce_v1_and_v2() {
    let t = one_switch("gids", 0);
    let nic = "pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0";
    rdma_device(&t, "mlx5_0", nic, &["eth0"]);
    let port = t.root.join("sys/class/infiniband/mlx5_0/ports/1");
    for d in ["gids", "gid_attrs/types", "gid_attrs/ndevs"] {
        std::fs::create_dir_all(port.join(d)).unwrap();
    }
    std::fs::write(port.join("link_layer"), "Ethernet\n").unwrap();
    std::fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
    let link_local = "fe80:0000:0000:0000:0a42:a1ff:fe12:3456";
    let v4 = "0000:0000:0000:0000:0000:ffff:0a00:0005";
    let zero = "0000:0000:0000:0000:0000:0000:0000:0000";
    for (i, gid, kind) in
        [(0, link_local, "IB/RoCE v1"), (1, link_local, "RoCE v2"), (2, v4, "IB/RoCE v1"), (3, v4, "RoCE v2")]
    {
        std::fs::write(port.join(format!("gids/{i}")), format!("{gid}\n")).unwrap();
        std::fs::write(port.join(format!("gid_attrs/types/{i}")), format!("{kind}\n")).unwrap();
        std::fs::write(port.join(format!("gid_attrs/ndevs/{i}")), "eth0\n").unwrap();
    }
    std::fs::write(port.join("gids/4"), format!("{zero}\n")).unwrap();
    std::fs::write(port.join("gids/5"), format!("{v4}\n")).unwrap();
    let (_, out) = t.doctor(false);
    eprintln!("{out}");
    assert!(
        out.contains("mlx5_0 port 1 (Ethernet): recommended GID index 3: RoCE v2 with IPv4 address 10.0.0.5"),
        "{out}"
    );
    assert!(out.contains(&format!("0     {link_local}  IB/RoCE v1  eth0")), "{out}");
    assert!(out.contains(&format!("3     {v4}  RoCE v2     eth0  (10.0.0.5)")), "{out}");
    assert!(out.contains(&format!("5     {v4}  unknown     unknown  (10.0.0.5)")), "{out}");
    assert!(!out.contains(zero), "{out}");
    let (_, j) = t.doctor(true);
    let j = json(&j);
    let p = &j["gids"][0];
    assert_eq!(
        (p["device"].as_str(), p["port"].as_u64(), p["recommended"].as_u64()),
        (Some("mlx5_0"), Some(1), Some(3))
    );
    assert_eq!(p["gids"][1]["type"], "RoCE v2");
    assert_eq!(p["gids"].as_array().unwrap().len(), 5);
    assert!(p["gids"][4]["type"].is_null() && p["gids"][4]["netdev"].is_null(), "{p}");
}
