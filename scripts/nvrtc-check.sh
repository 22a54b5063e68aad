#!/usr/bin/env bash
# Compile the GPU kernels for sm_90 with PyPI's NVRTC 13.0 (no GPU needed).
# The wheel is installed once under target/nvrtc.
set -euo pipefail
cd "$(dirname "$0")/.."
site=target/nvrtc
if ! ls "$site"/nvidia/cu13/lib/libnvrtc.so* >/dev/null 2>&1; then
    echo "nvrtc-check: installing nvidia-cuda-nvrtc 13.0.88 into $site"
    python3 -m pip install --quiet --disable-pip-version-check --target "$site" "nvidia-cuda-nvrtc==13.0.88"
fi
python3 scripts/nvrtc_check.py "$site"
