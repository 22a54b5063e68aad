//! `cargo xtask interop test`: the softnic against Linux Soft-RoCE (rxe)
//! and rdma-core's own tools, in the kernel `cargo xtask kmod` builds.
//!
//! 1. the kernel: the kmod test's (its config carries the InfiniBand core,
//!    user verbs, rxe and virtio-net), cached the same way;
//! 2. Debian's `ibverbs-utils`, `perftest`, `ibverbs-providers`,
//!    `iproute2` and Open MPI (`openmpi-bin`, `libopenmpi3`), installed on
//!    the host; the guest root takes their programs, the rxe provider and its
//!    driver file, Open MPI's and PMIx's component trees, and every shared
//!    library `ldd` names, beside busybox-static;
//! 3. the guest's script (`interop/guest/init`) and the steps, from `marrow
//!    interop steps`, in the initramfs;
//! 4. the host: `marrow interop host` with the softnic's frame port on a UDP
//!    socket, and QEMU with two virtio-net NICs: the RoCE NIC on
//!    `-netdev dgram` whose far end is that socket, and a user-mode NIC for
//!    the tools' TCP exchange (the guest reaches the host at 10.0.2.2;
//!    the host reaches guest servers through `hostfwd`);
//! 5. the report: each step's line from both ends, rxe's counters (none of
//!    the error, retry or duplicate counters may move on a clean run), the
//!    softnic port's counters (no ICRC failure), and tshark's verdict on the
//!    capture of the whole run (no malformed packet, no expert error).

use crate::kmod::{self, BuildArgs, Timings};
use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Debian packages whose programs the guest runs.
const GUEST_PACKAGES: &[&str] =
    &["ibverbs-utils", "perftest", "ibverbs-providers", "iproute2", "libibverbs1", "openmpi-bin", "libopenmpi3"];
