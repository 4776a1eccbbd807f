#!/usr/bin/env python3
"""The Python package (docs/python.md) against the C++ tools: `python3 -m kairos` writes what
kairos-report and kairos-merge write, and names bad input as they do; kairos.open's rows are the
views' rows, streamed; DataFrames where pandas is installed. Inputs come from
kairos_profile_generator (rank databases written by the database plugin's writer).

Run one test: python_tests.py NAME (ctest does, with PYTHONPATH holding the build tree's package
and the runtime tests' harness). Needs KAIROS_REPORT, KAIROS_MERGE, KAIROS_PROFILE_GENERATOR and
KAIROS_BUILD_DIR in the environment.
"""
import io
import os
import shutil
import sqlite3
import sys
import tracemalloc

import kairos
from harness import Failure, check, run_named_test, run_process, skip

KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
KAIROS_MERGE = os.environ.get("KAIROS_MERGE", "")
KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_AVAIL = os.environ.get("KAIROS_AVAIL", "")
SOURCE_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
GENERATOR = os.environ.get("KAIROS_PROFILE_GENERATOR", "")
BUILD_DIR = os.environ.get("KAIROS_BUILD_DIR", "")
TIMEOUT = 30


def generate(directory, count, samples=300, launch_id=""):
    """count rank databases, directory/rank-00000.db ..."""
    result = run_process([GENERATOR, directory, str(count), str(samples), "2", *([launch_id] if launch_id else [])],
                         TIMEOUT)
    check(result.returncode == 0, f"the generator failed: {result.stderr.decode(errors='replace')}")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".db"))


def python_kairos(*arguments, environment=None):
    return run_process([sys.executable, "-m", "kairos", *arguments], TIMEOUT, env=environment)


def tool(program, *arguments):
    return run_process([program, *arguments], TIMEOUT)


