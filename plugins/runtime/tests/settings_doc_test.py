#!/usr/bin/env python3
"""docs/settings.md's tables are the registry's: each table `kairos-avail --markdown` prints (what
a bad value of each category does; every setting with its default) stands in the document as it
is printed, row for row, with no row more. Fails with a diff and the command that prints them.
Usage: settings_doc_test.py KAIROS_AVAIL DOCS_SETTINGS_MD"""
import difflib
import os
import subprocess
import sys


def tables(text):
    """The runs of consecutive lines starting with '|', as lists of lines."""
    found, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


def main():
    avail, document_path = sys.argv[1], sys.argv[2]
    # Defaults only: no KAIROS_ variable of this environment may reach the tables.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
    printed = subprocess.run([avail, "--markdown"], check=True, capture_output=True, text=True,
                             env=environment).stdout
    with open(document_path) as document:
        documented = tables(document.read())
    problems = []
    for table in tables(printed):
        header = table[0]
        matches = [t for t in documented if t[0] == header]
        if len(matches) != 1:
            problems.append(f"{document_path} has {len(matches)} tables headed {header!r}; expected 1")
            continue
        if matches[0] != table:
            problems.append(f"{document_path}'s table headed {header!r} differs from the registry:\n" +
                            "\n".join(difflib.unified_diff(matches[0], table, "document", "kairos-avail",
                                                           lineterm="")))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("the tables are printed by: kairos-avail --markdown", file=sys.stderr)
    print(f"checked {len(tables(printed))} tables: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
