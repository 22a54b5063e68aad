#!/usr/bin/env bash
# Installs what the tests need from Debian, and nothing when it is already there.
#   libibverbs-dev: rdma-core's <infiniband/mlx5dv.h>, the oracle for mlx5 layouts.
#   g++:            compiles the generated C header as C++ in the oracle tests.
#   linux-libc-dev: Linux's <linux/pci_regs.h>, the oracle for marrow-pcie's constants.
#   pciutils:       lspci, which the marrow-pcie differential test runs on every fixture.
#   tshark:         Wireshark's dissectors, the judge of every RoCEv2 frame the
#                   softnic writes to a pcap (crates/roce/tests/tshark.rs and the
#                   softnic's wire tests).
#   binutils:       objdump, which tests/oracle/tests/barriers.rs reads the barriers with.
#   g++-aarch64-linux-gnu, libc6-dev-arm64-cross: an aarch64 C++ compiler and
#                   objdump, so tests/oracle/tests/barriers.rs can compare the
#                   device code's CPU barriers with rdma-core's on aarch64 too.
#   ibverbs-providers, libibverbs1: rdma-core's runtime (libmlx5.so.1, libibverbs.so.1),
#                   which marrow-verbs dlopens; its tests check the no-device errors.
#   openmpi-bin, libopenmpi3: mpirun and libmpi.so.40, which marrow-verbs dlopens
#                   for the bootstrap under mpirun; crates/verbs/tests/mpi_bootstrap.rs runs 2 ranks.
# Plus two sources, unpacked under target/ (never installed):
#   rdma-core 56.1 (Debian source tarball, sha256 pinned): providers/mlx5/mlx5_ifc.h
#                   and tests/mlx5_prm_structs.py, the oracles for the PRM layouts,
#                   and util/udma_barrier.h, the oracle for the CPU barriers.
#   linux-headers-*-common (Debian .deb): include/linux/mlx5/mlx5_ifc.h, the
#                   oracle for the CQ context that rdma-core's copy lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -f /usr/include/infiniband/mlx5dv.h ] || need+=(libibverbs-dev)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/linux/pci_regs.h ] || need+=(linux-libc-dev)
command -v lspci >/dev/null || need+=(pciutils)
command -v cc >/dev/null || need+=(gcc)
command -v objdump >/dev/null || need+=(binutils)
command -v tshark >/dev/null || need+=(tshark)
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
[ -f /usr/aarch64-linux-gnu/include/pthread.h ] || need+=(libc6-dev-arm64-cross)
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -e /usr/lib/aarch64-linux-gnu/libmlx5.so.1 ] || need+=(ibverbs-providers)
command -v curl >/dev/null || need+=(curl)
command -v mpirun >/dev/null || need+=(openmpi-bin)
[ -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] || [ -e /usr/lib/aarch64-linux-gnu/libmpi.so.40 ] || need+=(libopenmpi3)
if [ ${#need[@]} -gt 0 ]; then
    echo "install-test-deps: installing ${need[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# PyPI: cocotbext-pcie 0.2.16 (MIT), whose Tlp class is the independent TLP
# header codec tests/oracle/tests/tlp_cocotb.rs compares against. Installed
# once under target/pyoracle, outside the system Python.
site=target/pyoracle
if ! PYTHONPATH="$site" python3 -c "import cocotbext.pcie.core.tlp" >/dev/null 2>&1; then
    echo "install-test-deps: installing cocotbext-pcie 0.2.16 into $site"
    rm -rf "$site"
    python3 -m pip install --quiet --disable-pip-version-check --target "$site" "cocotbext-pcie==0.2.16"
fi

# rdma-core's source, for providers/mlx5/mlx5_ifc.h (not installed by any
# binary package). Debian's pool keeps the trixie tarball; the layouts the
# oracle compares are stable PRM.
rc=target/rdma-core-src
rc_ver=56.1
rc_sha=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8
if [ ! -f "$rc/rdma-core-$rc_ver/providers/mlx5/mlx5_ifc.h" ] || [ ! -f "$rc/rdma-core-$rc_ver/util/udma_barrier.h" ]; then
    echo "install-test-deps: fetching rdma-core $rc_ver source into $rc"
    mkdir -p "$rc"
    tarball="$rc/rdma-core_$rc_ver.orig.tar.gz"
    curl -sSfL -o "$tarball" "https://deb.debian.org/debian/pool/main/r/rdma-core/rdma-core_$rc_ver.orig.tar.gz"
    echo "$rc_sha  $tarball" | sha256sum -c --quiet
    tar -xzf "$tarball" -C "$rc" "rdma-core-$rc_ver/providers/mlx5" "rdma-core-$rc_ver/tests/mlx5_prm_structs.py" \
        "rdma-core-$rc_ver/util/udma_barrier.h"
fi

# The kernel's mlx5_ifc.h, from the newest linux-headers-*-common .deb apt knows.
li=target/linux-ifc
if [ ! -f "$li/linux/mlx5/mlx5_ifc.h" ]; then
    mkdir -p "$li"
    pkg=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-common$' | awk '{print $1}' | sort -V | tail -1)
    if [ -z "$pkg" ]; then
        if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
        $SUDO apt-get update -qq
        pkg=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-common$' | awk '{print $1}' | sort -V | tail -1)
    fi
    echo "install-test-deps: unpacking include/linux/mlx5/mlx5_ifc.h from $pkg into $li"
    (cd "$li" && apt-get download -q "$pkg" >/dev/null 2>&1 || { echo "apt-get download $pkg failed" >&2; exit 1; })
    dpkg-deb --fsys-tarfile "$li"/"$pkg"_*.deb | tar -x -C "$li" --wildcards --strip-components=5 \
        './usr/src/linux-headers-*-common/include/linux/mlx5/mlx5_ifc.h' \
        './usr/src/linux-headers-*-common/include/linux/mlx5/mlx5_ifc_fpga.h'
    rm -f "$li"/"$pkg"_*.deb
fi
