#!/usr/bin/env python3
"""No module of a crate imports another in a circle.

Every crate of the repository (each Cargo.toml beside a `src/`, outside
target/) is read as a tree of modules: `src/a.rs` and `src/a/mod.rs` hold
module `a`, `src/a/b.rs` holds `a::b`. A path in a module's code (a `use`,
an inline `crate::`, `super::` or `self::` path, or a `use` of a child by
its name; comments and `#[cfg(test)]` modules, inline or in files of
their own, left out) that names another module is an edge between the
two children of their nearest common ancestor that hold them: `a::x` naming `b` links `a` and `b` at the crate's
top level, `a::x` naming `a::y` links `x` and `y` inside `a`. A child that
names its parent, or a parent its child, links nothing. Siblings that reach
each other through such edges are reported with one path that closes the
circle, and the check fails.

Why: a module that only the modules above it use can be read, tested and
changed alone; two that import each other are one module in two files.

    python3 scripts/check-module-cycles.py            # the repository
    python3 scripts/check-module-cycles.py --self-test
"""


from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rust_tree import is_test_module, test_module_paths

ROOT = Path(__file__).resolve().parent.parent


def code_of(text: str) -> str:
    """The text without comments and without `#[cfg(test)]` modules."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line.split("//", 1)[0] for line in text.split("\n"))
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{", text)
    return text[: cut.start()] if cut else text


def module_of(src: Path, f: Path) -> tuple[str, ...]:
    """The module path a file holds: src/a.rs and src/a/mod.rs are (a,)."""
    parts = f.relative_to(src).with_suffix("").parts
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def resolve(here: tuple[str, ...], path: list[str], known: set[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The module a path names (its longest known module prefix), read from module `here`."""
    if path[0] == "crate":
        base, rest = (), path[1:]
    elif path[0] in ("super", "self"):
        base, rest = here, path
        while rest and rest[0] in ("super", "self"):
            base = base[:-1] if rest[0] == "super" else base
            rest = rest[1:]
    elif here + (path[0],) in known:
        base, rest = here, path
    else:
        return None
    target = base
    for seg in rest:
        if target + (seg,) not in known:
            break
        target = target + (seg,)
    return target


USE_OR_PATH = re.compile(r"\b(?:crate|super|self)(?:::\w+)*(?:::\{[^;]*?\})?|\buse\s+[a-z_]\w*(?:::\w+)*(?:::\{[^;]*?\})?")


def paths_in(code: str):
    """Each path in `code` (groups expanded), with its line."""
    for hit in USE_OR_PATH.finditer(code):
        text = re.sub(r"^use\s+", "", hit.group(0))
        line = code.count("\n", 0, hit.start()) + 1
        head, _, group = text.partition("::{")
        prefix = [p for p in head.split("::") if p]
        if group:
            for item in group.rstrip("}").split(","):
                item = item.strip().split(" as ")[0]
                if item and item != "*":
                    yield prefix + [p for p in re.split(r"::\{?", item) if p and p != "self"], line
        yield prefix, line


def edges_of(src: Path) -> dict[tuple[str, ...], dict[str, dict[str, tuple[Path, int]]]]:
    """For each module with children: child -> {sibling it names -> (file, line)}.

    A path from module A to module B is an edge between the two children of
    their nearest common ancestor that hold them."""
    files = [f for f in sorted(src.rglob("*.rs")) if f.relative_to(src).parts[0] != "bin"]
    tests = test_module_paths(files)
    files = [f for f in files if not is_test_module(f, tests)]
    known = {module_of(src, f) for f in files}
    graphs: dict[tuple[str, ...], dict[str, dict[str, tuple[Path, int]]]] = defaultdict(dict)
    for m in known:
        if m:
            graphs[m[:-1]].setdefault(m[-1], {})
    for f in files:
        here = module_of(src, f)
        for path, line in paths_in(code_of(f.read_text(encoding="utf-8"))):
            there = resolve(here, path, known)
            if there is None:
                continue
            n = 0
            while n < min(len(here), len(there)) and here[n] == there[n]:
                n += 1
            if n < len(here) and n < len(there):
                a, b = here[n], there[n]
                graphs[here[:n]][a].setdefault(b, (f, line))
    return graphs


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
                return path[::-1] + [start]
            if w in inside and w not in prev:
                prev[w] = v
                todo.append(w)
    raise AssertionError(f"{comp}: a strongly connected component has a circle through each member")


def check(crates: list[Path]) -> list[str]:
    problems = []
    for src in crates:
        for parent, graph in sorted(edges_of(src).items()):
            where = src.parent.name + "".join(f"::{p}" for p in parent)
            for comp in cycles(graph):
                path = circle(graph, comp)
                steps = []
                for a, b in zip(path, path[1:]):
                    f, line = graph[a][b]
                    steps.append(f"{a} -> {b} ({f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}:{line})")
                problems.append(f"{where}: {', '.join(comp)} import each other: " + "; ".join(steps))
    return problems


def self_test() -> None:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "demo" / "src"
        (src / "b").mkdir(parents=True)
        (src / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\n")
        (src / "a.rs").write_text("use crate::b::Thing;\n// crate::c is named only here\n")
        (src / "b" / "mod.rs").write_text("mod inner;\nmod other;\nuse inner::X;\n")
        (src / "b" / "inner.rs").write_text("use crate::{c::More, a};\nuse super::Y;\n")
        (src / "b" / "other.rs").write_text("fn f() { super::inner::g(); }\n")
        (src / "c.rs").write_text("pub struct More;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n")
        found = check([src])
        assert len(found) == 1 and "demo: a, b import each other" in found[0], found
        assert "a -> b" in found[0] and "b -> a" in found[0], found
        # Siblings inside a directory module, through `super::`.
        (src / "b" / "inner.rs").write_text("use crate::c::More;\nuse super::other::Z;\n")
        found = check([src])
        assert len(found) == 1 and "demo::b: inner, other import each other" in found[0], found
        # A child that uses its parent, and a parent that uses its child, are no circle.
        (src / "b" / "other.rs").write_text("use super::Y;\n")
        assert check([src]) == [], check([src])
        # Nor is a test module in a file of its own that names a module which names its parent.
        (src / "b" / "mod.rs").write_text("mod inner;\nmod other;\nuse inner::X;\n#[cfg(test)]\nmod tests;\n")
        (src / "b" / "tests.rs").write_text("use crate::a;\n")
        assert check([src]) == [], check([src])
    print("check-module-cycles self-test: circles between top-level modules (a directory module, a grouped use)"
          " and between siblings (super::) are found; comments, test modules and parent-child paths are not edges")


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    crates = []
    for d, subdirs, names in os.walk(ROOT):
        subdirs[:] = [s for s in subdirs if s not in ("target", ".git") and not s.startswith(".")]
        if "Cargo.toml" in names and (Path(d) / "src").is_dir():
            crates.append(Path(d) / "src")
    crates.sort()
    problems = check(crates)
    for p in problems:
        print(p)
    print(f"check-module-cycles: {len(crates)} crates, {len(problems)} circles")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
