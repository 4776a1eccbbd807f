#!/usr/bin/env python3
"""Every output kairos-report writes, byte for byte, against the golden files under
plugins/database/tests/golden/: the fixed profiles of kairos_golden_profile (golden_profile.cpp)
rendered in every format of formats.hpp's table that is written from a database, whole, restricted
to time windows, per MPI rank, and the Chrome trace cut at its size limit. A change to a writer
that changes a byte fails here with a diff; a change meant to change an output writes the files
again (KAIROS_UPDATE_GOLDEN=1, then review the diff in git).

Normalised before comparing, and nothing else:
  - "kairos <X.Y.Z>", the writer's version, which the HTML page and the speedscope file name:
    written as "kairos <version>", so that a release does not change every golden file;
  - the directory the databases were written to, which the capped Chrome trace names (where the
    Perfetto trace beside its database is): written as "<dir>".

Run one test: golden_outputs_tests.py NAME (ctest does). Needs KAIROS_REPORT,
KAIROS_GOLDEN_PROFILE and KAIROS_VERSION in the environment.
"""
import difflib
import os
import re
import sys

from harness import check, run_named_test, run_process

KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
GENERATOR = os.environ.get("KAIROS_GOLDEN_PROFILE", "")
VERSION = os.environ.get("KAIROS_VERSION", "")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GOLDEN = os.path.join(SOURCE, "plugins", "database", "tests", "golden")
FORMATS_HEADER = os.path.join(SOURCE, "plugins", "database", "include", "kairos", "plugins", "database",
                              "formats.hpp")
UPDATE = os.environ.get("KAIROS_UPDATE_GOLDEN") == "1"
DIFF_LINES_SHOWN = 120


def database_formats():
    """(name, extension) of each row of formats.hpp's table written from a database, in its order:
    the golden files cover the table, however it grows."""
    with open(FORMATS_HEADER) as header:
        text = header.read()
    rows = re.findall(r'\.name = "([^"]+)",\s*\.extension = "([^"]*)".*?\.from_database = (true|false)', text,
                      re.DOTALL)
    check(len(rows) > 5, f"found {len(rows)} rows in {FORMATS_HEADER}: its layout changed; update this script")
    return [(name, extension) for name, extension, from_database in rows if from_database == "true"]


def generate(directory):
    result = run_process([GENERATOR, directory], 60)
    check(result.returncode == 0, f"kairos_golden_profile failed: {result.stderr.decode(errors='replace')}")


def normalised(data, directory):
    if VERSION:
        data = data.replace(f"kairos {VERSION}".encode(), b"kairos <version>")
    return data.replace(directory.encode(), b"<dir>")


def differences(name, expected, actual):
    """A unified diff of two texts, or for binary files the first differing offset with the bytes
    around it in hex."""
    try:
        expected_lines = expected.decode().splitlines(keepends=True)
        actual_lines = actual.decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        offset = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
        start = max(0, offset - 16)
        return (f"{name}: {len(expected)} bytes expected, {len(actual)} written; first difference at byte {offset}\n"
                f"  expected {expected[start:offset + 32].hex(' ')}\n  written  {actual[start:offset + 32].hex(' ')}")
    diff = list(difflib.unified_diff(expected_lines, actual_lines, f"golden/{name}", f"written {name}", n=2))
    shown = "".join(diff[:DIFF_LINES_SHOWN])
    if len(diff) > DIFF_LINES_SHOWN:
        shown += f"... {len(diff) - DIFF_LINES_SHOWN} more diff lines\n"
    return shown


def render_and_compare(directory, database, renders):
    """Each (golden file name, format, extra kairos-report arguments) of `renders` from `database`;
    fails naming every file that differs, with its diff."""
    failures = []
    for name, output_format, arguments in renders:
        output = os.path.join(directory, name)
        command = [KAIROS_REPORT, "-f", output_format, "-o", output, *arguments, os.path.join(directory, database)]
        result = run_process(command, 60)
        check(result.returncode == 0,
              f"{' '.join(command)}: status {result.returncode}, {result.stderr.decode(errors='replace')}")
        with open(output, "rb") as file:
            actual = normalised(file.read(), directory)
        golden = os.path.join(GOLDEN, name)
        if UPDATE:
            with open(golden, "wb") as file:
                file.write(actual)
            print(f"wrote {golden}")
            continue
        if not os.path.exists(golden):
            failures.append(f"{name}: no golden file {golden} (KAIROS_UPDATE_GOLDEN=1 writes it)")
            continue
        with open(golden, "rb") as file:
            expected = file.read()
        if expected != actual:
            failures.append(differences(name, expected, actual))
        else:
            print(f"{name}: {len(actual)} bytes, unchanged")
    check(not failures, "outputs differ from their golden files:\n" + "\n".join(failures))


def test_single_process_outputs_are_unchanged(directory):
    generate(directory)
    renders = [(f"single{extension}", name, []) for name, extension in database_formats()]
    renders.append(("single-compare-windows.txt", "text", ["--compare-windows"]))
    render_and_compare(directory, "single.db", renders)


def test_window_restricted_outputs_are_unchanged(directory):
    generate(directory)
    renders = [(f"single-window-2{extension}", name, ["-w", "2"]) for name, extension in database_formats()
               if name not in ("coz", "causal-svg")]
    renders.append(("single-windows-1-3.txt", "text", ["-w", "1..3"]))
    render_and_compare(directory, "single.db", renders)


def test_ranked_outputs_are_unchanged(directory):
    generate(directory)
    renders = [(f"ranks{extension}", name, []) for name, extension in database_formats()
               if name not in ("coz", "causal-svg")]
    renders += [("ranks-rank-1.txt", "text", ["--rank", "1"]), ("ranks-rank-1.json", "json", ["--rank", "1"])]
    render_and_compare(directory, "ranks.db", renders)


def test_capped_trace_is_unchanged(directory):
    generate(directory)
    render_and_compare(directory, "capped.db", [("capped.trace.json", "trace", [])])


if __name__ == "__main__":
    if not KAIROS_REPORT or not GENERATOR:
        print("set KAIROS_REPORT and KAIROS_GOLDEN_PROFILE", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_named_test(globals(), "kairos-golden"))
