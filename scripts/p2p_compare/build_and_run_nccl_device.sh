#!/usr/bin/env bash
# Build nccl_device_bench.cu against the installed NCCL (2.28+: nccl_device.h)
# and run it as 2 ranks (two local processes, unique-ID bootstrap through a
# shared file). Usage: build_and_run_nccl_device.sh [OUT_DIR]
# Prints "SKIP nccl_device: ..." and exits 0 where NCCL's device API is not
# installed; exits non-zero with a FAILED line on any other failure.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT_DIR="${1:-$(mktemp -d /tmp/p2p_nccl_device.XXXXXX)}"
mkdir -p "$OUT_DIR" || { echo "FAILED nccl_device: cannot create $OUT_DIR"; exit 1; }
fail() { echo "FAILED nccl_device: $*"; exit 1; }
. "$HERE/two_rank.sh"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1

# --- locate NCCL: a root holding include/nccl.h and lib/libnccl.so*
cands=()
[ -n "${NCCL_HOME:-}" ] && cands+=("$NCCL_HOME")
for d in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do cands+=("$d/nccl" "$d/cu13" "$d/cu12"); done
cands+=(/usr/local/nccl /opt/nvidia/nccl /usr/local/cuda /usr/local/cuda-13.0 /usr)
ROOT=""
for c in "${cands[@]}"; do
  if [ -f "$c/include/nccl.h" ]; then ROOT="$c"; break; fi
done
INC="${ROOT:+$ROOT/include}"
if [ -z "$ROOT" ]; then
  h=$(timeout 60 find / -xdev -name nccl.h -path '*include*' 2>/dev/null | head -1)
  [ -n "$h" ] && INC="$(dirname "$h")" && ROOT="$(dirname "$INC")"
fi
[ -n "$ROOT" ] || { echo "SKIP nccl_device: nccl.h not found (tried: ${cands[*]} and find /)"; exit 0; }
if [ ! -f "$INC/nccl_device.h" ]; then
  echo "SKIP nccl_device: $INC has nccl.h but no nccl_device.h (NCCL before 2.28 has no device API)"
  exit 0
fi
LIB=""
for l in "$ROOT/lib" "$ROOT/lib64" /usr/lib/x86_64-linux-gnu; do
  if ls "$l"/libnccl.so* >/dev/null 2>&1; then LIB="$l"; break; fi
done
[ -n "$LIB" ] || fail "libnccl.so* not found near $ROOT"
echo "INFO nccl include: $INC"
echo "INFO nccl lib: $LIB"
grep -h 'define NCCL_MAJOR\|define NCCL_MINOR\|define NCCL_PATCH' "$INC/nccl.h"
# The wheel ships libnccl.so.2 without the bare .so that -lnccl needs.
LINKDIR="$OUT_DIR/nccl_link"
mkdir -p "$LINKDIR"
ln -sf "$(ls "$LIB"/libnccl.so "$LIB"/libnccl.so.* 2>/dev/null | head -1)" "$LINKDIR/libnccl.so"

# --- build
NVCC="$(command -v nvcc || echo /usr/local/cuda-13.0/bin/nvcc)"
[ -x "$NVCC" ] || fail "nvcc not found"
BIN="$OUT_DIR/nccl_device_bench"
"$NVCC" -std=c++17 -O2 -arch=sm_90 -I"$INC" "$HERE/nccl_device_bench.cu" -o "$BIN" \
  -L"$LINKDIR" -Xlinker -rpath -Xlinker "$LIB" -lnccl > "$OUT_DIR/nccl_device_build.txt" 2>&1
brc=$?
cat "$OUT_DIR/nccl_device_build.txt"
[ $brc -eq 0 ] || fail "nvcc exited $brc (see above)"

# --- run
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run_two_ranks "$BIN" "$OUT_DIR" rank rank
echo "INFO nccl_device run ok"
