#!/usr/bin/env bash
# Run every comparison part with its own timeout; one part failing never stops
# the others. Usage: run_all.sh OUT_DIR
set -u
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR"; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$1"
mkdir -p "$OUT" || { echo "cannot create $OUT"; exit 2; }
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1

# part NAME SECONDS CMD...: output to $OUT/NAME.txt, a FAILED line on error.
part() {
  local name=$1 secs=$2; shift 2
  echo "==== $name"
  timeout "$secs" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then echo "FAILED $name: timed out after ${secs}s" | tee -a "$OUT/$name.txt"
  elif [ $rc -ne 0 ]; then echo "FAILED $name: exit code $rc (see $OUT/$name.txt)" | tee -a "$OUT/$name.txt"
  fi
  tail -n 5 "$OUT/$name.txt"
}

part topo 30 nvidia-smi topo -m
part nvshmem 400 bash "$HERE/build_and_run_nvshmem.sh" "$OUT/nvshmem_build"
part nccl 300 python3 "$HERE/nccl_bench.py"
part nccl_device 300 bash "$HERE/build_and_run_nccl_device.sh" "$OUT/nccl_device_build"

echo "==== summary"
grep -hE '^(RESULT|NOTE|SKIP|FAILED) ' "$OUT"/topo.txt "$OUT"/nvshmem.txt "$OUT"/nccl.txt "$OUT"/nccl_device.txt 2>/dev/null \
  | tee "$OUT/summary.txt"
