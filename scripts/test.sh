#!/usr/bin/env bash
# The project's test command (README "Test"): installs test dependencies,
# checks generated code against hw-specs, then runs every workspace test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
echo "== cargo xtask codegen --check"
cargo xtask codegen --check
echo "== NVRTC 13.0: the GPU kernels compile for sm_90"
bash scripts/nvrtc-check.sh
echo "== cargo test --workspace"
cargo test --workspace --locked
