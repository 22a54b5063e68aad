#!/usr/bin/env bash
# The two-GPU comparison in one command, on a machine with two GPUs:
#   marrow's transport P2P (`marrow bench p2p`: every operation checked,
#   then the 8-byte round trip and put bandwidth against their floors), then
#   NVSHMEM, NCCL (through PyTorch, and its device API through nvcc) and
#   cudaMemcpyPeer on the same GPUs
#   (scripts/p2p_compare/run_all.sh). NVLink multicast stays off.
# Usage: scripts/bench_p2p.sh OUT_DIR [MARROW_BINARY]
set -u
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [MARROW_BINARY]"; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$1"
BIN="${2:-$HERE/../target/release/marrow}"
mkdir -p "$OUT"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda-13.0/lib64"
echo "==== marrow bench p2p"
timeout 300 "$BIN" bench p2p > "$OUT/marrow.txt" 2>&1
echo "marrow bench p2p: exit $?" | tee -a "$OUT/marrow.txt"
cat "$OUT/marrow.txt"
bash "$HERE/p2p_compare/run_all.sh" "$OUT/compare"
echo "==== all figures"
grep -h "RESULT" "$OUT/marrow.txt" "$OUT/compare/summary.txt" 2>/dev/null | tee "$OUT/results.txt"
