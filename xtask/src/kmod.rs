//! `cargo xtask kmod build|test`: the `marrow` kernel module, built against
//! a Linux 7.3 kernel of our own and tested in that kernel under QEMU.
//!
//! `build`:
//! 1. host packages from Debian (bookworm: clang/lld/llvm 19, libclang,
//!    kernel build tools, busybox-static; QEMU from bookworm-backports);
//! 2. two `.deb`s from trixie-backports, downloaded with a private apt state
//!    under `target/kmod/apt` and unpacked, never installed: `linux-source-7.3`
//!    and the `rust-src` of exactly the running rustc's version (the kernel
//!    compiles `core` from it: `RUST_LIB_SRC`);
//! 3. `bindgen-cli` from crates.io into `target/kmod/tools`;
//! 4. the kernel: tinyconfig + `kmod/kernel.config`, built once into
//!    `target/kmod/kernel-<version>-<hash>/`, the hash covering the config
//!    fragment and the tool versions, so a rebuild happens exactly when one
//!    of them changes;
//! 5. the module (`kmod/module`, kbuild `M=`, output in `target/kmod/module`);
//! 6. the guest test program (`kmod/guest`, static) and the host softnic
//!    (`marrow-softnic`'s `kmod_nic` example);
//! 7. the initramfs (busybox-static, `kmod/guest/init`, module, test program).
//!
//! `test` then creates the 1 MiB file behind the ivshmem BAR, starts the host
//! softnic on it, boots QEMU (KVM when `/dev/kvm` opens and the CPU has
//! vmx/svm, TCG otherwise), and counts the guest's `ok -`/`not ok -` lines.
//!
//! The recipe was proven on a 2-core Debian 12 machine; `kmod/README.md`
//! gives the timings measured there.

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The kernel: Debian's `linux-source-7.3` package, pinned. The Rust kernel
/// APIs change every release (MiscDevice::mmap and VmaNew arrived in 6.16);
/// the module is written against this one.
const KERNEL_PKG: &str = "linux-source-7.3";
const KERNEL_DEB_VERSION: &str = "7.3.4-1~bpo13+1";
const KERNEL_VERSION: &str = "7.3.4";
/// bindgen: the kernel wants ≥ 0.71.1 (scripts/min-tool-version.sh); bookworm has 0.60.
const BINDGEN_VERSION: &str = "0.73.2";
/// LLVM: the kernel wants ≥ 17.0.1; bookworm carries clang-19.
const LLVM: &str = "19";
/// Bump to force every cached kernel to be rebuilt.
const CACHE_SCHEMA: &str = "marrow kmod kernel cache v1";
/// Bookworm packages the build and the test need.
const HOST_PACKAGES: &[&str] = &[
    "clang-19",
    "lld-19",
    "llvm-19",
    "libclang-19-dev",
    "make",
    "bc",
    "flex",
    "bison",
    "libelf-dev",
    "cpio",
    "xz-utils",
    "gcc",
    "libc6-dev",
    "busybox-static",
];
/// The guest's busybox applets (kmod/guest/init uses these).
pub(crate) const APPLETS: &[&str] = &[
    "sh", "mount", "ls", "cat", "cut", "chmod", "chgrp", "insmod", "rmmod", "su", "dmesg", "grep", "sed", "echo",
    "reboot", "sleep", "id", "uname", "wc", "tail", "test",
];
/// Seconds the whole guest run may take before QEMU is killed.
const QEMU_TIMEOUT: Duration = Duration::from_secs(420);
/// Free space a kernel build must find before it starts: a finished build
/// tree, the guest's image and the interop run after it take well under
/// this. A build that runs out of space fails deep inside make with an I/O
/// error on whatever file it was writing; this says so up front instead.
const KERNEL_BUILD_FREE_BYTES: u64 = 4 << 30;

#[derive(Subcommand)]
pub enum KmodCmd {
    /// Build the kernel (cached), the module, the guest test program and the initramfs.
    Build(BuildArgs),
    /// Build, then boot QEMU with the module and run the guest tests.
    Test(BuildArgs),
}

#[derive(clap::Args)]
pub struct BuildArgs {
    /// Parallel jobs for the kernel build (default: all CPUs).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Do not install missing Debian packages; fail instead.
    #[arg(long)]
    pub(crate) no_apt: bool,
}

