#!/usr/bin/env python3
"""No layout number spelled by hand in the device code or the softnic.

Every field offset, shift and mask of a hardware or GCRB layout has a
generated name (`cargo xtask codegen`: `MARROW_MLX5_CQE64_OP_OWN_OFF`,
`MARROW_MLX5_CQE64_OWNER_SHIFT`, `mlx5_cq_dbrec::CONS_INDEX_MASK`), so
code that works on raw words should use it: one grep then crosses the
spec, Rust, C and CUDA, and a changed spec changes the code. This check
fails on the shapes a hand-written layout number takes:

- a shift by a literal (`x >> 24`, `v << 8`); `1 << 20` and other powers
  of two written as a literal shifted are sizes, not places, and pass, as
  do a shift by 1 (a halving or doubling) and `>> 8 * n` (bits per byte);
- a mask that is a literal (`x & 0x3f`, `w & 255`); `& 1` passes (a
  parity or a flag test reads the same whatever the layout);
- a hex literal compared with or assigned to a status or key word
  (`0xffffffff`): any hex literal of two or more digits outside the above,
  except where a named constant is defined (`const NAME: u32 = 0x80;`,
  `constexpr`, `#define`, a bitflags constant, a table row or match arm
  that gives a code its words): there the number gets its name.

Scanned, leaving out generated/, code after `#[cfg(test)]` and a test
module in a file of its own (`#[cfg(test)] mod tests;`, scripts/rust_tree.py):
- the device code: kernels/include/marrow/*.h and the kernels of
  kernels/gpu and kernels/cpu;
- the softnic, the CPU initiator, the host side, the crates they build on
  and the interop endpoints: crates/softnic, driver, transport, mlx5,
  roce, pcie, gcrb, mmio, layout and interop (src/); crates/verbs keeps
  a hash's constants and sample values the shapes would flag;
- the command's decoders of mlx5 records, TLPs and PCI configuration
  space: crates/cli/src/decode/, trace/, trace_shared.rs, trace_stats.rs,
  trace_text.rs
  and pcie*.rs. The rest of the command formats numbers and draws random
  ones, arithmetic these shapes flag.

A line that must keep a number says why, in a comment
holding `layout-ok:`. `--self-test` runs the check on samples, each of
which must be flagged or must pass, so that the check itself can fail.
"""
import glob
import os
import re
import sys
from pathlib import Path

from rust_tree import is_test_module, test_module_paths

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

LITERAL = r"(?:0[xX][0-9a-fA-F_]+|[0-9][0-9_]*)(?:u|U|ul|UL|ull|ULL|u32|u64|usize)?"
# A shift whose right operand is a literal (not a multiplier: `8 * n` bits),
# unless the left operand is a literal too.
SHIFT = re.compile(r"(?<![<>])(?P<left>[\w)\]]+)\s*(?:<<|>>)\s*(?P<n>" + LITERAL + r")\b(?!\s*\*)")
# A mask: & then a literal (not &&, not a reference `&0` or `&64u32.to_be_bytes()`).
MASK = re.compile(r"(?<![&\w])&\s*(?P<n>" + LITERAL + r")\b(?!\s*[\w(.])")
HEX = re.compile(r"\b0[xX][0-9a-fA-F_]{2,}(?:u|U|ul|UL|ull|ULL|u8|u16|u32|u64|usize)?\b")
# A named constant's definition: where a number gets its name. Besides
# `const NAME: T =`, `constexpr` and `#define`: a bitflags constant
# (`const SV = 0x0001;`), a row of a table macro that names a code
# (`PM = 0x01, "Power Management";`) and a match arm that words one
# (`0x02 => "I/O space",`; strings are blanked before matching).
DEFINITION = re.compile(
    r"^\s*(?:(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+\w+\s*[:=]|constexpr\b|#\s*define\b)"
    r"|[A-Z][A-Z0-9_]*\s*=\s*" + LITERAL + r"\s*,\s*\"\""
    r"|" + LITERAL + r"\s*=>\s*\"\")"
)


def strip(line: str, in_block: bool):
    """The code of `line` (comments and string literals blanked) and whether
    a /* */ comment is still open after it."""
    out, i, n = [], 0, len(line)
    while i < n:
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_block, i = True, i + 2
            continue
        if c == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append('""')
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), in_block


def value(lit: str) -> int:
    lit = re.sub(r"(u|U|ul|UL|ull|ULL|u32|u64|usize)$", "", lit).replace("_", "")
    return int(lit, 16) if lit[:2].lower() == "0x" else int(lit)


