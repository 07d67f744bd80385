#!/usr/bin/env python3
"""Fails on any #include in lib/ that points up or sideways between layers.

The layers of lib/ (docs/architecture.md, "Layers"), lowest first. A file may include
files of its own directory and of lower layers; directories on one level (rc, ud, raw)
are siblings and do not include each other. lib/'s top-level files are the bottom
layer: every layer may use them and they use no layer. Public headers
(<asio_rdma/...>) are everyone's.

Prints each offending line as file:line: text, and exits 1 if there is one.
It is the CTest test check_layers (label unit), so scripts/test.sh's unit stage runs it.
"""
import pathlib
import re
import sys

LAYERS = {
    "": 0,  # lib/*.hpp, lib/*.cpp: error codes, aliases, tracing
    "verbs": 1,
    "async": 2,
    "cm": 3,
    "rc": 4,
    "ud": 4,
    "raw": 4,
    "file_transfer": 5,
    "stream": 5,
    "rpc": 6,
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(relative: pathlib.PurePath) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else ""


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    lib = root / "lib"
    bad = 0
    for path in sorted(lib.rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".h"):
            continue
        own = layer_of(path.relative_to(lib))
        for number, text in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(text)
            if not match:
                continue
            target = pathlib.PurePath(match.group(1))
            if not (lib / target).exists():
                target = pathlib.PurePath(path.parent.relative_to(lib), target)
                if not (lib / target).exists():
                    continue  # not a file of lib/ (a generated or test header)
            other = layer_of(target)
            if other == own:
                continue
            if LAYERS[other] < LAYERS[own]:
                continue
            kind = "up" if LAYERS[other] > LAYERS[own] else "sideways"
            print(f"{path.relative_to(root)}:{number}: includes {kind} into lib/{other or '.'}: "
                  f"{text.strip()}")
            bad += 1
    if bad:
        print(f"check_layers: {bad} include(s) against the layers of docs/architecture.md")
        return 1
    print("check_layers: every include in lib/ points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
