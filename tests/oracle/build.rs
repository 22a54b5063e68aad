//! Compiles the C/C++ oracle harnesses. They need rdma-core's
//! `<infiniband/mlx5dv.h>` (Debian `libibverbs-dev`): without it the build
//! fails with a message naming the package, rather than skipping the tests.

fn main() {
    let header = std::path::Path::new("/usr/include/infiniband/mlx5dv.h");
    if !header.exists() {
        panic!(
            "marrow-oracle needs rdma-core's {} (Debian package libibverbs-dev). \
             Run scripts/install-test-deps.sh, or apt-get install -y libibverbs-dev.",
            header.display()
        );
    }
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kernels/include");
    // The rdma-core harness: C, with SSSE3 so mlx5dv.h declares its x86 variants.
    cc::Build::new()
        .file("c/rdma_core_harness.c")
        .include(include)
        .flag("-mssse3") // mlx5dv.h gates its x86 helpers on __SSE3__ but they use the SSSE3 shuffle
        .flag("-std=gnu11")
        .warnings_into_errors(true)
        .compile("rdma_core_harness");
    // The generated header compiled as C++ (g++), with its static asserts.
    cc::Build::new()
        .cpp(true)
        .file("c/generated_layout.cpp")
        .include(include)
        .flag("-std=c++17")
        .warnings_into_errors(true)
        .compile("generated_layout");
    // rdma-core's verbs.h/mlx5dv.h ABI: the oracle for marrow-verbs' hand-declared FFI.
    cc::Build::new()
        .file("c/verbs_abi_harness.c")
        .flag("-std=gnu11")
        .warnings_into_errors(true)
        .compile("verbs_abi_harness");
    // Linux's <linux/pci_regs.h> (linux-libc-dev), the oracle for marrow-pcie.
    cc::Build::new()
        .file("c/pci_regs_harness.c")
        .flag("-std=gnu11")
        .warnings_into_errors(true)
        .compile("pci_regs_harness");
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed=../../kernels/include/marrow/generated");
}
