#!/usr/bin/env python3
"""No module of a crate imports another in a circle.

For every crate under crates/ (and xtask/), each top-level module of its
`src/` (a file `src/NAME.rs` or a directory `src/NAME/`) is a node; a path
`crate::OTHER...` in its code (a `use` or an inline path, comments and
`#[cfg(test)]` modules left out) is an edge to OTHER. The crate root
(`lib.rs`, `main.rs`) declares the modules and is not a node. Modules that
reach each other through such edges are reported with one path that closes
the circle, and the check fails.

Why: a module that only the modules above it use can be read, tested and
changed alone; two that import each other are one module in two files.

    python3 scripts/check-module-cycles.py            # the repository
    python3 scripts/check-module-cycles.py --self-test
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOT_FILES = {"lib.rs", "main.rs"}
PATH = re.compile(r"\bcrate::(?:\{([^}]*)\}|([a-z_][a-z0-9_]*))")


def code_of(text: str) -> str:
    """The text without comments and without `#[cfg(test)]` modules."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line.split("//", 1)[0] for line in text.split("\n"))
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{", text)
    return text[: cut.start()] if cut else text


def modules_of(src: Path) -> dict[str, list[Path]]:
    """Top-level module name -> its files."""
    mods: dict[str, list[Path]] = defaultdict(list)
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src)
        if len(rel.parts) == 1 and rel.name in ROOT_FILES:
            continue
        if rel.parts[0] == "bin":
            continue
        name = rel.parts[0][:-3] if len(rel.parts) == 1 else rel.parts[0]
        mods[name].append(f)
    return mods


def edges_of(src: Path) -> dict[str, dict[str, tuple[Path, int]]]:
    """module -> {module it names -> (file, line) of the first such path}."""
    mods = modules_of(src)
    graph: dict[str, dict[str, tuple[Path, int]]] = {m: {} for m in mods}
    for m, files in mods.items():
        for f in files:
            code = code_of(f.read_text(encoding="utf-8"))
            for hit in PATH.finditer(code):
                group, single = hit.groups()
                names = [single] if single else [p.strip().split("::")[0] for p in group.split(",")]
                for n in names:
                    if n in mods and n != m and n not in graph[m]:
                        graph[m][n] = (f, code.count("\n", 0, hit.start()) + 1)
    return graph


def cycles(graph: dict[str, dict[str, tuple[Path, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def circle(graph: dict[str, dict[str, tuple[Path, int]]], comp: list[str]) -> list[str]:
    """One path from comp[0] back to itself inside the component."""
    start, inside = comp[0], set(comp)
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w in inside and w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def check(crates: list[Path]) -> list[str]:
    problems = []
    for src in crates:
        graph = edges_of(src)
        for comp in cycles(graph):
            path = circle(graph, comp)
            steps = []
            for a, b in zip(path, path[1:]):
                f, line = graph[a][b]
                steps.append(f"{a} -> {b} ({f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}:{line})")
            problems.append(f"{src.parent.name}: {', '.join(comp)} import each other: " + "; ".join(steps))
    return problems


def self_test() -> None:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "demo" / "src"
        (src / "b").mkdir(parents=True)
        (src / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\n")
        (src / "a.rs").write_text("use crate::b::Thing;\n// crate::c is named only here\n")
        (src / "b" / "mod.rs").write_text("mod inner;\n")
        (src / "b" / "inner.rs").write_text("use crate::{c::More, a};\n")
        (src / "c.rs").write_text("pub struct More;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n")
        found = check([src])
        assert len(found) == 1 and "a, b import each other" in found[0], found
        assert "a -> b" in found[0] and "b -> a" in found[0], found
        (src / "b" / "inner.rs").write_text("use crate::c::More;\n")
        assert check([src]) == [], check([src])
    print("check-module-cycles self-test: a circle through a directory module and a grouped use is found;"
          " comments and test modules are not edges")


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    crates = sorted(p / "src" for p in [*(ROOT / "crates").iterdir(), ROOT / "xtask"] if (p / "src").is_dir())
    problems = check(crates)
    for p in problems:
        print(p)
    print(f"check-module-cycles: {len(crates)} crates, {len(problems)} circles")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
