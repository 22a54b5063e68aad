#!/usr/bin/env python3
"""Every repository path that the tracked text files name must exist.

Looks for paths that start with one of the repository's top-level folders
(`crates/`, `docs/`, `hw-specs/`, `kernels/`, `kmod/`, `scripts/`, `tests/`,
`xtask/`, `fuzz/`, `examples/`) in every tracked source and document, and
fails naming each one that neither exists nor matches as a glob. Paths under
`target/` (build output) are not checked. Also fails on any mention of the
development notes outside the repository (`../shared`, `DESIGN.md`,
`reference/*.md`), which a reader of the repository cannot open.
"""
import glob
import os
import re
import subprocess
import sys

TOPS = ("crates", "docs", "hw-specs", "kernels", "kmod", "scripts", "tests", "xtask", "fuzz", "examples")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./*{}-]*[\w*}])" % "|".join(TOPS))
OUTSIDE = re.compile(r"\.\./shared|\bDESIGN\.md|(?<![\w/])reference/[\w-]+\.md")
TEXT = (".rs", ".md", ".h", ".cuh", ".cu", ".cpp", ".c", ".py", ".sh", ".toml", ".txt")


# Paths in other projects' trees that our files cite, with the project.
EXTERNAL = {
    "tests/mlx5_prm_structs.py": "rdma-core",
    "scripts/config": "Linux",
    "scripts/min-tool-version.sh": "Linux",
    "docs/specs/ivshmem-spec.rst": "QEMU",
    "docs/nvshmem.md": "DeepEP",
}


def exists(p: str, where: str) -> bool:
    """`p` as named in file `where`: from the root, or from any folder above the file."""
    p = p.rstrip(".")
    if p in EXTERNAL:
        return True
    dirs = [""]
    d = os.path.dirname(where)
    while d:
        dirs.append(d)
        d = os.path.dirname(d)
    return any(os.path.exists(os.path.join(b, p)) or glob.glob(os.path.join(b, p)) for b in dirs)


def main() -> int:
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True)
    os.chdir(root.stdout.strip())
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    bad = []
    for f in files:
        if not f.endswith(TEXT) or f.startswith(("docs/runs/", "tests/fixtures/")) or f == "scripts/check-paths.py":
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in PATH.finditer(line):
                if "{" not in m.group(1) and not exists(m.group(1), f):
                    bad.append(f"{f}:{n}: {m.group(1)} does not exist")
            for m in OUTSIDE.finditer(line):
                bad.append(f"{f}:{n}: {m.group(0)} is outside the repository")
    for b in bad:
        print(b)
    print(f"check-paths: {len(files)} files, {len(bad)} broken references")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