def select_all(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as database:
        return database.execute(sql).fetchall()


def merged_database(directory, ranks=3):
    out = os.path.join(directory, "merged.db")
    result = tool(KAIROS_MERGE, "-o", out, *generate(os.path.join(directory, "ranks"), ranks))
    check(result.returncode == 0, f"kairos-merge failed: {result.stderr.decode(errors='replace')}")
    return out


def test_report_equals_kairos_report(directory):
    database = merged_database(directory)
    for format in ("text", "trace", "folded", "speedscope", "flamegraph", "html", "json"):
        expected = tool(KAIROS_REPORT, database, "-f", format)
        got = python_kairos("report", database, "-f", format)
        check(expected.returncode == 0 and got.returncode == 0,
              f"-f {format}: status {expected.returncode} and {got.returncode}: {got.stderr!r}")
        check(got.stdout == expected.stdout and len(got.stdout) > 100,
              f"-f {format}: python3 -m kairos report wrote {len(got.stdout)} bytes, kairos-report "
              f"{len(expected.stdout)}, not the same")
    check(python_kairos("report", database, "--rank", "1").stdout == tool(KAIROS_REPORT, database, "--rank", "1").stdout,
          "--rank R: rank R's report")
    for command in ("trace", "folded"):
        check(python_kairos(command, database).stdout == tool(KAIROS_REPORT, database, "-f", command).stdout,
              f"python3 -m kairos {command} is kairos-report -f {command}")
    ranks = generate(os.path.join(directory, "ranks"), 3)[:2]
    check(python_kairos("report", *ranks).stdout == tool(KAIROS_REPORT, *ranks).stdout,
          "several databases' text reports, each under its name")
    output = os.path.join(directory, "report.txt")
    check(python_kairos("report", database, "-o", output).returncode == 0, "-o FILE")
    with open(output, "rb") as file:
        check(file.read() == tool(KAIROS_REPORT, database).stdout, "-o FILE holds the text report")


def test_merge_equals_kairos_merge(directory):
    inputs = os.path.join(directory, "ranks")
    generate(inputs, 4)
    by_tool, by_python = os.path.join(directory, "tool.db"), os.path.join(directory, "python.db")
    expected = tool(KAIROS_MERGE, "-o", by_tool, inputs)
    got = python_kairos("merge", "-o", by_python, inputs)
    check(expected.returncode == 0 and got.returncode == 0, f"status {expected.returncode} and {got.returncode}")
    summary = f"[kairos] {by_python}: 4 of 4 inputs merged (4 processes, 1,200 samples) in "
    check(summary in got.stderr.decode(), f"the summary line: {got.stderr!r}")
    for sql in ("SELECT rank, pid, hostname, launch_id, command, start_ns, end_ns FROM processes ORDER BY rank",
                "SELECT * FROM top_functions ORDER BY name",
                "SELECT rank, name, self, total FROM top_functions_by_process ORDER BY rank, name",
                "SELECT rank, name, start_ns, end_ns, depth FROM regions ORDER BY rank, start_ns, name",
                "SELECT key, value FROM metadata ORDER BY key",
                "SELECT rank, time_ns, weight, leaf FROM samples ORDER BY rank, time_ns, leaf"):
        check(select_all(by_python, sql) == select_all(by_tool, sql), f"the two merges differ on: {sql}")
    # A bad input is named and skipped, the status 1, as kairos-merge does; 0 with --keep-going.
    bad = os.path.join(directory, "bad.db")
    with open(bad, "w") as file:
        file.write("not a database\n")
    for keep_going, status in (((), 1), (("--keep-going",), 0)):
        again = os.path.join(directory, f"again{len(keep_going)}.db")
        got = python_kairos("merge", "-o", again, bad, os.path.join(inputs, "rank-00000.db"), *keep_going)
        check(got.returncode == status and f"'{bad}' is not a kairos profile database (skipped)" in got.stderr.decode(),
              f"a bad input {keep_going}: status {got.returncode}, {got.stderr!r}")
    # Two launches: refused as kairos-merge refuses them, merged with --several-launches.
    launches = generate(os.path.join(directory, "job-1"), 1, launch_id="job-1") + \
        generate(os.path.join(directory, "job-2"), 1, launch_id="job-2")
    for several, status in (((), 2), (("--several-launches",), 0)):
        arguments = (*launches, *several)
        expected = tool(KAIROS_MERGE, "-o", os.path.join(directory, f"tool-launches{len(several)}.db"), *arguments)
        got = python_kairos("merge", "-o", os.path.join(directory, f"python-launches{len(several)}.db"), *arguments)
        named = all(b"two launches: 'job-1'" in run.stderr and b"and 'job-2'" in run.stderr for run in (expected, got))
        check(got.returncode == status and expected.returncode == status and (status == 0 or named),
              f"two launches {several}: status {got.returncode}, {got.stderr!r}")


def test_bad_arguments_are_named_as_the_tools_name_them(directory):
    inputs = os.path.join(directory, "ranks")
    rank = generate(inputs, 1)[0]
    empty = os.path.join(directory, "empty")
    os.mkdir(empty)
    out = os.path.join(directory, "out.db")
    for arguments in ([os.path.join(directory, "missing.db")], [empty], [os.path.join(inputs, "none-*.db")]):
        expected, got = tool(KAIROS_MERGE, "-o", out, *arguments), python_kairos("merge", "-o", out, *arguments)
        check(got.returncode == expected.returncode == 2 and got.stderr == expected.stderr and b"[kairos]" in got.stderr,
              f"merge {arguments}: kairos-merge {expected.returncode} {expected.stderr!r}, "
              f"python3 -m kairos {got.returncode} {got.stderr!r}")
    expected, got = tool(KAIROS_MERGE, "-o", rank, rank), python_kairos("merge", "-o", rank, rank)
    check(got.returncode == expected.returncode == 2 and got.stderr == expected.stderr and b"give -o a new path" in got.stderr,
          f"an existing output: {got.returncode} {got.stderr!r}")
    not_profile = os.path.join(directory, "notes.db")
    with open(not_profile, "w") as file:
        file.write("not a database\n")
    for arguments in ([os.path.join(directory, "missing.db")], [not_profile], [rank, "-f", "pdf"],
                      [rank, rank, "-f", "trace"], [rank, "-w", "0"]):
        expected, got = tool(KAIROS_REPORT, *arguments), python_kairos("report", *arguments)
        check(got.returncode == expected.returncode != 0 and got.stderr == expected.stderr and b"[kairos]" in got.stderr,
              f"report {arguments}: kairos-report {expected.returncode} {expected.stderr!r}, "
              f"python3 -m kairos {got.returncode} {got.stderr!r}")
    got = python_kairos("merge", rank)
    check(got.returncode == 2 and b"--output" in got.stderr, f"no -o: {got.returncode} {got.stderr!r}")


def test_rows_equal_the_views(directory):
    database = merged_database(directory)
    with kairos.open(database) as profile:
        for view in kairos.VIEWS:
            expected = select_all(database, f"SELECT * FROM {view}")
            rows = list(getattr(profile, view)())
            check([tuple(row) for row in rows] == expected, f"{view}: the rows differ from sqlite3's")
            with sqlite3.connect(database) as connection:
                names = [column[0] for column in connection.execute(f"SELECT * FROM {view}").description]
            dicts = list(profile.rows(view, dicts=True))
            check(dicts == [dict(zip(names, row)) for row in expected], f"{view}: the dicts differ")
            if rows:
                check(list(rows[0]._fields) == names, f"{view}: fields {rows[0]._fields}, columns {names}")
        check(sum(1 for _ in profile.regions()) > 0 and len({row.rank for row in profile.regions()}) == 3,
              "the merged database's regions cover its 3 ranks")
        try:
            profile.rows("sample; DROP TABLE sample")
            raise Failure("a name that is no view was accepted")
        except ValueError as error:
            check("is not a view" in str(error) and "top_functions" in str(error), f"{error}")


def test_regions_decoded_as_the_view_reads_them(directory):
    # Profile.regions() decodes the blocks in C++, the view in SQL; they must give the same rows in
    # the same order. Besides the generated regions, a block written here holds an instrumented
    # function's region (kind 'function'), and one whose name is no string (the view's JOIN leaves
    # it out); a block of a thread with no row has no process nor rank (the view's LEFT JOIN).
    edited = os.path.join(directory, "edited.db")
    shutil.copy(merged_database(directory), edited)

    def block(thread, start_ns, rows):  # rows: (start - start_ns, length, name, depth, window, clipped, frame)
        widths = [max(len(str(row[i])) for row in rows) for i in range(7)]
        text = "[" + ",".join('"' + "".join(str(value).rjust(width, "0") for value, width in zip(row, widths)) + '"'
                              for row in rows) + "]"
        end_ns = max(start_ns + row[0] + row[1] for row in rows)
        return (thread, start_ns, end_ns, len(rows), *widths, text)

    with sqlite3.connect(edited) as connection:
        name = connection.execute("SELECT id FROM string WHERE value = 'phase_1'").fetchone()[0]
        no_string = connection.execute("SELECT MAX(id) + 1 FROM string").fetchone()[0]
        thread = connection.execute("SELECT MIN(id) FROM thread").fetchone()[0]
        no_thread = connection.execute("SELECT MAX(id) + 1 FROM thread").fetchone()[0]
        frame = connection.execute("SELECT MIN(id) FROM frame").fetchone()[0]
        insert = ("INSERT INTO region_block (thread, start_ns, end_ns, count, start_digits, length_digits, name_digits, "
                  "depth_digits, window_digits, clipped_digits, frame_digits, rows) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        connection.execute(insert, block(thread, 5_000_000, [(0, 900, name, 1, 0, 0, frame), (7, 12345, no_string, 0, 0, 0, 0),
                                                              (1000, 10, name, 2, 0, 2, 0)]))
        connection.execute(insert, block(no_thread, 6_000_000, [(3, 40, name, 0, 0, 1, 0)]))
    with kairos.open(edited) as profile:
        rows = [tuple(row) for row in profile.regions()]
        expected = select_all(edited, "SELECT * FROM regions")
        check(rows == expected, f"{len(rows)} rows decoded, {len(expected)} through the view; they differ")
        added = [row for row in profile.regions() if row.start_ns in (5_000_000, 5_000_007, 5_001_000, 6_000_003)]
        check([(row.start_ns, row.end_ns, row.kind, row.depth, row.clipped, row.process is None) for row in added] ==
              [(5_000_000, 5_000_900, "function", 1, 0, False), (5_001_000, 5_001_010, "region", 2, 2, False),
               (6_000_003, 6_000_043, "region", 0, 1, True)], f"the added rows: {added}")
        dicts = list(profile.rows("regions", dicts=True))
        check(dicts == [row._asdict() for row in profile.regions()], "the dicts hold the rows")