/// The programs, from those packages.
const GUEST_PROGRAMS: &[&str] = &[
    "/usr/bin/ibv_rc_pingpong",
    "/usr/bin/ibv_devinfo",
    "/usr/bin/ibv_devices",
    "/usr/bin/ib_send_bw",
    "/usr/bin/ib_write_bw",
    "/usr/bin/ib_read_bw",
    "/usr/bin/ib_atomic_bw",
    "/usr/bin/ib_write_lat",
    "/usr/bin/ib_read_lat",
    "/usr/bin/rdma",
];
/// rxe's user-space provider and the file that makes libibverbs load it.
const GUEST_PROVIDER: &[&str] =
    &["/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "/etc/libibverbs.d/rxe.driver"];
/// Open MPI, for the verbs proxy's ranks under `mpirun` in the guest:
/// `mpirun` (Debian's alternative points at `orterun`), the libmpi marrow
/// opens at run time, and the trees Open MPI and PMIx load their components
/// and help texts from (the paths they were built with).
const GUEST_MPI_FILES: &[&str] = &["/usr/bin/mpirun", "/usr/lib/x86_64-linux-gnu/libmpi.so.40"];
const GUEST_MPI_TREES: &[&str] =
    &["/usr/lib/x86_64-linux-gnu/openmpi", "/usr/lib/x86_64-linux-gnu/pmix2", "/usr/share/openmpi", "/etc/openmpi"];
/// Applets the guest's script uses, beyond the kmod guest's.
const APPLETS: &[&str] = &["ip", "timeout", "tr", "head", "basename", "mkdir", "seq"];
/// rxe counters that must stay 0 on a clean run.
const RXE_CLEAN: &[&str] = &[
    "duplicate_request",
    "out_of_seq_request",
    "rcvd_seq_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "send_err",
    "rcvd_rnr_err",
    "send_rnr_err",
];
/// The guest run's limit before QEMU is killed.
const QEMU_TIMEOUT: Duration = Duration::from_secs(1500);

#[derive(clap::Subcommand)]
pub enum InteropCmd {
    /// Build the kernel (cached), the guest root and the initramfs, boot
    /// QEMU and run the matrix against `marrow interop host`.
    Test(BuildArgs),
}

pub fn run(cmd: InteropCmd) -> Result<()> {
    match cmd {
        InteropCmd::Test(a) => {
            let mut t = Timings::default();
            let k = kmod::build_kernel(&a, &mut t)?;
            let work = crate::repo_root().join("target/interop");
            std::fs::create_dir_all(work.join("logs"))?;
            t.time("guest packages (Debian bookworm)", || guest_packages(a.no_apt))?;
            let marrow = t.time("marrow (debug build)", || marrow_binary(&work))?;
            let initramfs = t.time("guest root and initramfs", || initramfs(&work, &marrow))?;
            test(&work, &k.kb.join("arch/x86/boot/bzImage"), &initramfs, &marrow, &mut t)
        }
    }
}

fn guest_packages(no_apt: bool) -> Result<()> {
    let missing: Vec<&str> = GUEST_PACKAGES.iter().copied().filter(|p| !kmod::installed(p)).collect();
    if missing.is_empty() {
        println!("   guest packages present");
        return Ok(());
    }
    let root = kmod::is_root();
    if no_apt || (!root && !kmod::which("sudo")) {
        bail!("missing Debian packages {missing:?}; install them as root");
    }
    let apt = || {
        let mut c = if root { Command::new("apt-get") } else { Command::new("sudo") };
        if !root {
            c.args(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        }
        c.env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    println!("   installing {missing:?}");
    kmod::sh(apt().args(["update", "-qq"]))?;
    kmod::sh(apt().args(["install", "-y", "-qq", "--no-install-recommends"]).args(&missing))
}

fn marrow_binary(work: &Path) -> Result<PathBuf> {
    let root = crate::repo_root();
    kmod::sh_logged(
        Command::new("cargo").args(["build", "--locked", "-p", "marrow"]).current_dir(&root),
        &work.join("logs/marrow-build.log"),
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(target.join("debug/marrow"))
}

/// Every shared library `ldd` lists for `file`, and the dynamic loader.
fn libraries(file: &str, into: &mut BTreeSet<String>) -> Result<()> {
    let text = kmod::output(Command::new("ldd").arg(file))?;
    for l in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = l.split("=>").nth(1).unwrap_or(l).split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            into.insert(path.to_string());
        }
    }
    Ok(())
}

/// Every regular file under `trees`, links followed (Debian's Open MPI
/// links its help texts and components across these trees).
fn tree_files(trees: &[&str]) -> Result<Vec<String>> {
    let mut files = Vec::new();
    let mut todo: Vec<PathBuf> = trees.iter().map(PathBuf::from).collect();
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("{} (is its Debian package installed?)", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.is_file() {
                files.push(p.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    Ok(files)
}

fn copy_into(root: &Path, file: &str) -> Result<()> {
    let src = Path::new(file);
    let real = std::fs::canonicalize(src).with_context(|| format!("{file} (is its Debian package installed?)"))?;
    let dst = root.join(file.trim_start_matches('/'));
    std::fs::create_dir_all(dst.parent().expect("absolute path"))?;
    std::fs::copy(&real, &dst).with_context(|| format!("copying {}", real.display()))?;
    Ok(())
}

fn initramfs(work: &Path, marrow: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let root = crate::repo_root();
    let dir = work.join("guest-root");
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["bin", "dev", "etc", "proc", "sys", "tmp", "lib64", "usr/bin"] {
        std::fs::create_dir_all(dir.join(d))?;
    }
    std::fs::set_permissions(dir.join("tmp"), std::fs::Permissions::from_mode(0o1777))?;
    std::fs::copy("/bin/busybox", dir.join("bin/busybox")).context("busybox-static")?;
    let applets: BTreeSet<&str> = kmod::APPLETS.iter().chain(APPLETS).copied().collect();
    for a in applets {
        std::os::unix::fs::symlink("busybox", dir.join("bin").join(a))?;
    }
    let mut libs = BTreeSet::new();
    for f in GUEST_PROGRAMS.iter().chain(GUEST_PROVIDER) {
        copy_into(&dir, f)?;
        if f.contains("/bin/") || f.ends_with(".so") {
            libraries(f, &mut libs)?;
        }
    }
    for f in GUEST_MPI_FILES.iter().map(|f| f.to_string()).chain(tree_files(GUEST_MPI_TREES)?) {
        copy_into(&dir, &f)?;
        if f.contains("/bin/") || f.contains(".so") {
            libraries(&f, &mut libs)?;
        }
    }
    // marrow itself, for the verbs proxy's ranks in the guest (`marrow bench
    // verbs` on rxe0), stripped: the debug build's symbols would make the
    // initramfs ten times larger. It loads libibverbs at run time, which the
    // tools above bring.
    let guest_marrow = dir.join("usr/bin/marrow");
    std::fs::copy(marrow, &guest_marrow).context("copying marrow into the guest root")?;
    kmod::sh(Command::new("strip").arg(&guest_marrow))?;
    libraries(&marrow.to_string_lossy(), &mut libs)?;
    for l in &libs {
        copy_into(&dir, l)?;
    }
    std::fs::write(dir.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n")?;
    std::fs::write(dir.join("etc/group"), "root:x:0:\n")?;
    std::fs::write(dir.join("etc/hosts"), "127.0.0.1 localhost marrow-guest\n")?;
    std::fs::copy(root.join("interop/guest/init"), dir.join("init"))?;
    std::fs::set_permissions(dir.join("init"), std::fs::Permissions::from_mode(0o755))?;
    let steps = kmod::output(Command::new(marrow).args(["interop", "steps"]))?;
    std::fs::write(dir.join("steps"), steps)?;
    println!("   guest root: {} programs, {} libraries", GUEST_PROGRAMS.len(), libs.len());
    let out = work.join("initramfs.cpio");
    let f = std::fs::File::create(&out)?;
    kmod::sh(
        Command::new("sh")
            .arg("-c")
            .arg("find . -print0 | cpio --null -o -H newc --owner=0:0 --quiet")
            .current_dir(&dir)
            .stdout(f),
    )?;
    Ok(out)
}

/// The `counter LABEL NAME VALUE` lines the guest prints under `label`.
fn rxe_counters(log: &str, label: &str) -> Vec<(String, u64)> {
    log.lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("counter ")?.split_whitespace();
            (w.next()? == label).then_some(())?;
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// rxe counters that move when the wire loses or reorders packets: the
/// responder's duplicates and out-of-sequence requests, the requester's
/// sequence NAKs and retries.
const RXE_RECOVERY: &[&str] = &["duplicate_request", "out_of_seq_request", "rcvd_seq_err", "completer_retry_err"];

/// `fields` of every InfiniBand frame of `pcap`, tab-separated, a line each.
/// RPC-over-RDMA is off: see [`tshark_verdict`].
fn ib_fields(pcap: &Path, fields: &[&str]) -> Result<String> {
    if !kmod::which("tshark") {
        bail!("tshark is not installed (scripts/install-test-deps.sh installs it)");
    }
    let mut c = Command::new("tshark");
    c.arg("-r").arg(pcap).args(["--disable-protocol", "rpcordma", "-Y", "infiniband", "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    kmod::output(&mut c)
}

/// Frames tshark dissects as InfiniBand, and those it finds malformed or
/// in error in the layers marrow wrote (Ethernet to the BTH and its
/// extension headers). SEND payloads are the tools' bytes: tshark's
/// heuristics try them as RPC-over-RDMA or, when a short payload's pad
/// bytes are zero, as an IPoIB EtherType, and report the application bytes
/// malformed; an error in a layer after `infiniband` is that, not ours.
fn tshark_verdict(pcap: &Path) -> Result<(usize, Vec<String>)> {
    let out = ib_fields(pcap, &["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.severity"])?;
    let mut frames = 0;
    let mut bad = Vec::new();
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        frames += 1;
        let f: Vec<&str> = l.split('\t').collect();
        let protocols = f.get(1).copied().unwrap_or("");
        let flagged = f.get(2).is_some_and(|m| !m.is_empty())
            || f.get(3).is_some_and(|s| s.split(',').any(|v| v.parse::<u32>().is_ok_and(|v| v >= 0x0080_0000)));
        if flagged && protocols.ends_with(":infiniband") {
            bad.push(format!("frame {}: {protocols}", f[0]));
        }
    }
    Ok((frames, bad))
}

/// Requests rxe (10.77.0.2) sent more than once on the QPs of the clean
/// steps, from the capture: how many the softnic had answered (an ACK,
/// read response or atomic acknowledge to rxe's QP, for that PSN or a later
/// one) between the first copy and the next, with the next copy sooner
/// than the shortest local ACK timeout the tools use (67 ms), and the rest.
/// An answer lost on the cable (QEMU's socket, the virtio ring) is in the
/// capture too, but rxe resends it only after its timeout; a resend sooner
/// than any timeout is rxe's timer seeing the guest's clock jump (a TCG
/// vCPU descheduled on the host). The QP pairs come from marrow's
/// `ok - step` lines (`QP A <-> rxe QP B`); the fault steps' are left out.
fn resent_requests(pcap: &Path, host_lines: &[String]) -> Result<(usize, Vec<String>)> {
    let hex = |s: &str| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    let mut pairs = std::collections::HashMap::new(); // softnic QP -> rxe QP
    for l in host_lines.iter().filter(|l| l.contains("ok - step") && !l.contains("faults on")) {
        let Some((_, rest)) = l.rsplit_once("; QP ") else { continue };
        let Some((ours, rest)) = rest.split_once(" <-> rxe QP ") else { continue };
        let theirs = rest.split(',').next().unwrap_or("");
        if let (Some(a), Some(b)) = (hex(ours), hex(theirs)) {
            pairs.insert(a, b);
        }
    }
    let fields =
        ["ip.src", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "frame.time_relative"];
    let out = ib_fields(pcap, &fields)?;
    let mut times = Vec::new();
    // opcodes 13..=18: RDMA READ responses, ACKNOWLEDGE, ATOMIC ACKNOWLEDGE.
    let answer = |op: u32| (13..=18).contains(&op);
    let mut first_seen = std::collections::HashMap::new(); // (softnic QP, psn) -> frame index
    let mut answers: Vec<(usize, u32, u32)> = Vec::new(); // (frame index, rxe QP, psn)
    let mut resent = Vec::new(); // (softnic QP, psn, first, again)
    for (i, l) in out.lines().enumerate() {
        let f: Vec<&str> = l.split('\t').collect();
        times.push(f.get(4).and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0));
        let (Some(op), Some(qp), Some(psn)) = (
            f.get(1).and_then(|s| s.parse().ok()),
            f.get(2).and_then(|s| hex(s)),
            f.get(3).and_then(|s| s.parse().ok()),
        ) else {
            continue;
        };
        if f[0] == "10.77.0.1" && answer(op) {
            answers.push((i, qp, psn));
        } else if f[0] == "10.77.0.2" && !answer(op) && pairs.contains_key(&qp) {
            match first_seen.get(&(qp, psn)) {
                Some(&first) => resent.push((qp, psn, first, i)),
                None => {
                    first_seen.insert((qp, psn), i);
                }
            }
        }
    }
    let mut answered = 0;
    let mut unanswered = Vec::new();
    for (qp, psn, first, again) in resent {
        let rxe_qp = pairs[&qp];
        let ok = answers
            .iter()
            .any(|&(i, q, p)| i > first && i < again && q == rxe_qp && (p.wrapping_sub(psn) & 0xff_ffff) < 0x80_0000);
        let gap = times[again] - times[first];
        if ok && gap < 0.067 {
            answered += 1;
        } else {
            unanswered.push(format!(
                "QP {qp:#x} PSN {psn:#08x} sent again after {:.1} ms{}",
                gap * 1e3,
                if ok { "" } else { ", unanswered" }
            ));
        }
    }
    Ok((answered, unanswered))
}

/// The kernel's warnings in the guest's console, each to its end (at most
/// 120 lines): those whose trace runs through rxe (`rxe_*` frames), and the
/// rest. Linux 7.3's rxe takes `qp->state_lock` without disabling softirqs
/// in `rxe_receiver` after taking it from softirq in `rxe_rcv`; lockdep
/// reports that once an error path runs (the wrong-rkey step). That is the
/// kernel's, reported, not failed on; anything else fails the run.
fn kernel_reports(log: &str) -> (Vec<String>, Vec<String>) {
    let lines: Vec<&str> = log.lines().collect();
    let (mut ours, mut rxe) = (Vec::new(), Vec::new());
    let mut skip_to = 0;
    for (i, l) in lines.iter().enumerate() {
        let body = l.strip_prefix("kernel: ").unwrap_or(l);
        if i < skip_to || body.starts_with("ok - ") || body.starts_with("not ok - ") || body.starts_with('#') {
            continue;
        }
        if kmod::KERNEL_BAD.iter().any(|b| body.contains(b)) {
            // To its end marker, the next report, or 120 lines.
            let starts = |b: &&str| ["WARNING:", "BUG:", "Oops"].iter().any(|k| b.contains(k));
            let len = lines[i + 1..]
                .iter()
                .take(119)
                .position(|b| b.contains("---[ end trace") || starts(b))
                .map_or((lines.len() - i).min(120), |n| n + 1);
            let block = &lines[i..i + len];
            skip_to = i + block.len();
            let text = body.trim().to_string();
            if block.iter().any(|b| b.contains(" rxe_") || b.contains("+0x") && b.contains("rxe_")) {
                rxe.push(text);
            } else {
                ours.push(text);
            }
        }
    }
    (ours, rxe)
}

fn test(work: &Path, bzimage: &Path, initramfs: &Path, marrow: &Path, t: &mut Timings) -> Result<()> {
    let run = work.join("run");
    std::fs::create_dir_all(&run)?;
    let pcap = run.join("interop.pcap");
    let trace = run.join("interop.trace");
    let serial = run.join("serial.log");
    let wire_pcap = run.join("softnic-rank.pcap");
    // Two UDP ports on loopback for each cable, per process so runs side by side do not meet.
    let base = 42000 + (std::process::id() % 1000) as u16 * 4;
    let (softnic_port, qemu_port) = (base, base + 1);
    let (rank_port, rank_qemu_port) = (base + 2, base + 3);
    let (accel, why) = kmod::accelerator();
    println!("== interop: accelerator: {why}");
    let mut host = kmod::spawn_watched(
        Command::new(marrow)
            .args(["interop", "host", "--cable"])
            .arg(format!("127.0.0.1:{softnic_port},127.0.0.1:{qemu_port},10.77.0.1"))
            .arg("--pcap")
            .arg(&pcap)
            .arg("--trace")
            .arg(&trace),
        "[host marrow] ",
    )?;
    // The softnic as rank 0 of `marrow bench verbs` on a cable of its own
    // (the guest's third NIC, rxe1): its QPs on the wire, the device code's
    // WQEs executed onto it by the softnic; the guest's rank 1 (the verbs
    // proxy on rxe1) reaches the rendezvous as 10.0.2.2:18980 late in its
    // run, hence the long timeout (also every wait's: the run ends it).
    let mut rank = kmod::spawn_watched(
        Command::new(marrow)
            .args(["bench", "verbs", "--wire"])
            .arg(format!("frames:127.0.0.1:{rank_port},127.0.0.1:{rank_qemu_port},10.78.0.1"))
            .arg("--pcap")
            .arg(&wire_pcap)
            .args(["--listen", "127.0.0.1:18980", "--id", "wire", "--iters", "100", "--burst", "200"])
            .args(["--timeout-s", "1200"]),
        "[host rank 0] ",
    )?;
    let steps = kmod::output(Command::new(marrow).args(["interop", "steps"]))?;
    let mut fwd = String::new();
    for l in steps.lines() {
        let mut w = l.split_whitespace();
        let (Some(id), Some(_), Some("server")) = (w.next(), w.next(), w.next()) else { continue };
        let id: u16 = id.parse()?;
        fwd.push_str(&format!(",hostfwd=tcp:127.0.0.1:{}-:{}", 18700 + id, 18600 + id));
    }
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", accel, "-m", "1024", "-smp", "1", "-nographic", "-no-reboot"])
        .arg("-kernel")
        .arg(bzimage)
        .arg("-initrd")
        .arg(initramfs)
        .args(["-append", "console=ttyS0 panic=-1"])
        .arg("-netdev")
        .arg(format!(
            "dgram,id=roce,local.type=inet,local.host=127.0.0.1,local.port={qemu_port},\
             remote.type=inet,remote.host=127.0.0.1,remote.port={softnic_port}"
        ))
        .args(["-device", "virtio-net-pci,netdev=roce,mac=52:54:00:4d:00:02,addr=0x5"])
        .arg("-netdev")
        .arg(format!(
            "dgram,id=rank,local.type=inet,local.host=127.0.0.1,local.port={rank_qemu_port},\
             remote.type=inet,remote.host=127.0.0.1,remote.port={rank_port}"
        ))
        .args(["-device", "virtio-net-pci,netdev=rank,mac=52:54:00:4d:02:02,addr=0x7"])
        .arg("-netdev")
        .arg(format!("user,id=oob,net=10.0.2.0/24,restrict=off{fwd}"))
        .args(["-device", "virtio-net-pci,netdev=oob,mac=52:54:00:4d:01:02,addr=0x6"]);
    if accel == "kvm" {
        qemu.args(["-cpu", "host"]);
    }
    let status = t.time(&format!("QEMU ({accel}): boot, rxe, the matrix, power off"), || {
        let f = std::fs::File::create(&serial)?;
        let mut child = qemu.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f).spawn().context("starting QEMU")?;
        kmod::wait_timeout(&mut child, QEMU_TIMEOUT)
    })?;
    let host_status = kmod::wait_timeout(&mut host.child, Duration::from_secs(10))?;
    let rank_status = kmod::wait_timeout(&mut rank.child, Duration::from_secs(10))?;
    let log = std::fs::read_to_string(&serial).unwrap_or_default();
    println!("---- guest serial console ({})", serial.display());
    print!("{log}");
    println!("---- end of guest serial console");

    let host_lines = host.lines.lock().expect("not poisoned").clone();
    let rank_lines = rank.lines.lock().expect("not poisoned").clone();
    let mut problems = Vec::new();
    let mut passed = 0;
    for l in log.lines().chain(host_lines.iter().chain(&rank_lines).map(String::as_str)) {
        if l.starts_with("ok - ") {
            passed += 1;
        } else if l.starts_with("not ok - ") {
            problems.push(l.to_string());
        }
    }
    match status {
        Some(s) if s.success() => {}
        Some(s) => problems.push(format!("QEMU exited with {s}")),
        None => problems.push(format!("QEMU did not finish within {} s (killed)", QEMU_TIMEOUT.as_secs())),
    }
    if !matches!(host_status, Some(s) if s.success()) {
        problems.push(format!("marrow interop host: {host_status:?} (its lines above)"));
    }
    if !matches!(rank_status, Some(s) if s.success()) {
        problems.push(format!("marrow bench verbs --wire (host rank 0): {rank_status:?} (its lines above)"));
    }
    let clean = rxe_counters(&log, "clean");
    let faulty = rxe_counters(&log, "faults");
    if clean.is_empty() || faulty.is_empty() {
        problems.push("the guest did not print rxe's counters after the clean and the faulty steps".into());
    }
    for (name, v) in &clean {
        if !RXE_CLEAN.contains(&name.as_str()) || *v == 0 {
            continue;
        }
        // rxe's own retransmission timer: allowed only when the capture
        // shows the softnic had answered every request rxe sent again.
        if name == "completer_retry_err" {
            match resent_requests(&pcap, &host_lines) {
                Ok((answered, unanswered)) if unanswered.is_empty() && answered > 0 => {
                    println!(
                        "note: rxe's completer retried {v} time(s) in the clean steps; the capture shows the softnic \
                         had answered all {answered} request(s) rxe sent again before it did (its timer, not a loss)"
                    );
                    continue;
                }
                Ok((_, unanswered)) => problems.push(format!(
                    "rxe counter completer_retry_err = {v} after the clean steps; requests sent again without an \
                     answer first: {}",
                    unanswered.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
                )),
                Err(e) => problems.push(format!("rxe counter completer_retry_err = {v}; reading the capture: {e}")),
            }
            continue;
        }
        problems.push(format!("rxe counter {name} = {v} after the clean steps"));
    }
    let delta = |name: &str| {
        let get = |c: &[(String, u64)]| c.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
        get(&faulty).saturating_sub(get(&clean))
    };
    let recovered: u64 = RXE_RECOVERY.iter().map(|n| delta(n)).sum();
    if !faulty.is_empty() && recovered == 0 {
        problems.push("with the wire faults on, no rxe recovery counter moved: were the faults applied?".into());
    }
    for n in ["retry_exceeded_err", "retry_rnr_exceeded_err"] {
        if delta(n) != 0 {
            problems.push(format!("rxe counter {n} moved by {} with the wire faults on", delta(n)));
        }
    }
    for l in host_lines.iter().filter_map(|l| l.split_once("# softnic port counters: ").map(|x| x.1)) {
        if !l.contains("\"rx_bad_icrc\":0") {
            problems.push(format!("softnic port counters show ICRC failures: {l}"));
        }
    }
    let (ours, rxes) = kernel_reports(&log);
    problems.extend(ours.into_iter().map(|r| format!("kernel: {r}")));
    for r in &rxes {
        println!("note: a kernel report inside Linux rxe's own code, not marrow's (its error path under lockdep): {r}");
    }
    for p in [&pcap, &wire_pcap] {
        match tshark_verdict(p) {
            Ok((frames, bad)) if frames > 0 && bad.is_empty() => {
                passed += 1;
                println!(
                    "ok - tshark: {frames} InfiniBand frames in {}, none malformed or in error in their headers",
                    p.display()
                );
            }
            Ok((frames, bad)) => problems.push(format!(
                "tshark: {} of {frames} InfiniBand frames in {} malformed or in error: {}",
                bad.len(),
                p.display(),
                bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            )),
            Err(e) => problems.push(format!("tshark: {}: {e}", p.display())),
        }
    }
    let summary = format!(
        "interop test: {passed} passed, {} problem(s); accelerator {accel}; serial log {}, capture {}, softnic trace {}",
        problems.len(),
        serial.display(),
        pcap.display(),
        trace.display()
    );
    std::fs::write(run.join("timings.txt"), format!("{}{summary}\n", t.text()))?;
    t.print();
    let line = |c: &[(String, u64)]| c.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ");
    println!("rxe counters after the clean steps: {}", line(&clean));
    println!("rxe counters after the faulty steps: {}", line(&faulty));
    println!(
        "rxe recovery with the faults on: {}",
        RXE_RECOVERY.iter().map(|n| format!("{n} +{}", delta(n))).collect::<Vec<_>>().join(", ")
    );
    for p in &problems {
        println!("problem: {p}");
    }
    println!("{summary}");
    if !problems.is_empty() || passed == 0 {
        bail!("interop test failed: {} problem(s)", problems.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_reports_through_rxe_are_told_from_the_rest() {
        let log = "init: done\n\
                   WARNING: inconsistent lock state\n\
                   kworker/u4:1/16 takes:\n\
                   at: rxe_receiver+0x27/0x7c0\n\
                   Call Trace:\n\
                   \x20 rxe_rcv+0x1b4/0x350\n\
                   ok - step 3 guest: fine\n\
                   BUG: unable to handle page fault\n\
                   Call Trace:\n\
                   \x20 marrow_mmap+0x10/0x40\n";
        let (ours, rxe) = kernel_reports(log);
        assert_eq!(rxe, ["WARNING: inconsistent lock state"]);
        assert_eq!(ours, ["BUG: unable to handle page fault"]);
        assert_eq!(kernel_reports("ok - step 1: fine\n# WARNING: in a tool's output\n"), (vec![], vec![]));
    }

    #[test]
    fn counters_are_read_by_label() {
        let log = "counter clean duplicate_request 0\ncounter faults duplicate_request 7\ncounter clean x y\n";
        assert_eq!(rxe_counters(log, "clean"), [("duplicate_request".to_string(), 0)]);
        assert_eq!(rxe_counters(log, "faults"), [("duplicate_request".to_string(), 7)]);
    }
}
