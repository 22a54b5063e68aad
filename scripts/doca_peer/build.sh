#!/usr/bin/env bash
# Build doca_peer.cu into a CUBIN for `marrow bench gpu --doca CUBIN`, with
# nvcc against the DOCA GPUNetIO device headers NCCL 2.28+ installs
# (include/nccl_device/gin/gdaki/doca_gpunetio), for this machine's GPU.
# Usage: build.sh OUT.cubin [sm_XY]
# Looks for the headers under $NCCL_HOME/include, the nvidia-nccl wheel of
# python3's site-packages, then /usr/include and /usr/local; says where it
# looked when it finds none.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT.cubin [sm_XY]"; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$1"
ARCH="${2:-}"
SUB=nccl_device/gin/gdaki/doca_gpunetio
cands=()
[ -n "${NCCL_HOME:-}" ] && cands+=("$NCCL_HOME/include")
for d in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do cands+=("$d/nccl/include"); done
cands+=(/usr/include /usr/local/include /usr/local/nccl/include /usr/local/cuda/include)
INC=""
for c in "${cands[@]}"; do
  if [ -f "$c/$SUB/doca_gpunetio_device.h" ]; then INC="$c/$SUB"; break; fi
done
[ -n "$INC" ] || { echo "build.sh: no $SUB/doca_gpunetio_device.h (NCCL 2.28+'s device headers) under: ${cands[*]}"; exit 1; }
if [ -z "$ARCH" ]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [ -n "$cc" ] || { echo "build.sh: no GPU seen by nvidia-smi; give the architecture (sm_90)"; exit 1; }
  ARCH="sm_$cc"
fi
command -v nvcc >/dev/null || { echo "build.sh: nvcc not on PATH"; exit 1; }
echo "build.sh: DOCA headers $INC; $ARCH; nvcc $(nvcc --version | tail -1)"
nvcc -std=c++17 -O3 -arch="$ARCH" -cubin -I"$INC" -o "$OUT" "$HERE/doca_peer.cu"
echo "build.sh: wrote $OUT"
