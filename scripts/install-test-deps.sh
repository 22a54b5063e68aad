#!/usr/bin/env bash
# Installs what the tests need from Debian, and nothing when it is already there.
#   libibverbs-dev: rdma-core's <infiniband/mlx5dv.h>, the oracle for mlx5 layouts.
#   g++:            compiles the generated C header as C++ in the oracle tests.
#   linux-libc-dev: Linux's <linux/pci_regs.h>, the oracle for marrow-pcie's constants.
#   pciutils:       lspci, which the marrow-pcie differential test runs on every fixture.
set -euo pipefail
cd "$(dirname "$0")/.."
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

# PyPI: cocotbext-pcie 0.2.16 (MIT), whose Tlp class is the independent TLP
# header codec tests/oracle/tests/tlp_cocotb.rs compares against. Installed
# once under target/pyoracle, outside the system Python.
site=target/pyoracle
if ! PYTHONPATH="$site" python3 -c "import cocotbext.pcie.core.tlp" >/dev/null 2>&1; then
    echo "install-test-deps: installing cocotbext-pcie 0.2.16 into $site"
    rm -rf "$site"
    python3 -m pip install --quiet --disable-pip-version-check --target "$site" "cocotbext-pcie==0.2.16"
fi