pub fn run(cmd: KmodCmd) -> Result<()> {
    match cmd {
        KmodCmd::Build(a) => {
            let mut t = Timings::default();
            let b = build(&a, &mut t)?;
            println!("kmod build: kernel {}", b.bzimage.display());
            println!("kmod build: module {}", b.module.display());
            println!("kmod build: initramfs {}", b.initramfs.display());
            t.print();
            Ok(())
        }
        KmodCmd::Test(a) => {
            let mut t = Timings::default();
            let b = build(&a, &mut t)?;
            test(&b, &mut t)
        }
    }
}

/// Step durations, printed at the end and written next to the run's logs.
#[derive(Default)]
pub(crate) struct Timings(Vec<(String, Duration)>);

impl Timings {
    pub(crate) fn time<T>(&mut self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("== kmod: {what}");
        let t0 = Instant::now();
        let r = f();
        let d = t0.elapsed();
        println!("   {what}: {:.1} s", d.as_secs_f64());
        self.0.push((what.to_string(), d));
        r
    }

    pub(crate) fn text(&self) -> String {
        let total: Duration = self.0.iter().map(|(_, d)| *d).sum();
        let mut s = String::new();
        for (w, d) in &self.0 {
            s.push_str(&format!("{:>8.1} s  {w}\n", d.as_secs_f64()));
        }
        s.push_str(&format!("{:>8.1} s  total\n", total.as_secs_f64()));
        s
    }

    pub(crate) fn print(&self) {
        println!("timings:\n{}", self.text());
    }
}

/// Everything `test` needs from `build`.
struct Built {
    work: PathBuf,
    bzimage: PathBuf,
    module: PathBuf,
    initramfs: PathBuf,
    kmod_nic: PathBuf,
}

pub(crate) fn sh(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// Run, capturing stdout+stderr into `log`; on failure show its tail.
///
/// The log's path is printed first. Meanwhile a spinner shows the elapsed
/// time and the log's last line; where stderr is no terminal (CI) a line
/// with both every minute instead, so a long build is never silent.
pub(crate) fn sh_logged(cmd: &mut Command, log: &Path) -> Result<()> {
    let f = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    // The log's name says the step (`kernel-build`, `guest-build`).
    let step = log.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    eprintln!("   {step}: log {}", log.display());
    let mut child = cmd.stdout(f.try_clone()?).stderr(f).spawn().with_context(|| format!("running {cmd:?}"))?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("   {spinner} [{elapsed_precise}] {msg}")
            .expect("a constant template")
            .progress_chars("#>-"),
    );
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let start = std::time::Instant::now();
    let mut said = 0;
    let status = loop {
        if let Some(s) = child.try_wait().with_context(|| format!("waiting for {cmd:?}"))? {
            break s;
        }
        let last = last_line(log);
        if tty {
            bar.set_message(last);
            bar.tick();
        } else if start.elapsed().as_secs() / 60 > said {
            said = start.elapsed().as_secs() / 60;
            eprintln!("   [{said:>3} min] {step}: {last}");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    bar.finish_and_clear();
    eprintln!("   {step}: {status} after {:.0?}", start.elapsed());
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for l in tail.iter().rev() {
            eprintln!("   | {l}");
        }
        bail!("{cmd:?} failed: {status} (log: {})", log.display());
    }
    Ok(())
}

/// The last non-empty line of a growing log, cut to fit a terminal line.
fn last_line(log: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut tail = Vec::new();
    let _ = f.read_to_end(&mut tail);
    let text = String::from_utf8_lossy(&tail);
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    line.chars().take(100).collect()
}

pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn is_root() -> bool {
    output(Command::new("id").arg("-u")).map(|s| s.trim() == "0").unwrap_or(false)
}

pub(crate) fn installed(pkg: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]))
        .map(|s| s.contains("install ok installed"))
        .unwrap_or(false)
}

/// The Debian mirror this machine already uses (other suites live there
/// too): the first `URIs:`/`deb` entry ending in `/debian`. Third-party
/// repositories in sources.list.d are skipped.
pub(crate) fn mirror() -> String {
    let mut texts: Vec<String> = std::fs::read_dir("/etc/apt/sources.list.d")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    texts.extend(std::fs::read_to_string("/etc/apt/sources.list").ok());
    texts
        .iter()
        .flat_map(|t| t.lines())
        .flat_map(|l| l.split_whitespace())
        .map(|w| w.trim_end_matches('/'))
        .find(|w| w.starts_with("http") && w.ends_with("/debian"))
        .unwrap_or("http://deb.debian.org/debian")
        .to_string()
}

