#!/usr/bin/env bash
# Compile the GPU probes (scripts/gpu_probe/*.cu: the evidence behind
# docs/PERFORMANCE.md, run by hand on the device machine) with PyPI's nvcc
# 13.0 for sm_90, host code included, so that a change to the device
# headers they include cannot leave them broken until someone next runs
# them on a GPU. No GPU needed: each is compiled to an object, not run.
# The wheels are installed once under target/nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
site=target/nvcc
cuda=$site/nvidia/cu13
if ! [ -x "$cuda/bin/nvcc" ] || ! [ -x "$cuda/nvvm/bin/cicc" ] || ! [ -f "$cuda/include/crt/host_config.h" ]; then
    echo "nvcc-probes-check: installing nvcc 13.0.88 and its headers into $site"
    rm -rf "$site"
    # One install: pip --target replaces the shared nvidia/ folder per call.
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" \
        "nvidia-cuda-nvcc==13.0.88" "nvidia-cuda-crt==13.0.88" "nvidia-nvvm==13.0.88" \
        "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-cccl==13.0.85"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0
for f in scripts/gpu_probe/*.cu; do
    if ! "$cuda/bin/nvcc" -O3 -arch=sm_90 -std=c++17 -Ikernels/include -I"$cuda/include" -I"$cuda/include/cccl" \
        -c -o "$out/probe.o" "$f" >"$out/log" 2>&1; then
        echo "nvcc-probes-check: $f does not compile:"
        cat "$out/log"
        exit 1
    fi
    n=$((n + 1))
done
echo "nvcc-probes-check: nvcc 13.0: $n probes compiled for sm_90"
