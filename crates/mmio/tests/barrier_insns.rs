//! Each barrier compiles to the instruction `barrier.rs`'s table promises.
//! A barrier cannot be seen working on one x86 machine (its stores stay in
//! order whatever the code says), but its machine code can: this test wraps
//! every barrier in a function of its own, disassembles this very test binary
//! with `objdump` (Debian `binutils`) and reads each wrapper's body.

#![cfg(target_arch = "x86_64")]

use std::process::Command;

#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn probe_to_device() {
    marrow_mmio::barrier::to_device();
}

#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn probe_from_device() {
    marrow_mmio::barrier::from_device();
}

#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn probe_wc_start() {
    marrow_mmio::barrier::wc_start();
}

#[inline(never)]
#[unsafe(no_mangle)]
pub extern "C" fn probe_wc_flush() {
    marrow_mmio::barrier::wc_flush();
}

/// The mnemonics of `symbol`'s body in this test binary.
fn body(symbol: &str) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", &format!("--disassemble={symbol}")])
        .arg(&exe)
        .output()
        .expect("objdump runs (scripts/install-test-deps.sh installs binutils)");
    assert!(out.status.success(), "objdump failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("objdump prints text");
    let insns: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(":\t").map(|(_, i)| i.split_whitespace().next().unwrap_or("").to_owned()))
        .collect();
    assert!(!insns.is_empty(), "{symbol} not found in {}:\n{text}", exe.display());
    insns
}

fn fences(symbol: &str) -> Vec<String> {
    body(symbol).into_iter().filter(|i| i.ends_with("fence")).collect()
}

#[test]
fn to_device_is_a_compiler_fence_only() {
    // Called, so the linker keeps the probe.
    probe_to_device();
    assert_eq!(fences("probe_to_device"), Vec::<String>::new());
}

#[test]
fn from_device_is_lfence() {
    probe_from_device();
    assert_eq!(fences("probe_from_device"), ["lfence"]);
}

#[test]
fn wc_start_and_wc_flush_are_sfence() {
    probe_wc_start();
    probe_wc_flush();
    assert_eq!(fences("probe_wc_start"), ["sfence"]);
    assert_eq!(fences("probe_wc_flush"), ["sfence"]);
}
