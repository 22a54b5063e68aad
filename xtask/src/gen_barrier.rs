//! A barrier spec (`hw-specs/barrier.toml`) → Rust functions for
//! `crates/mmio`, a C header for the device code compiled for the CPU, and
//! a Markdown table. One row per barrier, one instruction per architecture,
//! so the driver and the device code cannot drift apart.

use crate::spec::Spec;
use std::fmt::Write;

pub fn rust(spec: &Spec, header: &str) -> String {
    let mut o = String::new();
    for line in header.lines() {
        writeln!(o, "// {line}").unwrap();
    }
    o.push_str(
        "\n#[allow(unused_imports)] // each architecture uses a subset\nuse core::sync::atomic::{Ordering, compiler_fence, fence};\n",
    );
    for b in &spec.barriers {
        writeln!(o, "\n/// {}\n///\n/// rdma-core: `{}`. Source: {}.", b.doc, b.rdma_core, b.cite).unwrap();
        writeln!(o, "#[inline(always)]\npub fn {}() {{", b.name).unwrap();
        for (arch, _, insn) in b.arches() {
            writeln!(o, "    #[cfg(target_arch = \"{arch}\")]").unwrap();
            if insn.is_empty() {
                writeln!(o, "    // {arch} keeps this order itself; only the compiler may reorder.").unwrap();
                writeln!(o, "    compiler_fence(Ordering::SeqCst);").unwrap();
            } else {
                writeln!(o, "    // SAFETY: `{insn}` is a barrier instruction with no memory operands.").unwrap();
                // Laid out as rustfmt would, so `cargo fmt` leaves the file be.
                writeln!(
                    o,
                    "    unsafe {{\n        core::arch::asm!(\"{insn}\", options(nostack, preserves_flags))\n    }};"
                )
                .unwrap();
            }
        }
        let all: Vec<String> = b.arches().iter().map(|(a, _, _)| format!("target_arch = \"{a}\"")).collect();
        writeln!(o, "    #[cfg(not(any({})))]", all.join(", ")).unwrap();
        writeln!(o, "    fence(Ordering::SeqCst);").unwrap();
        o.push_str("}\n");
    }
    o
}

pub fn c(spec: &Spec, header: &str) -> String {
    let p = &spec.spec.c_prefix;
    let guard = format!("{}GENERATED_{}_H", p.to_uppercase(), spec.spec.name.to_uppercase());
    let mut o = String::from("/*\n");
    for line in header.lines() {
        writeln!(o, " * {line}").unwrap();
    }
    o.push_str(" *\n * CPU only: the GPU side of barriers.h fences with PTX at system scope.\n */\n");
    writeln!(o, "#ifndef {guard}\n#define {guard}").unwrap();
    for b in &spec.barriers {
        writeln!(o, "\n/* {} rdma-core: {}. Source: {}. */", b.doc, b.rdma_core, b.cite).unwrap();
        writeln!(o, "static inline void {p}{}(void) {{", b.name).unwrap();
        for (i, (_, mac, insn)) in b.arches().iter().enumerate() {
            writeln!(o, "#{} defined({mac})", if i == 0 { "if" } else { "elif" }).unwrap();
            writeln!(o, "    __asm__ __volatile__(\"{insn}\" ::: \"memory\");").unwrap();
        }
        o.push_str("#else\n    __atomic_thread_fence(__ATOMIC_SEQ_CST);\n#endif\n}\n");
    }
    writeln!(o, "\n#endif /* {guard} */").unwrap();
    o
}

pub fn markdown(spec: &Spec, header: &str) -> String {
    let mut o = String::new();
    writeln!(o, "<!--\n{header}-->\n").unwrap();
    writeln!(o, "# {}\n", spec.spec.title).unwrap();
    o.push_str("Rust: `marrow_mmio::barrier::NAME()`. C (device code on the CPU): `marrow_cpu_NAME()`.\n");
    o.push_str(
        "An empty cell is a compiler barrier only. Other architectures get a sequentially consistent fence.\n\n",
    );
    for (tag, src) in &spec.spec.sources {
        writeln!(o, "- **{tag}**: {src}").unwrap();
    }
    o.push_str("\n| Barrier | rdma-core | Orders | x86-64 | aarch64 | Source |\n|---|---|---|---|---|---|\n");
    for b in &spec.barriers {
        let cell = |s: &str| if s.is_empty() { "(compiler)".to_string() } else { format!("`{s}`") };
        writeln!(
            o,
            "| `{}` | `{}` | {} | {} | {} | {} |",
            b.name,
            b.rdma_core,
            b.doc,
            cell(&b.x86_64),
            cell(&b.aarch64),
            b.cite
        )
        .unwrap();
    }
    o
}
