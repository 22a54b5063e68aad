#!/usr/bin/env bash
# The project's test command (README "Test"): installs test dependencies,
# checks generated code against hw-specs, runs every workspace test, then
# tests the kernel module under QEMU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
echo "== cargo xtask codegen --check"
cargo xtask codegen --check
echo "== NVRTC 13.0: the GPU kernels compile for sm_90"
bash scripts/nvrtc-check.sh
echo "== cargo test --workspace"
cargo test --workspace --locked
# The marrow kernel module in a real kernel under QEMU (kmod/README.md).
# Installs its Debian packages; builds Linux 7.3 once (about 7-10 minutes on
# 2 cores), cached in target/kmod; each later run takes about 15 s.
echo "== cargo xtask kmod test"
cargo xtask kmod test