/// apt options for a private state under `dir` reading only `list`:
/// nothing is added to /etc/apt or /var/lib/apt/lists.
fn private_apt(dir: &Path, list: &Path) -> Vec<String> {
    vec![
        format!("-oDir::Etc::SourceList={}", list.display()),
        "-oDir::Etc::SourceParts=/nonexistent".into(),
        format!("-oDir::State::Lists={}", dir.join("lists").display()),
        format!("-oDir::Cache={}", dir.join("cache").display()),
        "-oAPT::Sandbox::User=root".into(),
        "-qq".into(),
    ]
}

fn host_packages(work: &Path, no_apt: bool) -> Result<()> {
    let missing: Vec<&str> = HOST_PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    let qemu = which("qemu-system-x86_64");
    if missing.is_empty() && qemu {
        println!("   host packages present");
        return Ok(());
    }
    // As root, or through sudo as scripts/install-test-deps.sh does.
    let root = is_root();
    if no_apt || (!root && !which("sudo")) {
        bail!(
            "missing Debian packages {missing:?}{}; install them as root (or run `cargo xtask kmod build` as root)",
            if qemu { "" } else { " and qemu-system-x86 (bookworm-backports)" }
        );
    }
    let apt_get = || {
        let mut c = if root { Command::new("apt-get") } else { Command::new("sudo") };
        if !root {
            c.args(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        }
        c.env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    if !missing.is_empty() {
        println!("   installing {missing:?}");
        sh(apt_get().args(["update", "-qq"]))?;
        sh(apt_get().args(["install", "-y", "-qq", "--no-install-recommends"]).args(&missing))?;
    }
    if !qemu {
        // QEMU 10 from bookworm-backports: bookworm's own 7.2 would replace a
        // newer qemu-utils already on the machine (seen on this image). A
        // private list state holds bookworm + its backports; the system's
        // lists are not touched.
        let dir = work.join("apt/bookworm");
        std::fs::create_dir_all(dir.join("lists/partial"))?;
        std::fs::create_dir_all(dir.join("cache/archives/partial"))?;
        let m = mirror();
        let key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
        let sec = m.replace("/debian", "/debian-security");
        let list = dir.join("sources.list");
        std::fs::write(
            &list,
            format!(
                "deb {key} {m} bookworm main\ndeb {key} {m} bookworm-updates main\ndeb {key} {sec} bookworm-security main\ndeb {key} {m} bookworm-backports main\n"
            ),
        )?;
        let opts = private_apt(&dir, &list);
        println!("   installing qemu-system-x86 from bookworm-backports");
        sh(apt_get().args(&opts).arg("update"))?;
        sh(apt_get().args(&opts).args([
            "install",
            "-y",
            "--no-install-recommends",
            "-t",
            "bookworm-backports",
            "qemu-system-x86",
        ]))?;
    }
    Ok(())
}

pub(crate) fn which(cmd: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file())).unwrap_or(false)
}

/// `rustc --version` → "1.95.0".
fn rustc_version() -> Result<String> {
    let v = output(Command::new("rustc").arg("--version"))?;
    v.split_whitespace().nth(1).map(str::to_string).context("parsing rustc --version")
}

/// Paths of the unpacked kernel source and Rust library source.
struct Sources {
    ksrc: PathBuf,
    rust_lib_src: PathBuf,
}

