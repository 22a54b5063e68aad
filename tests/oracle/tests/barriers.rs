//! The CPU barriers against rdma-core's (`util/udma_barrier.h`, the
//! oracle): for x86-64 and aarch64, a probe wraps each of rdma-core's
//! macros, each generated `marrow_cpu_*` barrier and each of the device
//! code's `barriers.h` barriers in a function of its own, compiles it with
//! that architecture's g++ and reads the instructions back with its objdump.
//! The Rust barriers of `crates/mmio` are read from this very test binary.
//!
//! A barrier cannot be seen working on one machine (an x86 keeps its
//! stores in order whatever the code says), but its machine code can.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const BARRIERS: [(&str, &str); 4] = [
    ("to_device", "udma_to_device_barrier"),
    ("from_device", "udma_from_device_barrier"),
    ("wc_start", "mmio_wc_start"),
    ("wc_flush", "mmio_flush_writes"),
];

struct Arch {
    name: &'static str,
    cxx: &'static str,
    objdump: &'static str,
}

const ARCHES: [Arch; 2] = [
    Arch { name: "x86_64", cxx: "g++", objdump: "objdump" },
    Arch { name: "aarch64", cxx: "aarch64-linux-gnu-g++", objdump: "aarch64-linux-gnu-objdump" },
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn udma_barrier_dir() -> PathBuf {
    std::env::var_os("MARROW_RDMA_CORE_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/rdma-core-src/rdma-core-56.1"))
        .join("util")
}

/// One function per barrier and source: `rc_NAME` (rdma-core), `gen_NAME`
/// (the generated header), `dev_NAME` (barriers.h), and `acquire` (the
/// compiler's own acquire fence, which barriers.h's to_device adds).
fn probe_source() -> String {
    let mut s = String::from(
        "#include <udma_barrier.h>\n#include \"marrow/barriers.h\"\nextern \"C\" {\n\
         void acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }\n",
    );
    for (name, rc) in BARRIERS {
        s += &format!("void rc_{name}(void) {{ {rc}(); }}\n");
        s += &format!("void gen_{name}(void) {{ marrow_cpu_{name}(); }}\n");
        s += &format!("void dev_{name}(void) {{ marrow::{name}(); }}\n");
    }
    s + "}\n"
}

/// The instructions of `symbol` in `obj`, without the return, padding and
/// branch-target markers every function has.
fn body(objdump: &str, obj: &Path, symbol: &str) -> Vec<String> {
    let out = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn", &format!("--disassemble={symbol}")])
        .arg(obj)
        .output()
        .unwrap_or_else(|e| panic!("{objdump}: {e} (scripts/install-test-deps.sh installs it)"));
    assert!(out.status.success(), "{objdump} failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("objdump prints text");
    let mut found = false;
    let mut insns = Vec::new();
    for line in text.lines() {
        if line.contains(&format!("<{symbol}>:")) {
            found = true;
        }
        let Some((_, insn)) = line.split_once(":\t") else { continue };
        let insn = insn.split('#').next().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
        let skip = ["ret", "nop", "endbr64", "xchg %ax,%ax", "cs nopw", "data16", "bti c", "paciasp", "autiasp"];
        if !insn.is_empty() && !skip.iter().any(|s| insn.starts_with(s)) {
            insns.push(insn);
        }
    }
    assert!(found, "{symbol} not in {}:\n{text}", obj.display());
    insns
}

/// The probe object for `arch`, compiled once per test binary: the two
/// tests run in parallel, and two compilers writing the same `probe.o`
/// let an objdump read a half-written file.
fn compile_probe(arch: &Arch) -> PathBuf {
    static OBJECTS: [OnceLock<PathBuf>; ARCHES.len()] = [const { OnceLock::new() }; ARCHES.len()];
    let index = ARCHES.iter().position(|a| a.name == arch.name).expect("a listed architecture");
    OBJECTS[index].get_or_init(|| compile_probe_once(arch)).clone()
}

fn compile_probe_once(arch: &Arch) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("barriers-{}", arch.name));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.cpp");
    std::fs::write(&src, probe_source()).unwrap();
    let obj = dir.join("probe.o");
    let rc = udma_barrier_dir();
    assert!(rc.join("udma_barrier.h").exists(), "{} missing: run scripts/install-test-deps.sh", rc.display());
    let out = Command::new(arch.cxx)
        .args(["-std=c++17", "-O2", "-c", "-I"])
        .arg(&rc)
        .arg("-I")
        .arg(repo().join("kernels/include"))
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/install-test-deps.sh installs it)", arch.cxx));
    assert!(out.status.success(), "{} failed:\n{}", arch.cxx, String::from_utf8_lossy(&out.stderr));
    obj
}

#[test]
fn generated_and_device_code_barriers_are_rdma_cores_on_every_architecture() {
    let mut compared = 0;
    for arch in &ARCHES {
        let obj = compile_probe(arch);
        let acquire = body(arch.objdump, &obj, "acquire");
        for (name, rc) in BARRIERS {
            let want = body(arch.objdump, &obj, &format!("rc_{name}"));
            let generated = body(arch.objdump, &obj, &format!("gen_{name}"));
            assert_eq!(generated, want, "{}: marrow_cpu_{name} is not rdma-core's {rc}", arch.name);
            // barriers.h's to_device also orders the ready chain's earlier
            // load (an acquire); the others are the table's row alone.
            let mut device = want.clone();
            if name == "to_device" {
                device.extend(acquire.iter().cloned());
            }
            let got = body(arch.objdump, &obj, &format!("dev_{name}"));
            assert_eq!(got, device, "{}: barriers.h {name} is not rdma-core's {rc}", arch.name);
            compared += 2;
        }
    }
    // aarch64 must show the outer-shareable barriers rdma-core uses.
    let obj = compile_probe(&ARCHES[1]);
    assert_eq!(body(ARCHES[1].objdump, &obj, "gen_to_device"), ["dmb oshst"]);
    assert_eq!(body(ARCHES[1].objdump, &obj, "gen_from_device"), ["dmb oshld"]);
    assert_eq!(compared, 16);
}

/// The Rust barriers, each in a function of its own in this test binary.
mod rust_probe {
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub extern "C" fn rust_to_device() {
        marrow_mmio::barrier::to_device();
    }
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub extern "C" fn rust_from_device() {
        marrow_mmio::barrier::from_device();
    }
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub extern "C" fn rust_wc_start() {
        marrow_mmio::barrier::wc_start();
    }
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub extern "C" fn rust_wc_flush() {
        marrow_mmio::barrier::wc_flush();
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_rust_barriers_are_rdma_cores_on_this_machine() {
    // Called, so the linker keeps them.
    rust_probe::rust_to_device();
    rust_probe::rust_from_device();
    rust_probe::rust_wc_start();
    rust_probe::rust_wc_flush();
    let exe = std::env::current_exe().unwrap();
    let obj = compile_probe(&ARCHES[0]);
    for (name, rc) in BARRIERS {
        // The Rust wrappers are extern "C" functions of the test binary;
        // only their fences are compared (Rust and g++ frame them differently).
        let fences = |v: Vec<String>| v.into_iter().filter(|i| i.ends_with("fence")).collect::<Vec<_>>();
        let want = fences(body("objdump", &obj, &format!("rc_{name}")));
        let got = fences(body("objdump", &exe, &format!("rust_{name}")));
        assert_eq!(got, want, "marrow_mmio::barrier::{name} is not rdma-core's {rc}");
    }
}
