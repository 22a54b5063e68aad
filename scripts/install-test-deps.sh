#!/usr/bin/env bash
# Installs what the tests need from Debian, and nothing when it is already there.
#   libibverbs-dev: rdma-core's <infiniband/mlx5dv.h>, the oracle for mlx5 layouts.
#   g++:            compiles the generated C header as C++ in the oracle tests.
#   linux-libc-dev: Linux's <linux/pci_regs.h>, the oracle for marrow-pcie's constants.
#   pciutils:       lspci, which the marrow-pcie differential test runs on every fixture.
set -euo pipefail
need=()
[ -f /usr/include/infiniband/mlx5dv.h ] || need+=(libibverbs-dev)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/linux/pci_regs.h ] || need+=(linux-libc-dev)
command -v lspci >/dev/null || need+=(pciutils)
command -v cc >/dev/null || need+=(gcc)
if [ ${#need[@]} -gt 0 ]; then
    echo "install-test-deps: installing ${need[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
