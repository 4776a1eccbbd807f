#!/usr/bin/env python3
"""The runtime's stages include one another in one direction only: each folder of src/preload may
include only the folders its row of src/preload/README.md allows ("all of the above",
"everything" and "nothing of the runtime" mean what they say). Fails naming the file and the
include that breaks the rule, or a folder the README does not list."""
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


def main():
    allowed = allowed_by_readme()
    problems = []
    for folder in sorted(os.listdir(PRELOAD)):
        path = os.path.join(PRELOAD, folder)
        if not os.path.isdir(path):
            continue
        if folder not in allowed:
            problems.append(f"src/preload/{folder}/ is not in src/preload/README.md's table")
            continue
        for name in sorted(os.listdir(path)):
            with open(os.path.join(path, name)) as source:
                for number, line in enumerate(source, 1):
                    match = re.match(r'#include "preload/(\w+)/', line)
                    if match and match.group(1) != folder and match.group(1) not in allowed[folder]:
                        problems.append(f"src/preload/{folder}/{name}:{number} includes "
                                        f"{match.group(1)}/, which {folder}/ may not use")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"checked {len(allowed)} stages: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