def test_open_refuses_a_bad_path_and_another_schema_version(directory):
    missing = os.path.join(directory, "missing.db")
    for path, expected in ((missing, f"'{missing}' is not a file"), (directory, f"'{directory}' is not a file")):
        try:
            kairos.open(path)
            raise Failure(f"{path} was opened")
        except kairos.DatabaseError as error:
            check(expected in str(error) and "profile database" in str(error), f"{error}")
    notes = os.path.join(directory, "notes.db")
    with open(notes, "w") as file:
        file.write("not a database\n")
    rank = generate(os.path.join(directory, "ranks"), 1)[0]
    old = os.path.join(directory, "old.db")
    shutil.copy(rank, old)
    with sqlite3.connect(old) as database:
        database.execute("UPDATE metadata SET value = '5' WHERE key = 'schema_version'")
    for path, expected in ((notes, f"[kairos] '{notes}' is not a kairos profile database"),
                           (old, f"[kairos] '{old}' has schema version '5'; this kairos reads version "
                                 f"{kairos.schema_version}")):
        try:
            kairos.open(path)
            raise Failure(f"{path} was opened")
        except kairos.DatabaseError as error:
            check(str(error) == expected, f"kairos.open({path}) raised {error}")
        got = python_kairos("report", path)
        check(got.returncode == 1 and got.stderr.decode() == expected + "\n", f"report {path}: {got.stderr!r}")


