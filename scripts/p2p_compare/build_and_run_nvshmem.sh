#!/usr/bin/env bash
# Build nvshmem_bench.cu against the installed NVSHMEM and run it as 2 PEs
# (two local processes, unique-ID bootstrap through a shared file).
# Usage: build_and_run_nvshmem.sh [OUT_DIR]   (default: a fresh temp dir)
# Exits non-zero with a message on any failure; every wait is bounded.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT_DIR="${1:-$(mktemp -d /tmp/p2p_nvshmem.XXXXXX)}"
mkdir -p "$OUT_DIR" || { echo "FAILED nvshmem: cannot create $OUT_DIR"; exit 1; }
fail() { echo "FAILED nvshmem: $*"; exit 1; }
. "$HERE/two_rank.sh"

# The machine's rules: no NVLink multicast (NVLS) anywhere.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

# --- locate NVSHMEM: a root holding include/nvshmem.h and lib/libnvshmem_host*
NVSHMEM="${NVSHMEM_HOME:-}"
cands=()
[ -n "$NVSHMEM" ] && cands+=("$NVSHMEM")
p=$(python3 -c 'import nvidia.nvshmem, os; print(list(nvidia.nvshmem.__path__)[0])' 2>/dev/null) && cands+=("$p")
for d in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do cands+=("$d/nvshmem"); done
cands+=(/usr/local/nvshmem /opt/nvidia/nvshmem /usr/lib/x86_64-linux-gnu/nvshmem /usr)
NVSHMEM=""
for c in "${cands[@]}"; do
  if [ -f "$c/include/nvshmem.h" ]; then NVSHMEM="$c"; break; fi
done
if [ -z "$NVSHMEM" ]; then
  # Last resort: scan the filesystem (bounded), e.g. /usr/include/nvshmem_13/nvshmem.h.
  h=$(timeout 60 find / -xdev -name nvshmem.h -path '*include*' 2>/dev/null | head -1)
  [ -n "$h" ] && NVSHMEM="$(dirname "$(dirname "$h")")" && INC="$(dirname "$h")"
fi
[ -n "$NVSHMEM" ] || fail "nvshmem.h not found (tried: ${cands[*]} and find /)"
INC="${INC:-$NVSHMEM/include}"
LIB=""
for l in "$NVSHMEM/lib" "$NVSHMEM/lib64" /usr/lib/x86_64-linux-gnu/nvshmem/13 /usr/lib/x86_64-linux-gnu/nvshmem /usr/lib/x86_64-linux-gnu; do
  if ls "$l"/libnvshmem_host.so* >/dev/null 2>&1; then LIB="$l"; break; fi
done
[ -n "$LIB" ] || fail "libnvshmem_host.so* not found near $NVSHMEM"
echo "INFO nvshmem root: $NVSHMEM"
echo "INFO nvshmem include: $INC"
echo "INFO nvshmem lib: $LIB"
ls -l "$LIB"
grep -h 'define NVSHMEM_VENDOR_MAJOR_VERSION\|define NVSHMEM_VENDOR_MINOR_VERSION\|define NVSHMEM_VENDOR_PATCH_VERSION' \
  "$INC"/nvshmem_version.h "$INC"/non_abi/nvshmem_version.h 2>/dev/null
# Show the bootstrap API this header actually has (names changed across 2.x/3.x).
grep -rhoE 'nvshmemx_(get_uniqueid|set_attr_uniqueid_args|init_attr)\b|NVSHMEMX_INIT_WITH_UNIQUEID|NVSHMEMX_INIT_ATTR_INITIALIZER' \
  "$INC" 2>/dev/null | sort | uniq -c

# --- link directory: the wheel ships libnvshmem_host.so.3 without the bare
# .so that -lnvshmem_host needs, so link through a private symlink dir.
LINKDIR="$OUT_DIR/nvshmem_link"
mkdir -p "$LINKDIR"
host_so=$(ls "$LIB"/libnvshmem_host.so "$LIB"/libnvshmem_host.so.* 2>/dev/null | head -1)
ln -sf "$host_so" "$LINKDIR/libnvshmem_host.so"
if [ -f "$LIB/libnvshmem_device.a" ]; then
  ln -sf "$LIB/libnvshmem_device.a" "$LINKDIR/libnvshmem_device.a"
else
  ls "$LIB"/libnvshmem_device* 2>/dev/null
  fail "no libnvshmem_device.a in $LIB (only bitcode? nvcc -rdc cannot link a .bc directly)"
fi

# --- build
NVCC="$(command -v nvcc || echo /usr/local/cuda-13.0/bin/nvcc)"
[ -x "$NVCC" ] || fail "nvcc not found"
echo "INFO nvcc: $NVCC ($("$NVCC" --version | tail -1))"
BIN="$OUT_DIR/nvshmem_bench"
"$NVCC" -std=c++17 -O2 -rdc=true -arch=sm_90 -I"$INC" "$HERE/nvshmem_bench.cu" -o "$BIN" \
  -L"$LINKDIR" -Xlinker -rpath -Xlinker "$LIB" -lnvshmem_host -lnvshmem_device -lcuda -lcudart \
  > "$OUT_DIR/nvshmem_build.txt" 2>&1
brc=$?
cat "$OUT_DIR/nvshmem_build.txt"
[ $brc -eq 0 ] || fail "nvcc exited $brc (see above)"

# --- run: the host library dlopens its bootstrap plugin, so the lib dir must be
# on the search path; point at the versioned file explicitly when that is all there is.
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
uid_so=$(ls "$LIB"/nvshmem_bootstrap_uid.so* 2>/dev/null | head -1)
[ -n "$uid_so" ] || fail "no nvshmem_bootstrap_uid.so* in $LIB"
[ -e "$LIB/nvshmem_bootstrap_uid.so" ] || export NVSHMEM_BOOTSTRAP_UID_PLUGIN="${NVSHMEM_BOOTSTRAP_UID_PLUGIN:-$uid_so}"
# Single node: no network transport; the rendezvous socket on loopback is enough.
export NVSHMEM_REMOTE_TRANSPORT="${NVSHMEM_REMOTE_TRANSPORT:-none}"
export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME="${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo}"
export NVSHMEM_SYMMETRIC_SIZE="${NVSHMEM_SYMMETRIC_SIZE:-2G}"
env | grep -E '^NVSHMEM_|^LD_LIBRARY_PATH=' | sort

run_two_ranks "$BIN" "$OUT_DIR" nvshmem_pe PE
echo "INFO nvshmem run ok"
