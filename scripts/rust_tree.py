"""What the repository's checkers share about a Rust source tree.

A test module may live in a file of its own, declared by its parent as
`#[cfg(test)] mod tests;`. The checkers leave such files out, as they
leave out the code after an inline `#[cfg(test)]`.
"""

from __future__ import annotations

import re
from pathlib import Path

# `#[cfg(test)] mod NAME;` (any visibility): a test module in a file of its own.
TEST_MOD_DECL = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s*)?mod\s+(\w+)\s*;")
ROOT_FILES = {"lib.rs", "main.rs", "mod.rs"}


def test_module_paths(files: list[Path]) -> set[Path]:
    """The files and folders that hold the test modules `files` declare
    out of line: `NAME.rs` and `NAME/` beside a `mod.rs`, `lib.rs` or
    `main.rs`, or in the folder named after any other file."""
    found = set()
    for f in files:
        if f.suffix != ".rs":
            continue
        folder = f.parent if f.name in ROOT_FILES else f.with_suffix("")
        for name in TEST_MOD_DECL.findall(f.read_text(encoding="utf-8")):
            found |= {folder / f"{name}.rs", folder / name}
    return found


def is_test_module(f: Path, tests: set[Path]) -> bool:
    """Whether `f` is, or lies under, one of `tests` (from test_module_paths)."""
    return any(f == t or t in f.parents for t in tests)