def test_rows_stream_from_a_large_view(directory):
    rank = generate(os.path.join(directory, "ranks"), 1, samples=100_000)[0]
    with kairos.open(rank) as profile:
        tracemalloc.start()
        count = sum(1 for _ in profile.samples())
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    check(count == 100_000, f"{count} samples read")
    check(peak < 1_000_000, f"reading 100,000 samples one at a time peaked at {peak} bytes (over 1 MB)")


def test_dataframes_and_chunks(directory):
    try:
        import pandas  # noqa: F401
    except ImportError:
        skip("pandas is not installed (Debian: python3-pandas)")
    database = merged_database(directory)
    with kairos.open(database) as profile:
        frame = profile.dataframe("regions")
        check(list(frame.itertuples(index=False, name=None)) == select_all(database, "SELECT * FROM regions"),
              "the regions DataFrame holds the view's rows")
        chunks = list(profile.dataframe("samples", chunksize=250))
        check(all(len(chunk) <= 250 for chunk in chunks) and sum(len(chunk) for chunk in chunks) == 900,
              f"chunks of at most 250 of the 900 samples: {[len(chunk) for chunk in chunks]}")
        per_rank = frame.groupby("rank")["duration_ns"].sum().to_dict()
        expected = dict(select_all(database, "SELECT rank, SUM(duration_ns) FROM regions GROUP BY rank"))
        check(per_rank == expected, f"region time per rank: {per_rank}, sqlite3: {expected}")


def test_write_streams_into_a_file_object(directory):
    database = merged_database(directory)
    with kairos.open(database) as profile:
        for format in ("folded", "trace"):
            buffer = io.BytesIO()
            profile.write(buffer, format)
            check(buffer.getvalue() == tool(KAIROS_REPORT, database, "-f", format).stdout,
                  f"Profile.write(file, '{format}') writes kairos-report's bytes")
        try:
            profile.write(io.BytesIO(), "pdf")
            raise Failure("format 'pdf' was accepted")
        except kairos.DatabaseError as error:
            check('"pdf" is not valid' in str(error) and "folded" in str(error), f"{error}")


