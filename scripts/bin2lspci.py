#!/usr/bin/env python3
"""Write raw config-space binaries (sysfs `config` files) as `lspci -xxxx` text,
which `lspci -F FILE` and `marrow decode --pcie` both read.

usage: bin2lspci.py BDF=PATH [BDF=PATH ...] > dump.txt
"""
import sys


def dump(bdf: str, data: bytes) -> str:
    lines = [f"{bdf} Device"]
    for off in range(0, len(data), 16):
        width = 2 if off < 0x100 else 3
        row = " ".join(f"{b:02x}" for b in data[off:off + 16])
        lines.append(f"{off:0{width}x}: {row}")
    return "\n".join(lines) + "\n"


def main(args: list[str]) -> int:
    if not args:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for arg in args:
        bdf, sep, path = arg.partition("=")
        if not sep:
            print(f"error: {arg!r} is not BDF=PATH", file=sys.stderr)
            return 2
        with open(path, "rb") as f:
            print(dump(bdf, f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
