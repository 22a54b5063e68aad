#!/usr/bin/env bash
# The project's test command (README "Test"): installs test dependencies,
# checks formatting, lints and docs, checks generated code against hw-specs,
# runs every workspace test, then tests the kernel module under QEMU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# The house rules first: each fails the run on the first file or warning
# that breaks them (rustfmt.toml; the workspace lints in Cargo.toml).
echo "== cargo fmt --check"
cargo fmt --all --check
# Outside the workspace: the guest test program, the fuzz targets, and the
# module (built by kbuild, formatted by the same rules).
cargo fmt --check --manifest-path kmod/guest/Cargo.toml
cargo fmt --check --manifest-path fuzz/Cargo.toml
rustfmt --edition 2024 --check kmod/module/marrow.rs
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo doc --workspace --no-deps (warnings are errors)"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked
echo "== every repository path the docs and comments name exists"
python3 scripts/check-paths.py
echo "== no layout number spelled by hand in the device code or the softnic"
python3 scripts/check-layout-literals.py --self-test
python3 scripts/check-layout-literals.py
echo "== no module of a crate imports another in a circle"
python3 scripts/check-module-cycles.py --self-test
python3 scripts/check-module-cycles.py
echo "== cargo xtask codegen --check"
cargo xtask codegen --check
echo "== NVRTC 13.0: the GPU kernels compile for sm_90"
bash scripts/nvrtc-check.sh
echo "== nvcc 13.0: the GPU probes compile for sm_90"
bash scripts/nvcc-probes-check.sh
echo "== cargo test --workspace"
cargo test --workspace --locked
# The marrow kernel module in a real kernel under QEMU (kmod/README.md).
# Installs its Debian packages; builds Linux 7.3 once (about 7-10 minutes on
# 2 cores), cached in target/kmod; each later run takes about 15 s.
echo "== cargo xtask kmod test"
cargo xtask kmod test
# The softnic against Linux Soft-RoCE (rxe) and rdma-core's own tools
# (ibv_rc_pingpong, perftest) in that same kernel under QEMU (docs/INTEROP.md).
# Reuses the kernel above; installs the tools' Debian packages for the guest.
echo "== cargo xtask interop test"
cargo xtask interop test