fn sources(work: &Path, rustc: &str) -> Result<Sources> {
    let ksrc = work.join("src").join(KERNEL_DEB_VERSION).join(KERNEL_PKG);
    let rustsrc = work.join("x").join(format!("rust-src-{rustc}"));
    let rust_lib_src = rustsrc.join("usr/lib/rustlib/src/rust/library");
    let have_k = ksrc.join("Makefile").is_file() && ksrc.join(".marrow-unpacked").is_file();
    let have_r = rust_lib_src.join("core/src/lib.rs").is_file();
    if have_k && have_r {
        println!("   {KERNEL_PKG} {KERNEL_DEB_VERSION} and rust-src {rustc} already unpacked");
        return Ok(Sources { ksrc, rust_lib_src });
    }
    let dir = work.join("apt/trixie-backports");
    std::fs::create_dir_all(dir.join("lists/partial"))?;
    std::fs::create_dir_all(dir.join("cache/archives/partial"))?;
    let debs = work.join("debs");
    std::fs::create_dir_all(&debs)?;
    let list = dir.join("sources.list");
    std::fs::write(
        &list,
        format!("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {} trixie-backports main\n", mirror()),
    )?;
    let opts = private_apt(&dir, &list);
    sh(Command::new("apt-get").args(&opts).arg("update"))?;
    // Debian's rust-src at exactly rustc's version (e.g. 1.95.0+dfsg1-2~bpo13+1).
    let madison = output(Command::new("apt-cache").args(&opts).args(["madison", "rust-src"]))?;
    let src_ver = madison
        .lines()
        .filter_map(|l| l.split('|').nth(1).map(str::trim))
        .find(|v| v.starts_with(&format!("{rustc}+")))
        .with_context(|| format!("Debian trixie-backports has no rust-src for rustc {rustc}:\n{madison}"))?
        .to_string();
    println!("   rustc {rustc} -> rust-src {src_ver}");
    let find_deb = |prefix: &str| -> Option<PathBuf> {
        std::fs::read_dir(&debs).ok()?.flatten().map(|e| e.path()).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.ends_with(".deb"))
        })
    };
    // apt-get download names files with ':' escaped as %3a; match on the prefix.
    let kprefix = format!("{KERNEL_PKG}_{KERNEL_DEB_VERSION}_");
    let rprefix = format!("rust-src_{rustc}+");
    if find_deb(&kprefix).is_none() || find_deb(&rprefix).is_none() {
        sh(Command::new("apt-get")
            .args(&opts)
            .args(["download", &format!("{KERNEL_PKG}={KERNEL_DEB_VERSION}"), &format!("rust-src={src_ver}")])
            .current_dir(&debs))?;
    }
    std::fs::create_dir_all(work.join("x"))?;
    let kdeb = find_deb(&kprefix).context("linux-source .deb not downloaded")?;
    let rdeb = find_deb(&rprefix).context("rust-src .deb not downloaded")?;
    if !have_r {
        let _ = std::fs::remove_dir_all(&rustsrc);
        sh(Command::new("dpkg").arg("-x").arg(&rdeb).arg(&rustsrc))?;
    }
    if !have_k {
        let kx = work.join("x/ksrc");
        let _ = std::fs::remove_dir_all(&kx);
        sh(Command::new("dpkg").arg("-x").arg(&kdeb).arg(&kx))?;
        let parent = ksrc.parent().expect("has a parent");
        let _ = std::fs::remove_dir_all(parent);
        std::fs::create_dir_all(parent)?;
        let tarball = kx.join(format!("usr/src/{KERNEL_PKG}.tar.xz"));
        sh(Command::new("tar").arg("-xJf").arg(&tarball).arg("-C").arg(parent))?;
        std::fs::write(ksrc.join(".marrow-unpacked"), KERNEL_DEB_VERSION)?;
        // The tarball is unpacked; the 170 MB copy inside the .deb is not needed again.
        let _ = std::fs::remove_dir_all(&kx);
    }
    Ok(Sources { ksrc, rust_lib_src })
}

fn bindgen(work: &Path) -> Result<PathBuf> {
    let tools = work.join("tools");
    let bin = tools.join("bin/bindgen");
    if bin.is_file() && output(Command::new(&bin).arg("--version")).is_ok_and(|v| v.contains(BINDGEN_VERSION)) {
        println!("   bindgen {BINDGEN_VERSION} present");
        return Ok(tools.join("bin"));
    }
    sh(Command::new("cargo").args(["install", "-q", "--locked", "--root"]).arg(&tools).args([
        "bindgen-cli",
        "--version",
        BINDGEN_VERSION,
    ]))?;
    Ok(tools.join("bin"))
}

/// The kernel cache directory name: version and a hash of everything that
/// decides the kernel's contents.
fn kernel_key(fragment: &str, rustc: &str) -> String {
    let text = format!(
        "{CACHE_SCHEMA}\n{KERNEL_PKG} {KERNEL_DEB_VERSION}\nrustc {rustc}\nbindgen {BINDGEN_VERSION}\nllvm {LLVM}\n{}",
        fragment.trim_end_matches('\n')
    );
    let h = Sha256::digest(text.as_bytes());
    let hex = hex::encode(&h[..6]);
    format!("kernel-{KERNEL_VERSION}-{hex}")
}