def test_causal_rows_and_files(directory):
    rank = generate(os.path.join(directory, "ranks"), 1)[0]
    error = python_kairos("report", rank, "-f", "coz")
    check(error.returncode == 1 and error.stderr == tool(KAIROS_REPORT, rank, "-f", "coz").stderr
          and b"has no causal experiments: run the program under kairos-causal" in error.stderr,
          f"no experiments: {error.returncode} {error.stderr!r}")
    causal = os.path.join(directory, "causal.db")
    shutil.copy(rank, causal)
    with sqlite3.connect(causal) as database:
        for id, speedup, duration in ((1, 0.0, 100_000_000), (2, 0.5, 80_000_000), (3, 0.0, 100_000_000),
                                      (4, 0.5, 80_000_000)):
            database.execute("INSERT INTO causal_experiment (id, scope, selected, speedup, start_ns, duration_ns, "
                             "delay_ns, selected_samples) VALUES (?, 'line', 'app.cpp:7', ?, 0, ?, 0, 3)",
                             (id, speedup, duration))
            database.execute("INSERT INTO causal_progress (experiment, name, kind, delta) VALUES (?, 'done', "
                             "'throughput', 100)", (id,))
        database.execute("INSERT INTO causal_sample (scope, location, count) VALUES ('line', 'app.cpp:7', 12)")
    with kairos.open(causal) as profile:
        rows = list(profile.causal_experiments())
        check([(row.selected, row.speedup, row.progress_point, row.delta) for row in rows] ==
              [("app.cpp:7", speedup, "done", 100) for speedup in (0.0, 0.5, 0.0, 0.5)], f"{rows}")
        check([(row.location, row.count) for row in profile.causal_samples()] == [("app.cpp:7", 12)],
              "causal_samples")
        for format in ("coz", "causal-svg"):
            buffer = io.BytesIO()
            profile.write(buffer, format)
            check(buffer.getvalue() == tool(KAIROS_REPORT, causal, "-f", format).stdout and len(buffer.getvalue()) > 100,
                  f"Profile.write(file, '{format}') writes kairos-report's bytes")
    text = python_kairos("report", causal).stdout.decode()
    check("speeding up app.cpp:7 by 50% would speed the program up by 20.0%" in text, text)


def test_merger_from_python(directory):
    ranks = generate(os.path.join(directory, "ranks"), 2)
    out = os.path.join(directory, "merged.db")
    merger = kairos.Merger(out)
    check(merger.add(ranks[0]) == (1, 300), "one rank: one process, its 300 samples")
    try:
        merger.add(ranks[0])
        raise Failure("the same input was merged twice")
    except kairos.DatabaseError as error:
        check("already merged" in str(error) and ranks[0] in str(error), f"{error}")
    merger.add(ranks[1])
    merger.finish()
    check((merger.processes, merger.samples) == (2, 600), f"{merger.processes} processes, {merger.samples} samples")
    with kairos.open(out) as profile:
        check(sorted(row.rank for row in profile.processes()) == [0, 1], "both ranks are in the merged database")
    try:
        kairos.Merger(out)
        raise Failure("an existing output was accepted")
    except kairos.DatabaseError as error:
        check(f"'{out}' already exists" in str(error), f"{error}")


def test_installed_package_imports(directory):
    prefix = os.path.join(directory, "prefix")
    result = run_process(["cmake", "--install", BUILD_DIR, "--component", "python", "--prefix", prefix], TIMEOUT)
    check(result.returncode == 0, f"cmake --install failed: {result.stderr.decode(errors='replace')}")
    packages = [root for root, _, files in os.walk(prefix) if "__init__.py" in files and os.path.basename(root) == "kairos"]
    check(len(packages) == 1, f"one kairos package installed under {prefix}: {packages}")
    rank = generate(os.path.join(directory, "ranks"), 1)[0]
    environment = dict(os.environ, PYTHONPATH=os.path.dirname(packages[0]))
    got = python_kairos("folded", rank, environment=environment)
    check(got.returncode == 0 and got.stdout == tool(KAIROS_REPORT, rank, "-f", "folded").stdout,
          f"the installed package: {got.returncode} {got.stderr!r}")
    located = run_process([sys.executable, "-c", "import kairos; print(kairos.__file__)"], TIMEOUT, env=environment)
    check(located.stdout.decode().startswith(prefix), f"imported from {located.stdout!r}, not {prefix}")


