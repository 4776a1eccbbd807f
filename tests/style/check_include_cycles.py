#!/usr/bin/env python3
"""No two of the project's files include each other, directly or through others (STYLE.md: "files
that include each other in circles" are what we grew out of). Reads every tracked C and C++ source's
#include lines, resolves those naming a file of the project (<kairos/...> through the include
folders, "..." from the file's folder or a source root), and fails naming each cycle as the chain of
files that closes it.

Usage: check_include_cycles.py SOURCE_DIR"""
import os
import re
import subprocess
import sys

SOURCE_DIR = os.path.abspath(sys.argv[1])
SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cu", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def tracked():
    listed = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0:
        return [name for name in listed.stdout.decode().split("\0") if name]
    names = []
    for folder, subfolders, files in os.walk(SOURCE_DIR):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "build"))]
        names += [os.path.relpath(os.path.join(folder, f), SOURCE_DIR) for f in files]
    return names


def main():
    sources = sorted(name for name in tracked() if name.endswith(SUFFIXES))
    known = set(sources)
    # Where an include may be found: the include folders, and each plugin's src (the runtime's
    # "preload/..." includes are relative to it).
    roots = sorted({name.split("/include/")[0] + "/include" for name in sources if "/include/" in name} |
                   {name.split("/src/")[0] + "/src" for name in sources if "/src/" in name} | {"include"})

    def resolve(including, written, quoted):
        candidates = [os.path.normpath(os.path.join(os.path.dirname(including), written))] if quoted else []
        candidates += [os.path.normpath(os.path.join(root, written)) for root in roots]
        return next((candidate for candidate in candidates if candidate in known), None)

    graph = {}
    for name in sources:
        with open(os.path.join(SOURCE_DIR, name), encoding="utf-8", errors="replace") as file:
            text = file.read()
        graph[name] = sorted({target for kind, written in INCLUDE.findall(text)
                              if (target := resolve(name, written, kind == '"')) and target != name})

    cycles = []
    state = {}  # name -> 1 on the current path, 2 done
    path = []

    def visit(name):
        state[name] = 1
        path.append(name)
        for target in graph.get(name, []):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    sys.setrecursionlimit(10000)
    for name in sources:
        if name not in state:
            visit(name)
    for cycle in cycles:
        print("include cycle: " + " -> ".join(cycle), file=sys.stderr)
    print(f"checked the includes of {len(sources)} sources: {len(cycles)} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