/// The kernel `make` command with the toolchain settings.
fn kmake(src: &Sources, kb: &Path, tools_bin: &Path) -> Command {
    let mut c = Command::new("make");
    c.arg("-C")
        .arg(&src.ksrc)
        .arg(format!("O={}", kb.display()))
        .arg(format!("LLVM=-{LLVM}"))
        .arg(format!("RUST_LIB_SRC={}", src.rust_lib_src.display()))
        .env("LIBCLANG_PATH", format!("/usr/lib/llvm-{LLVM}/lib"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![tools_bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    c.env("PATH", std::env::join_paths(dirs).expect("valid PATH"));
    c
}

/// Configure and build the kernel into `kb` unless a finished build is there.
fn kernel(root: &Path, work: &Path, src: &Sources, tools_bin: &Path, rustc: &str, jobs: usize) -> Result<PathBuf> {
    let fragment_path = root.join("kmod/kernel.config");
    let fragment = std::fs::read_to_string(&fragment_path).context("reading kmod/kernel.config")?;
    let kb = work.join(kernel_key(&fragment, rustc));
    let bzimage = kb.join("arch/x86/boot/bzImage");
    let stamp = kb.join(".marrow-kernel-ok");
    if stamp.is_file() && bzimage.is_file() {
        println!("   cached: {}", kb.display());
        return Ok(kb);
    }
    // A directory without the stamp is an interrupted build of this very
    // configuration (the name says so): make resumes it.
    println!("   building into {}{}", kb.display(), if kb.is_dir() { " (resuming)" } else { "" });
    std::fs::create_dir_all(&kb)?;
    enough_space(&kb, KERNEL_BUILD_FREE_BYTES)?;
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs)?;
    sh_logged(kmake(src, &kb, tools_bin).arg("rustavailable"), &logs.join("rustavailable.log"))?;
    sh_logged(kmake(src, &kb, tools_bin).arg("tinyconfig"), &logs.join("tinyconfig.log"))?;
    // CONFIG_X=y / CONFIG_X=n lines → scripts/config -e/-d, twice with
    // olddefconfig between: olddefconfig may pull in options the fragment
    // then turns off again.
    let mut args: Vec<String> = Vec::new();
    let mut want: Vec<(String, bool)> = Vec::new();
    for l in fragment.lines().map(str::trim).filter(|l| l.starts_with("CONFIG_")) {
        let (name, val) = l.split_once('=').with_context(|| format!("kmod/kernel.config: bad line {l:?}"))?;
        let sym = name.trim_start_matches("CONFIG_");
        match val {
            "y" => args.extend(["-e".into(), sym.into()]),
            "n" => args.extend(["-d".into(), sym.into()]),
            _ => bail!("kmod/kernel.config: only =y and =n are supported: {l:?}"),
        }
        want.push((name.to_string(), val == "y"));
    }
    let config = kb.join(".config");
    for pass in 0..2 {
        sh(Command::new(src.ksrc.join("scripts/config")).arg("--file").arg(&config).args(&args))?;
        sh_logged(kmake(src, &kb, tools_bin).arg("olddefconfig"), &logs.join(format!("olddefconfig{pass}.log")))?;
    }
    let have = std::fs::read_to_string(&config)?;
    let wrong: Vec<String> = want
        .iter()
        .filter(|(name, on)| have.lines().any(|l| l == format!("{name}=y")) != *on)
        .map(|(name, on)| format!("{name}={}", if *on { "y" } else { "n" }))
        .collect();
    if !wrong.is_empty() {
        bail!("kmod/kernel.config lines that did not stick (missing dependencies?): {wrong:?}");
    }
    sh_logged(
        kmake(src, &kb, tools_bin).arg(format!("-j{jobs}")).args(["bzImage", "modules"]),
        &logs.join("kernel-build.log"),
    )?;
    if !bzimage.is_file() {
        bail!("kernel build finished without {}", bzimage.display());
    }
    std::fs::write(&stamp, kernel_key(&fragment, rustc))?;
    Ok(kb)
}

/// An error naming `dir`, what it needs and what its file system has free
/// (statvfs: the blocks an unprivileged writer may use), if it is less.
fn enough_space(dir: &Path, need: u64) -> Result<()> {
    let st = nix::sys::statvfs::statvfs(dir).with_context(|| format!("statvfs {}", dir.display()))?;
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    space_verdict(dir, need, free)
}

fn space_verdict(dir: &Path, need: u64, free: u64) -> Result<()> {
    if free < need {
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        bail!(
            "{} needs about {:.1} GiB free for the kernel build; its file system has {:.1} GiB free. \
             Free some (old clones of this repository and their target/ folders are the usual cause) and run again: \
             the build resumes where it stopped",
            dir.display(),
            gib(need),
            gib(free)
        );
    }
    Ok(())
}

fn module(root: &Path, work: &Path, src: &Sources, kb: &Path, tools_bin: &Path) -> Result<PathBuf> {
    let out = work.join("module");
    std::fs::create_dir_all(&out)?;
    // M= the sources, MO= the output (Linux ≥ 6.13): nothing is written into kmod/.
    sh_logged(
        kmake(src, kb, tools_bin)
            .arg(format!("M={}", root.join("kmod/module").display()))
            .arg(format!("MO={}", out.display()))
            .arg("modules"),
        &work.join("logs/module-build.log"),
    )?;
    let log = std::fs::read_to_string(work.join("logs/module-build.log")).unwrap_or_default();
    let warnings: Vec<&str> = log.lines().filter(|l| l.starts_with("warning") || l.starts_with("error")).collect();
    if !warnings.is_empty() {
        bail!("the module build printed warnings:\n{}", log);
    }
    Ok(out.join("marrow.ko"))
}

fn guest_program(root: &Path, work: &Path) -> Result<PathBuf> {
    let target_dir = work.join("guest-target");
    // Static, so the busybox initramfs needs no libc: glibc with crt-static
    // (the musl target is not installed by rustup here).
    sh_logged(
        Command::new("cargo")
            .args(["build", "--release", "--locked", "--target", "x86_64-unknown-linux-gnu"])
            .arg("--target-dir")
            .arg(&target_dir)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env_remove("CARGO_TARGET_DIR")
            .current_dir(root.join("kmod/guest")),
        &work.join("logs/guest-build.log"),
    )?;
    Ok(target_dir.join("x86_64-unknown-linux-gnu/release/marrow-kmodtest"))
}

fn host_nic(root: &Path, work: &Path) -> Result<PathBuf> {
    sh_logged(
        Command::new("cargo")
            .args(["build", "--locked", "-p", "marrow-softnic", "--example", "kmod_nic"])
            .current_dir(root),
        &work.join("logs/kmod-nic-build.log"),
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(target.join("debug/examples/kmod_nic"))
}

fn initramfs(root: &Path, work: &Path, module: &Path, program: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = work.join("initramfs-root");
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["bin", "dev", "etc", "proc", "sys", "tmp"] {
        std::fs::create_dir_all(dir.join(d))?;
    }
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    // su needs to traverse /: not mktemp's 0700 (a failure the recipe hit).
    mode(&dir, 0o755)?;
    mode(&dir.join("tmp"), 0o1777)?;
    // busybox-static's /bin/busybox (a host package above): no libraries needed.
    let busybox = Path::new("/bin/busybox");
    std::fs::copy(busybox, dir.join("bin/busybox"))?;
    for a in APPLETS {
        std::os::unix::fs::symlink("busybox", dir.join("bin").join(a))?;
    }
    // tester is in group marrow (the device's group); outsider is not.
    std::fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/:/bin/sh\ntester:x:1000:1000:tester:/tmp:/bin/sh\noutsider:x:1001:1001:outsider:/tmp:/bin/sh\n",
    )?;
    std::fs::write(dir.join("etc/group"), "root:x:0:\nmarrow:x:900:tester\ntester:x:1000:\noutsider:x:1001:\n")?;
    std::fs::copy(root.join("kmod/guest/init"), dir.join("init"))?;
    mode(&dir.join("init"), 0o755)?;
    std::fs::copy(module, dir.join("marrow.ko"))?;
    std::fs::copy(program, dir.join("marrow-kmodtest"))?;
    mode(&dir.join("marrow-kmodtest"), 0o755)?;
    let out = work.join("initramfs.cpio");
    let f = std::fs::File::create(&out)?;
    sh(Command::new("sh")
        .arg("-c")
        .arg("find . -print0 | cpio --null -o -H newc --owner=0:0 --quiet")
        .current_dir(&dir)
        .stdout(f))?;
    Ok(out)
}

/// The kernel both guests boot, its sources and tools: steps 1 to 4.
pub(crate) struct Kernel {
    pub(crate) work: PathBuf,
    src: Sources,
    tools_bin: PathBuf,
    /// The build directory (`arch/x86/boot/bzImage` inside).
    pub(crate) kb: PathBuf,
}

/// Host packages, sources, bindgen and the kernel (cached by its config).
pub(crate) fn build_kernel(a: &BuildArgs, t: &mut Timings) -> Result<Kernel> {
    let root = crate::repo_root();
    let work = root.join("target/kmod");
    std::fs::create_dir_all(work.join("logs"))?;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    t.time("host packages (Debian bookworm, QEMU from bookworm-backports)", || host_packages(&work, a.no_apt))?;
    let rustc = rustc_version()?;
    let src =
        t.time(&format!("{KERNEL_PKG} and rust-src {rustc} (trixie-backports, unpacked)"), || sources(&work, &rustc))?;
    let tools_bin = t.time(&format!("bindgen-cli {BINDGEN_VERSION}"), || bindgen(&work))?;
    let kb = t.time(&format!("kernel {KERNEL_VERSION} (-j{jobs}, cached by config)"), || {
        kernel(&root, &work, &src, &tools_bin, &rustc, jobs)
    })?;
    Ok(Kernel { work, src, tools_bin, kb })
}

fn build(a: &BuildArgs, t: &mut Timings) -> Result<Built> {
    let root = crate::repo_root();
    let Kernel { work, src, tools_bin, kb } = build_kernel(a, t)?;
    let module = t.time("module marrow.ko", || module(&root, &work, &src, &kb, &tools_bin))?;
    let program = t.time("guest test program (static)", || guest_program(&root, &work))?;
    let kmod_nic = t.time("host softnic (kmod_nic)", || host_nic(&root, &work))?;
    let initramfs = t.time("initramfs", || initramfs(&root, &work, &module, &program))?;
    Ok(Built { bzimage: kb.join("arch/x86/boot/bzImage"), work, module, initramfs, kmod_nic })
}

/// KVM only where it can work: /dev/kvm opens *and* the CPU has hardware
/// virtualisation. Here /dev/kvm exists without vmx and KVM hangs in SeaBIOS.
pub(crate) fn accelerator() -> (&'static str, String) {
    let dev = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    match (dev, hw) {
        (true, true) => ("kvm", "KVM (/dev/kvm opens and the CPU has vmx/svm)".into()),
        (true, false) => ("tcg", "TCG (/dev/kvm opens but the CPU flags have no vmx/svm: KVM would hang)".into()),
        (false, _) => ("tcg", "TCG (no usable /dev/kvm)".into()),
    }
}

/// A child whose output lines are collected by a thread.
pub(crate) struct Watched {
    pub(crate) child: Child,
    pub(crate) lines: Arc<Mutex<Vec<String>>>,
}

pub(crate) fn spawn_watched(cmd: &mut Command, echo: &'static str) -> Result<Watched> {
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().with_context(|| format!("starting {cmd:?}"))?;
    let out = child.stdout.take().expect("piped");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            println!("{echo}{line}");
            l2.lock().expect("not poisoned").push(line);
        }
    });
    Ok(Watched { child, lines })
}

