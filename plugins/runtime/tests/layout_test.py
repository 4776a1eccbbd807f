#!/usr/bin/env python3
"""The runtime's stages include one another in one direction only: each folder of src/preload may
include only the folders its row of src/preload/README.md allows ("all of the above",
"everything" and "nothing of the runtime" mean what they say), but for a folder's stage rows
(<name>_stage.cpp, <name>_stages.cpp): they wire the stage to the lifecycle and the pipeline, so
they may use every folder, and have no header another file could include. Fails naming the file
and the include that breaks the rule, or a folder the README does not list; lifecycle.cpp, which
walks the stage table, includes no stage's header. Within and across folders,
no two modules (a name.hpp with its name.cpp) include each other, directly or around a loop."""
import os
import re
import sys

PRELOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "preload")


def allowed_by_readme():
    rows = []
    with open(os.path.join(PRELOAD, "README.md")) as readme:
        for line in readme:
            match = re.match(r"\| `(\w+)/` \| .* \| (.*) \|$", line.strip())
            if match:
                rows.append((match.group(1), match.group(2)))
    allowed, earlier = {}, []
    for folder, rule in rows:
        if rule == "nothing of the runtime":
            allowed[folder] = set()
        elif rule == "all of the above":
            allowed[folder] = set(earlier)
        elif rule == "everything":
            allowed[folder] = {name for name, _ in rows}
        else:
            allowed[folder] = {name.strip() for name in rule.split(",")}
        earlier.append(folder)
    return allowed


def module_loops():
    """Each loop of modules that include one another, as 'a -> b -> a' (Tarjan's components)."""
    graph = {}
    for folder in sorted(os.listdir(PRELOAD)):
        path = os.path.join(PRELOAD, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            module = f"{folder}/{os.path.splitext(name)[0]}"
            with open(os.path.join(path, name)) as source:
                for line in source:
                    match = re.match(r'#include "preload/(\w+/\w+)\.hpp"', line)
                    if match and match.group(1) != module:
                        graph.setdefault(module, set()).add(match.group(1))
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                loops.append(" -> ".join(sorted(component) + [min(component)]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return loops


def main():
    allowed = allowed_by_readme()
    problems = [f"modules include one another: {loop}" for loop in module_loops()]
    for folder in sorted(os.listdir(PRELOAD)):
        path = os.path.join(PRELOAD, folder)
        if not os.path.isdir(path):
            continue
        if folder not in allowed:
            problems.append(f"src/preload/{folder}/ is not in src/preload/README.md's table")
            continue
        for name in sorted(os.listdir(path)):
            stage_row = re.fullmatch(r"\w+_stages?\.(cpp|hpp)", name)
            if stage_row and stage_row.group(1) == "hpp":
                problems.append(f"src/preload/{folder}/{name}: a stage's row has no header (stages.cpp declares it)")
            with open(os.path.join(path, name)) as source:
                for number, line in enumerate(source, 1):
                    match = re.match(r'#include "preload/(\w+)/', line)
                    if stage_row or not match:
                        continue
                    if match.group(1) != folder and match.group(1) not in allowed[folder]:
                        problems.append(f"src/preload/{folder}/{name}:{number} includes "
                                        f"{match.group(1)}/, which {folder}/ may not use")
    # The lifecycle walks the stage table and names no stage: it includes only its own folder's
    # headers (no stage's row has one) and support's.
    with open(os.path.join(PRELOAD, "process", "lifecycle.cpp")) as source:
        for number, line in enumerate(source, 1):
            match = re.match(r'#include "preload/(\w+)/(\w+)\.hpp"', line)
            if match and (match.group(1) not in ("process", "support") or match.group(2) == "children"):
                problems.append(f"src/preload/process/lifecycle.cpp:{number} includes {match.group(1)}/"
                                f"{match.group(2)}.hpp: lifecycle names no stage (process/stages.hpp)")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"checked {len(allowed)} stages: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