def findings(code: str):
    """What in one line of code looks like a layout number."""
    found = []
    for m in SHIFT.finditer(code):
        if re.fullmatch(LITERAL, m.group("left")) or value(m.group("n")) == 1:
            continue  # a power of two or a literal moved (a size), or a halving
        found.append(f"shift by {m.group('n')}")
    for m in MASK.finditer(code):
        if value(m.group("n")) > 1:
            found.append(f"mask {m.group('n')}")
    spans = [m.span() for m in SHIFT.finditer(code)] + [m.span() for m in MASK.finditer(code)]
    for m in HEX.finditer(code if not DEFINITION.match(code) else ""):
        if not any(a <= m.start() < b for a, b in spans):
            found.append(f"literal {m.group(0)}")
    return found


def check_file(path: str, text: str):
    rust = path.endswith(".rs")
    problems, in_block = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if rust and line.strip() == "#[cfg(test)]":
            break  # tests spell the values they check
        code, in_block = strip(line, in_block)
        if "layout-ok:" in line:
            continue
        for f in findings(code):
            problems.append(f"{path}:{no}: {f}: {line.strip()}")
    return problems


def files():
    device = ["kernels/include/marrow/*.h", "kernels/gpu/*.cu", "kernels/cpu/*.cpp"]
    # The command's decoders (the docstring says why not all of it).
    cli = [f"crates/cli/src/{f}.rs" for f in ("decode/*", "trace/*", "trace_shared", "trace_stats", "trace_text", "pcie*")]
    crates = ("softnic", "driver", "mlx5", "roce", "transport", "pcie", "gcrb", "mmio", "layout", "interop")
    rust = [os.path.join("crates", c, "src", "**", "*.rs") for c in crates]
    found = [f for g in device + cli + rust for f in sorted(glob.glob(os.path.join(ROOT, g), recursive=True))]
    tests = test_module_paths([Path(f) for f in found])
    return [f for f in found if f"{os.sep}generated{os.sep}" not in f and not is_test_module(Path(f), tests)]


SAMPLES_BAD = [
    "uint8_t op_own = (uint8_t)(tail >> 24);",
    "seg[1] = (uint64_t)x << 24;",
    "return self.dbrec.read_be32(0).unwrap_or(0) & 0x00ff_ffff;",
    "if (s == 0xffffffffu) return OK;",
    "let index = (key >> 8) as usize;",
    "uint8_t opcode = first[7] & 0x3f;",
    "uint64_t db = (uint64_t)be32(x) << 32;",
    "e->status = 0xffffffffu;",
    "0x3f => Self::Other,",
    "PM = 0x01, other_field,",
]
SAMPLES_GOOD = [
    "uint8_t op_own = tail_op_own(tail);",
    "const MAX_MSG: u64 = 1 << 31;",
    "if (x & 1) return;",
    "uint64_t lim = pages << MARROW_GCRB_WINDOW_PAGE_SHIFT;",
    "bool b = a && 0;",
    "let s = \"0xffff is fine in a message\";",
    "v = w >> 24; // layout-ok: the test vector's own encoding",
    "/* op_own = 0xf0 in a comment */ int x = y;",
    "return (uint8_t)(tail >> 8 * (MARROW_MLX5_CQE64_OP_OWN_OFF - CQE_TAIL_OFF));",
    "const FIRST_QPN: u32 = 0x100;",
    "let half = n >> 1;",
    "self.xchg(&64u32.to_be_bytes(), &mut b4, \"the cache line size\")?;",
    "        const SV = 0x0001;",
    "    PM = 0x01, \"Power Management\";",
    "        0x02 => \"I/O space\",",
]


def self_test() -> int:
    bad = [s for s in SAMPLES_BAD if not check_file("sample.h", s)]
    good = [s for s in SAMPLES_GOOD if check_file("sample.h", s)]
    for s in bad:
        print(f"check-layout-literals self-test: not flagged: {s}")
    for s in good:
        print(f"check-layout-literals self-test: flagged wrongly: {s}: {check_file('sample.h', s)}")
    if bad or good:
        return 1
    print(f"check-layout-literals self-test: {len(SAMPLES_BAD)} flagged, {len(SAMPLES_GOOD)} passed, as they should")
    return 0


def main() -> int:
    if "--self-test" in sys.argv[1:]:
        return self_test()
    problems, n = [], 0
    for f in files():
        n += 1
        with open(f, encoding="utf-8") as fh:
            problems += check_file(os.path.relpath(f, ROOT), fh.read())
    for p in problems:
        print(p)
    if problems:
        print(f"check-layout-literals: {len(problems)} layout numbers spelled by hand in {n} files: use the generated names")
        return 1
    print(f"check-layout-literals: {n} files, no layout number spelled by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