pub(crate) fn wait_timeout(child: &mut Child, limit: Duration) -> Result<Option<std::process::ExitStatus>> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kernel log lines that fail the run wherever they appear on the console.
pub(crate) const KERNEL_BAD: &[&str] = &[
    "BUG:",
    "WARNING:",
    "Oops",
    "Kernel panic",
    "suspected memory leak",
    "marrow: leak",
    "refcount_t:",
    "general protection fault",
    "Call Trace:",
    "possible circular locking",
    "possible recursive locking",
    "sleeping function called",
    "UBSAN:",
];

fn test(b: &Built, t: &mut Timings) -> Result<()> {
    let run = b.work.join("run");
    std::fs::create_dir_all(&run)?;
    // The file behind BAR2: fresh and zeroed each run.
    let bar = run.join("ivshmem-bar2.bin");
    let _ = std::fs::remove_file(&bar);
    std::fs::File::create(&bar)?.set_len(1 << 20)?;
    let serial = run.join("serial.log");
    let (accel, why) = accelerator();
    println!("== kmod: accelerator: {why}");

    let mut nic = spawn_watched(Command::new(&b.kmod_nic).arg(&bar).arg("600"), "[host softnic] ")?;
    let t0 = Instant::now();
    while !nic.lines.lock().expect("not poisoned").iter().any(|l| l.starts_with("kmod_nic: ready")) {
        if let Some(s) = nic.child.try_wait()? {
            bail!("the host softnic exited before it was ready: {s}");
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = nic.child.kill();
            bail!("the host softnic was not ready within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", accel, "-m", "512", "-smp", "1", "-nographic", "-no-reboot", "-net", "none"])
        .arg("-kernel")
        .arg(&b.bzimage)
        .arg("-initrd")
        .arg(&b.initramfs)
        // panic=-1: reboot (so QEMU exits, -no-reboot) at once on a panic.
        .args(["-append", "console=ttyS0 panic=-1 slub_debug=FZPU"])
        .arg("-object")
        .arg(format!("memory-backend-file,id=bar2,size=1M,share=on,mem-path={}", bar.display()))
        // addr=0x4: 0000:00:04.0, the address the module parameters and the test name.
        .args(["-device", "ivshmem-plain,memdev=bar2,addr=0x4"]);
    if accel == "kvm" {
        qemu.args(["-cpu", "host"]);
    }
    let status = t.time(&format!("QEMU ({accel}): boot, guest tests, power off"), || {
        let f = std::fs::File::create(&serial)?;
        let mut child = qemu.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f).spawn().context("starting QEMU")?;
        wait_timeout(&mut child, QEMU_TIMEOUT)
    })?;
    let nic_status = wait_timeout(&mut nic.child, Duration::from_secs(5))?;
    let log = std::fs::read_to_string(&serial).unwrap_or_default();
    println!("---- guest serial console ({})", serial.display());
    print!("{log}");
    println!("---- end of guest serial console");

    let mut passed = 0u32;
    let mut failed = 0u32;
    for l in log.lines() {
        if l.starts_with("ok - ") {
            passed += 1;
        } else if l.starts_with("not ok - ") {
            failed += 1;
        }
    }
    let mut problems = Vec::new();
    match status {
        Some(s) if s.success() => {}
        Some(s) => problems.push(format!("QEMU exited with {s}")),
        None => problems.push(format!("QEMU did not finish within {} s (killed)", QEMU_TIMEOUT.as_secs())),
    }
    for phase in ["root", "outsider", "user", "unbound", "removed", "dmesg"] {
        if !log.lines().any(|l| l.starts_with(&format!("# {phase}: "))) {
            problems.push(format!("guest phase `{phase}` did not report"));
        }
    }
    let guest_lines = |l: &&str| !(l.starts_with("ok - ") || l.starts_with("not ok - ") || l.starts_with('#'));
    for l in log.lines().filter(guest_lines) {
        if KERNEL_BAD.iter().any(|b| l.contains(b)) {
            problems.push(format!("kernel console: {l}"));
        }
    }
    // The host's view: the softnic executed the guest's WQE and saw its success word.
    let host_ok = matches!(nic_status, Some(s) if s.success());
    if host_ok {
        passed += 1;
        println!("ok - host softnic executed the guest's RDMA_WRITE and saw its success report");
    } else {
        failed += 1;
        println!("not ok - host softnic: {nic_status:?} (see its lines above)");
    }
    let summary =
        format!("kmod test: {passed} passed, {failed} failed; accelerator {accel}; serial log {}", serial.display());
    let timings = t.text();
    std::fs::write(run.join("timings.txt"), format!("{timings}{summary}\n"))?;
    t.print();
    for p in &problems {
        println!("problem: {p}");
    }
    println!("{summary}");
    if failed > 0 || !problems.is_empty() || passed == 0 {
        bail!("kmod test failed: {failed} failed check(s), {} problem(s)", problems.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_little_space_is_said_before_the_build_with_both_sizes() {
        let dir = Path::new("/x/target/kmod/kernel-7.3.4-abc");
        let e = space_verdict(dir, 4 << 30, 3 << 29).unwrap_err().to_string();
        assert!(e.starts_with("/x/target/kmod/kernel-7.3.4-abc needs about 4.0 GiB free"), "{e}");
        assert!(e.contains("its file system has 1.5 GiB free") && e.contains("run again"), "{e}");
        assert!(space_verdict(dir, 4 << 30, 4 << 30).is_ok());
        // The real call reads this machine's file system.
        assert!(enough_space(&std::env::temp_dir(), 1).is_ok());
        let e = enough_space(&std::env::temp_dir(), u64::MAX).unwrap_err().to_string();
        assert!(e.contains("needs about") && e.contains("GiB free"), "{e}");
    }

    #[test]
    fn a_logged_step_keeps_its_output_and_a_failure_names_the_log() {
        let dir = std::env::temp_dir().join(format!("xtask-sh-logged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("step.log");
        sh_logged(Command::new("sh").args(["-c", "echo one; sleep 0.3; echo two"]), &log).unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "one\ntwo\n");
        assert_eq!(last_line(&log), "two");
        let e = sh_logged(Command::new("sh").args(["-c", "echo broken >&2; exit 3"]), &log).unwrap_err().to_string();
        assert!(e.contains("exit status: 3") && e.contains(&format!("(log: {})", log.display())), "{e}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "broken\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