def test_every_format_of_the_table_everywhere(directory):
    """formats.hpp's table, read through the package: every format kairos-run writes at exit is
    accepted by KAIROS_OUTPUT_FORMATS and written to <stem><extension>; every format written from a
    database is accepted by kairos-report -f and python3 -m kairos report -f, byte for byte alike;
    each is named in every help text and in docs/outputs.md."""
    from kairos import _native
    table = _native.formats
    names = [row["name"] for row in table]
    check(len(names) == len(set(names)) and {"db", "text", "json"} <= set(names), f"the table: {names}")
    if not KAIROS_RUN or not KAIROS_AVAIL:
        skip("kairos-run or kairos-avail not built (no libkairos.so: libsqlite3.a missing)")
    at_exit = [row for row in table if row["at_exit"]]
    stem = os.path.join(directory, "run")
    busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
    # Sampling from the start: a run that records nothing writes no file (docs/runtime.md).
    environment = dict(os.environ, KAIROS_OUTPUT_FORMATS=",".join(row["name"] for row in at_exit),
                       KAIROS_SAMPLING_FREQ="1000", KAIROS_SAMPLING_DELAY="0")
    run = run_process([KAIROS_RUN, "-o", stem, "--", "sh", "-c", busy], TIMEOUT, env=environment)
    check(run.returncode == 0, f"kairos-run failed: {run.stderr.decode(errors='replace')}")
    check(b"not valid" not in run.stderr, f"a format refused: {run.stderr.decode(errors='replace')}")
    for row in at_exit:
        path = stem + row["extension"]
        check(os.path.isfile(path) and os.path.getsize(path) > 0, f"{row['name']}: {path} not written")
    database = stem + ".db"
    for row in table:
        if not row["from_database"]:
            continue
        expected = tool(KAIROS_REPORT, database, "-f", row["name"])
        got = python_kairos("report", database, "-f", row["name"])
        # The causal formats need a kairos-causal run: on this profile both say so alike.
        accepted = expected.returncode == 0 or b"no causal experiments" in expected.stderr
        check(accepted and got.returncode == expected.returncode,
              f"-f {row['name']}: status {expected.returncode} and {got.returncode}: "
              f"{expected.stderr.decode(errors='replace')}")
        check(got.stdout == expected.stdout and got.stderr == expected.stderr,
              f"-f {row['name']}: python3 -m kairos and kairos-report differ")
    refused = tool(KAIROS_REPORT, database, "-f", "db")
    check(refused.returncode == 2 and b"expected one of" in refused.stderr,
          f"-f db is the database itself, refused: {refused.stderr!r}")
    helps = {
        "kairos-run --help": (tool(KAIROS_RUN, "--help").stdout.decode(), at_exit),
        "kairos-avail --settings": (tool(KAIROS_AVAIL, "--settings", "--regex", "output_formats").stdout.decode(),
                                    at_exit),
        "kairos-report --help": (tool(KAIROS_REPORT, "--help").stdout.decode(),
                                 [row for row in table if row["from_database"]]),
        "python3 -m kairos report --help": (python_kairos("report", "--help").stdout.decode(),
                                            [row for row in table if row["from_database"]]),
    }
    for where, (text, rows) in helps.items():
        flat = " ".join(text.split())
        for row in rows:
            check(f"{row['name']} (" in flat, f"{where} does not name {row['name']}:\n{text}")
    with open(os.path.join(SOURCE_DIR, "docs", "outputs.md"), encoding="utf-8") as file:
        documented = {line.split("|")[1].strip().strip("`") for line in file if line.startswith("| `")}
    check(set(names) <= documented, f"docs/outputs.md's table lacks {sorted(set(names) - documented)}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-python"))
