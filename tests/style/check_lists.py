#!/usr/bin/env python3
"""The lists typed by hand agree with the tables they copy; no metadata key is spelt twice.

Each guard below names one list a person typed (in the docs, mostly: the tools, the Python package
and the benchmarks generate theirs from the tables) and the table it must match; a guard whose list
is no longer found fails too, so that a guard never rots into checking nothing. The tables:
- formats: plugins/database/include/kairos/plugins/database/formats.hpp's rows and
  default_exit_formats;
- settings: plugins/runtime/src/common/setting_definitions.cpp's variables;
- output path keys: the parser's own list (output_path.cpp's simple_keys), which
  accepted_path_keys(), KAIROS_OUTPUT_PATH's description, docs/settings.md and docs/tools.md repeat;
- metadata keys: plugins/database/include/kairos/plugins/database/metadata_keys.hpp. Each is named
  in the docs (docs/database.md lists them). Outside it, no
  product source (everything but tests, benchmarks, fuzz and examples) may spell a key: as a whole
  string literal where the key holds a '.' (unmistakable), or on a line that handles metadata
  (names `metadata` or compares `key` in SQL) for any key.

Usage: check_lists.py SOURCE_DIR. Fails naming each list and how it differs."""
import os
import re
import subprocess
import sys

SOURCE_DIR = os.path.abspath(sys.argv[1])
FORMATS_HPP = "plugins/database/include/kairos/plugins/database/formats.hpp"
METADATA_KEYS_HPP = "plugins/database/include/kairos/plugins/database/metadata_keys.hpp"
SETTINGS_CPP = "plugins/runtime/src/common/setting_definitions.cpp"
OUTPUT_PATH_CPP = "plugins/runtime/src/common/output_path.cpp"


problems = []


def read(path):
    with open(os.path.join(SOURCE_DIR, path), encoding="utf-8") as file:
        return file.read()


def tracked_files():
    listed = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0:
        return sorted(name for name in listed.stdout.decode().split("\0") if name)
    names = []
    for folder, subfolders, files in os.walk(SOURCE_DIR):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "build"))]
        names += [os.path.relpath(os.path.join(folder, f), SOURCE_DIR) for f in files]
    return sorted(names)


def format_table():
    text = read(FORMATS_HPP)
    rows = []
    for row in re.finditer(r"\{\.id = format_id::\w+,(.*?)\}", text, re.S):
        fields = dict(re.findall(r"\.(\w+) = (\"[^\"]*\"|true|false)", row.group(1)))
        rows.append({"name": fields["name"].strip('"'), "at_exit": fields["at_exit"] == "true",
                     "from_database": fields["from_database"] == "true"})
    enumerators = re.search(r"default_exit_formats\{(.*?)\}", text, re.S).group(1)
    ids = re.findall(r"format_id::(\w+)", enumerators)
    by_id = {re.search(r"format_id::(\w+)", m.group(0)).group(1): r["name"]
             for m, r in zip(re.finditer(r"\{\.id = format_id::\w+,", text), rows)}
    if not rows or not ids:
        problems.append(f"{FORMATS_HPP}: no rows or no default_exit_formats found (the parser here is stale)")
    return rows, [by_id[i] for i in ids]


def find_list(path, pattern, what):
    """The first match's group 1 of `pattern` in `path`, or None with a problem said."""
    match = re.search(pattern, read(path), re.M)
    if match is None:
        problems.append(f"{path}: {what} not found (pattern {pattern!r}): update the guard in "
                        f"tests/style/check_lists.py with the list")
        return None
    return match.group(1)


def same(path, what, got, expected, ordered):
    if (got if ordered else sorted(got)) != (expected if ordered else sorted(expected)):
        missing = [name for name in expected if name not in got]
        extra = [name for name in got if name not in expected]
        problems.append(f"{path}: {what} lists {got}; its table says {expected}"
                        f" (missing {missing}, not in the table {extra})")


def check_format_lists():
    rows, defaults = format_table()
    at_exit = [row["name"] for row in rows if row["at_exit"]]
    from_database = [row["name"] for row in rows if row["from_database"]]
    # kairos-report's synopsis, in the table's order (the order its help prints).
    for path in ("docs/tools.md", "docs/runtime.md"):
        listed = find_list(path, r"kairos-report DB\.\.\. \[(?:-f\|)?--format ([a-z|-]+)\]",
                           "kairos-report's synopsis")
        if listed is not None:
            same(path, "kairos-report's --format", listed.split("|"), from_database, True)
    # kairos-run's --formats: every format written at exit, the default first.
    listed = find_list("docs/tools.md", r"^\| `--formats LIST` \| `KAIROS_OUTPUT_FORMATS` \| (.*) \|$",
                       "kairos-run's --formats row")
    if listed is not None:
        default = re.match(r"`([a-z,-]+)` \(default\)", listed)
        same("docs/tools.md", "--formats' default", default.group(1).split(",") if default else [], defaults, True)
        same("docs/tools.md", "--formats", re.findall(r"`([a-z-]+)`", listed.replace(",", "`, `")), at_exit, False)
    listed = find_list("docs/runtime.md", r"^`KAIROS_OUTPUT_FORMATS`, default (`[^\n]*?)(?:\.|;|$)",
                       "KAIROS_OUTPUT_FORMATS' paragraph")
    if listed is not None:
        names = re.findall(r"`([a-z,-]+)`", listed)
        same("docs/runtime.md", "KAIROS_OUTPUT_FORMATS' default", names[0].split(",") if names else [], defaults,
             True)
        same("docs/runtime.md", "KAIROS_OUTPUT_FORMATS", ",".join(names).split(","), at_exit, False)
    # docs/outputs.md's table: a row for each format.
    documented = [line.split("|")[1].strip().strip("`") for line in read("docs/outputs.md").splitlines()
                  if line.startswith("| `")]
    missing = [row["name"] for row in rows if row["name"] not in documented]
    if missing:
        problems.append(f"docs/outputs.md: its table of formats lacks {missing}")


