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
    mlx5_ifc_harness();
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed=../../kernels/include/marrow/generated");
}

/// Where scripts/install-test-deps.sh unpacks rdma-core's source
/// (providers/mlx5/mlx5_ifc.h) and the kernel's include/linux/mlx5/mlx5_ifc.h.
fn ifc_dirs() -> (std::path::PathBuf, std::path::PathBuf) {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let rdma = std::env::var_os("MARROW_RDMA_CORE_SRC")
        .map(Into::into)
        .unwrap_or_else(|| target.join("rdma-core-src/rdma-core-56.1"));
    let linux = std::env::var_os("MARROW_LINUX_IFC").map(Into::into).unwrap_or_else(|| target.join("linux-ifc"));
    (rdma.join("providers/mlx5"), linux)
}

/// The PRM structs of hw-specs/mlx5.toml and which mlx5_ifc.h is their
/// oracle: the kernel's for the CQ (rdma-core's copy has no cqc), rdma-core's
/// for the rest.
const PRM_STRUCTS: [(&str, bool); 11] = [
    ("cqc", true),
    ("create_cq_in", true),
    ("create_cq_out", false),
    ("ads", false),
    ("qpc", false),
    ("create_qp_in", false),
    ("create_qp_out", false),
    ("rst2init_qp_in", false),
    ("init2rtr_qp_in", false),
    ("rtr2rts_qp_in", false),
    ("rst2init_qp_out", false),
];

/// Fields the spec names that the kernel header leaves reserved; checked
/// against rdma-core's tests/mlx5_prm_structs.py instead (tests/mlx5_ifc.rs).
pub const NOT_IN_KERNEL_IFC: [(&str, &str); 3] =
    [("create_cq_in", "cq_umem_offset"), ("create_cq_in", "cq_umem_id"), ("cqc", "dbr_umem_id")];

/// Writes and compiles one C table per header: every named field and bit
/// range of the generated PRM layouts, as `offsetof`/`sizeof` of the
/// header's `struct mlx5_ifc_<name>_bits` (one byte per PRM bit). A name the
/// header lacks fails the build.
fn mlx5_ifc_harness() {
    use std::fmt::Write;
    let (rdma, linux) = ifc_dirs();
    for (dir, file) in [(&rdma, "mlx5_ifc.h"), (&linux, "linux/mlx5/mlx5_ifc.h")] {
        if !dir.join(file).exists() {
            panic!(
                "marrow-oracle needs {} (unpacked by scripts/install-test-deps.sh from Debian's rdma-core 56.1 source and linux-headers-*-common). Run scripts/install-test-deps.sh.",
                dir.join(file).display()
            );
        }
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    for (linux_side, prefix) in [(false, "ifc_rdma"), (true, "ifc_linux")] {
        let mut c = String::from("#include <stddef.h>\n#include <stdint.h>\n");
        if linux_side {
            c.push_str("typedef uint8_t u8;\n#define BIT(n) (1UL << (n))\n#define BIT_ULL(n) (1ULL << (n))\n#include \"linux/mlx5/mlx5_ifc.h\"\n");
        } else {
            c.push_str("#include \"mlx5_ifc.h\"\n");
        }
        c.push_str("struct ifc_field { const char *strct; const char *field; size_t bit_off; size_t bit_sz; };\n");
        c.push_str("#define B(s, f) { #s, #f, offsetof(struct mlx5_ifc_##s##_bits, f), sizeof(((struct mlx5_ifc_##s##_bits *)0)->f) }\n");
        c.push_str("#define S(s) { #s, \"\", 0, sizeof(struct mlx5_ifc_##s##_bits) }\n");
        let _ = writeln!(c, "static const struct ifc_field fields[] = {{");
        for (name, on_linux) in PRM_STRUCTS {
            if on_linux != linux_side {
                continue;
            }
            let l = marrow_mlx5::raw::ALL_LAYOUTS
                .iter()
                .find(|l| l.name == name)
                .unwrap_or_else(|| panic!("{name} not generated"));
            let _ = writeln!(c, "\tS({name}),");
            for f in l.fields {
                if f.reserved || NOT_IN_KERNEL_IFC.contains(&(name, f.name)) {
                    continue;
                }
                if f.bits.is_empty() {
                    let _ = writeln!(c, "\tB({name}, {}),", f.name);
                }
                for b in f.bits.iter().filter(|b| !b.name.starts_with("reserved_at_")) {
                    let _ = writeln!(c, "\tB({name}, {}),", b.name);
                }
            }
        }
        let _ = writeln!(c, "}};");
        let _ = writeln!(c, "size_t {prefix}_count(void) {{ return sizeof(fields) / sizeof(fields[0]); }}");
        let _ = writeln!(
            c,
            "const struct ifc_field *{prefix}_at(size_t i) {{ return i < {prefix}_count() ? &fields[i] : NULL; }}"
        );
        if !linux_side {
            c.push_str("struct ifc_const { const char *name; uint64_t value; };\n#define C(n) { #n, (uint64_t)(n) }\n");
            c.push_str("static const struct ifc_const consts[] = {\n\tC(MLX5_CMD_OP_CREATE_CQ), C(MLX5_CMD_OP_DESTROY_CQ), C(MLX5_CMD_OP_CREATE_QP), C(MLX5_CMD_OP_DESTROY_QP),\n\tC(MLX5_CMD_OP_RST2INIT_QP), C(MLX5_CMD_OP_INIT2RTR_QP), C(MLX5_CMD_OP_RTR2RTS_QP), C(MLX5_QPC_ST_RC), C(MLX5_QPC_PM_STATE_MIGRATED),\n};\n");
            c.push_str("size_t ifc_const_count(void) { return sizeof(consts) / sizeof(consts[0]); }\nconst struct ifc_const *ifc_const_at(size_t i) { return i < ifc_const_count() ? &consts[i] : NULL; }\n");
        }
        let src = out.join(format!("{prefix}_harness.c"));
        std::fs::write(&src, c).expect("write the mlx5_ifc harness");
        cc::Build::new()
            .file(&src)
            .include(if linux_side { &linux } else { &rdma })
            .flag("-std=gnu11")
            .warnings_into_errors(true)
            .compile(&format!("{prefix}_harness"));
    }
    // The devx command mailboxes built with rdma-core's DEVX_SET (mlx5dv.h).
    cc::Build::new()
        .file("c/devx_commands_rdma.c")
        .include(&rdma)
        .flag("-std=gnu11")
        .warnings_into_errors(true)
        .compile("devx_commands_rdma");
    cc::Build::new()
        .file("c/devx_commands_linux.c")
        .include(&linux)
        .flag("-std=gnu11")
        .warnings_into_errors(true)
        .compile("devx_commands_linux");
    println!("cargo:rerun-if-env-changed=MARROW_RDMA_CORE_SRC");
    println!("cargo:rerun-if-env-changed=MARROW_LINUX_IFC");
    println!("cargo:rerun-if-changed=../../crates/mlx5/src/generated/mlx5.rs");
}