def check_setting_lists():
    variables = set(re.findall(r'\.variable = "(KAIROS_\w+)"', read(SETTINGS_CPP)))
    if not variables:
        problems.append(f"{SETTINGS_CPP}: no settings found (the parser here is stale)")
    # kairos-run's options table: the settings each option sets.
    table = find_list("docs/tools.md", r"^\| option \| sets \| meaning \|\n((?:\|.*\n)+)", "kairos-run's options table")
    if table is not None:
        named = re.findall(r"`(KAIROS_\w+)`", table)
        unknown = sorted(set(named) - variables)
        if unknown or not named:
            problems.append(f"docs/tools.md: kairos-run's options table names {unknown or 'no'} setting "
                            f"not in {SETTINGS_CPP}")
    # The output path's keys: the parser's own list (output_path.cpp's simple_keys, and %env{NAME}%)
    # against the list it gives in messages, the setting's description, and the docs.
    text = read(OUTPUT_PATH_CPP)
    parsed = re.search(r"simple_keys\{([^}]*)\}", text)
    keys = re.search(r'accepted_path_keys\(\) \{\s*return "([^"]*)"', text)
    if parsed and keys:
        simple = [f"%{key}%" for key in re.findall(r'"(\w+)"', parsed.group(1))] + ["%env{NAME}%"]
        same(OUTPUT_PATH_CPP, "accepted_path_keys()", keys.group(1).split(", "), simple, True)
        described = re.search(r'\.variable = "KAIROS_OUTPUT_PATH",.*?\.description =((?:\s*"[^"]*")+)', read(SETTINGS_CPP),
                              re.S)
        description = "".join(re.findall(r'"([^"]*)"', described.group(1))) if described else ""
        listed = re.search(r"keys ((?:%[\w{}]+% ?)+)", description)
        if listed is None:
            problems.append(f"{SETTINGS_CPP}: KAIROS_OUTPUT_PATH's description lists no keys (the guard is stale)")
        else:
            same(SETTINGS_CPP, "KAIROS_OUTPUT_PATH's description", listed.group(1).split(), simple, True)
        documented = find_list("docs/settings.md", r"^path is taken from the working directory at start\. Keys: ([\s\S]*?) Any other `%key%`",
                               "the output path keys' paragraph")
        if documented is not None:
            same("docs/settings.md", "the output path keys' paragraph",
                 re.findall(r"`(%[\w{}]+%)`", documented.replace("\n", " ")), simple, True)
    listed = find_list("docs/tools.md", r"^\| `-o, --output STEM` \| `KAIROS_OUTPUT_PATH` \| output file stem; keys `([^`]*)`",
                       "kairos-run's -o row")
    if keys is None:
        problems.append(f"{OUTPUT_PATH_CPP}: accepted_path_keys() not found (the parser here is stale)")
    elif listed is not None:
        same("docs/tools.md", "-o's keys", listed.split(), keys.group(1).split(", "), True)


def check_metadata_documented():
    """Every metadata key is named, in backticks, in the docs (docs/database.md lists them; a
    stage's own page may explain its keys); the settings' keys as `setting.KAIROS_*`."""
    keys = re.findall(r'inline constexpr std::string_view \w+ = "([^"]+)";', read(METADATA_KEYS_HPP))
    text = ""
    for folder, _, files in os.walk(os.path.join(SOURCE_DIR, "docs")):
        for name in files:
            if name.endswith(".md") and not name.startswith("performance"):
                with open(os.path.join(folder, name), encoding="utf-8") as file:
                    text += file.read()
    undocumented = [key for key in keys if not key.startswith("setting.") and f"`{key}`" not in text]
    if "`setting.KAIROS_*`" not in text:
        undocumented.append("setting.KAIROS_*")
    if undocumented:
        problems.append(f"docs/database.md: the metadata keys {undocumented} of {METADATA_KEYS_HPP} are "
                        "named in no page of docs/")


def product_sources():
    excluded = ("tests/", "benchmarks/", "examples/")
    for name in tracked_files():
        if not name.endswith((".cpp", ".hpp", ".h", ".c", ".cu")) or name.startswith(excluded):
            continue
        if "/tests/" in name or "/fuzz/" in name or "/examples/" in name:
            continue
        yield name


def check_metadata_literals():
    keys = re.findall(r'inline constexpr std::string_view \w+ = "([^"]+)";', read(METADATA_KEYS_HPP))
    if not keys:
        problems.append(f"{METADATA_KEYS_HPP}: no keys found (the parser here is stale)")
        return
    literal = re.compile(r"""["']([^"'\s]+)["']""")
    handles_metadata = re.compile(r"metadata|\bkey\s*(=(?!=)|<>|IN\b)")
    spelt = {}
    for name in product_sources():
        if name == METADATA_KEYS_HPP:
            continue
        for number, line in enumerate(read(name).splitlines(), 1):
            if line.lstrip().startswith("//"):
                continue
            for found in literal.findall(line):
                if found in keys and ("." in found or handles_metadata.search(line)):
                    spelt.setdefault(name, []).append(f"{name}:{number}: \"{found}\"")
    for name, lines in sorted(spelt.items()):
        for line in lines:
            problems.append(f"{line}: a metadata key spelt outside {METADATA_KEYS_HPP}: use metadata_key::")


def main():
    check_format_lists()
    check_setting_lists()
    check_metadata_literals()
    check_metadata_documented()
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"lists checked: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
