#!/usr/bin/env python3
"""Function instrumentation tests (docs/instrumentation.md): tests/instrumented_program.cpp, built
with kairos_instrument() (-finstrument-functions), under kairos-run and without it, checked
through the profile database.

Run one test: instrumentation_tests.py NAME (ctest does). Needs KAIROS_RUN, KAIROS_REPORT,
KAIROS_INSTRUMENTED_PROGRAM, KAIROS_USER_LIBRARY_DIR and KAIROS_SOURCE_DIR in the environment.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys

from harness import check, clean_environment, run_named_test, run_process, sampled_stacks, skip, unfolded_kairos_frames

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PROGRAM = os.environ.get("KAIROS_INSTRUMENTED_PROGRAM", "")
USER_LIBRARY_DIR = os.environ.get("KAIROS_USER_LIBRARY_DIR", "")
SOURCE_DIR = os.environ.get("KAIROS_SOURCE_DIR", "")
TIMEOUT = 60


def fib_calls(n):
    """Calls of fib(n), the first one included."""
    return 1 if n < 2 else 1 + fib_calls(n - 1) + fib_calls(n - 2)


def environment(**extra):
    return clean_environment({"KAIROS_OUTPUT_FORMATS": "db,text", "KAIROS_SAMPLING_CPUTIME": "false"}, **extra)


def plain(arguments, program=PROGRAM):
    return run_process([program, *arguments], TIMEOUT, env=environment())


def profiled(directory, arguments, program=PROGRAM, **extra):
    """The program under kairos-run: (result, stderr text, database connection or None)."""
    result = run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), "--", program, *arguments], TIMEOUT,
                         env=environment(**extra))
    path = os.path.join(directory, "out.db")
    return result, result.stderr.decode(errors="replace"), sqlite3.connect(path) if os.path.exists(path) else None


def counts(db):
    return dict(db.execute("SELECT name, COUNT(*) FROM regions WHERE kind = 'function' GROUP BY name"))


def test_call_tree_has_exact_counts(directory):
    result, err, db = profiled(directory, ["12"], KAIROS_INSTRUMENT_MIN_DURATION=0)
    check(result.returncode == 0 and db is not None, f"status {result.returncode}, a database: {err}")
    found = counts(db)
    check(found.get("fib(int)") == fib_calls(12), f"fib(12) is {fib_calls(12)} calls: {found}")
    check(found.get("catcher()") == 1 and found.get("thrower(int)") == 4, f"catcher once, thrower 4 times: {found}")
    check(found.get("main") == 1, f"main once: {found}")
    check(db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'region_block_thread_time'")
          .fetchone()[0] == 1, "the region index, left out while rows arrive, is built at the end")
    # The tree: fib's first call under main, each deeper call one depth further, as deep as fib(12) goes.
    depth_of_main = db.execute("SELECT depth FROM regions WHERE name = 'main'").fetchone()[0]
    depths = [d for (d,) in db.execute("SELECT DISTINCT depth FROM regions WHERE name = 'fib(int)' ORDER BY depth")]
    check(depths == list(range(depth_of_main + 1, depth_of_main + 13)), f"fib at depths 1..12 below main: {depths}")
    # Every call lies inside its parent's span (the one open one depth up on the same thread).
    rows = db.execute("SELECT start_ns, end_ns, depth FROM regions WHERE kind = 'function' ORDER BY start_ns, depth")
    open_spans = []
    for start, end, depth in rows:
        del open_spans[depth:]
        if depth > 0:
            check(len(open_spans) == depth, f"a parent at depth {depth - 1} is open at {start}")
            parent_start, parent_end = open_spans[depth - 1]
            check(parent_start <= start and end <= parent_end, "a call lies inside its parent")
        open_spans.append((start, end))
    check(not any(name.startswith("std::") or " std::" in name for name in found), f"no std:: functions: {found}")
    with open(os.path.join(directory, "out.txt"), encoding="utf-8", errors="replace") as file:
        text = file.read()
    check("call graph of regions and instrumented functions" in text and "fib(int)" in text,
          "the text report shows the call graph")
    report = run_process([KAIROS_REPORT, os.path.join(directory, "out.db"), "-f", "text"], TIMEOUT)
    check(report.returncode == 0 and b"fib(int)" in report.stdout, "kairos-report shows the functions too")
    trace = run_process([KAIROS_REPORT, os.path.join(directory, "out.db"), "-f", "trace"], TIMEOUT)
    slices = [event for event in json.loads(trace.stdout)["traceEvents"]
              if event.get("ph") == "X" and event.get("name") == "fib(int)"]
    check(len(slices) == fib_calls(12), f"the trace has a slice per call: {len(slices)}")


def test_output_and_status_unchanged(directory):
    expected = plain(["18", "500"])
    check(expected.returncode == 0, "the program runs")
    result = run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), "--instrument",
                          "--instrument-exclude", "^deep", "--instrument-min", "0", "--", PROGRAM, "18", "500"],
                         TIMEOUT, env=environment())
    err = result.stderr.decode(errors="replace")
    db = sqlite3.connect(os.path.join(directory, "out.db"))
    check(result.stdout == expected.stdout, f"output unchanged: {result.stdout!r} vs {expected.stdout!r}")
    check(result.returncode == expected.returncode, "exit status unchanged")
    found = counts(db)
    check(found.get("fib(int)") == fib_calls(18) and "deep(long)" not in found,
          f"kairos-run's --instrument options are the settings: {found}")


def test_filters_leave_out_what_they_name(directory):
    cases = [
        ({"KAIROS_INSTRUMENT_EXCLUDE": "^fib"}, lambda names: "fib(int)" not in names and "deep(long)" in names),
        ({"KAIROS_INSTRUMENT_INCLUDE": "^(deep|thrower)"}, lambda names: names == {"deep(long)", "thrower(int)"}),
        ({"KAIROS_INSTRUMENT_FILE_EXCLUDE": "instrumented_program"}, lambda names: names == set()),
        ({"KAIROS_INSTRUMENT_FILE_INCLUDE": "instrumented_program[.]cpp$"}, lambda names: "fib(int)" in names),
    ]
    for index, (settings, wanted) in enumerate(cases):
        where = os.path.join(directory, str(index))
        os.mkdir(where)
        result, err, db = profiled(where, ["10", "10"], KAIROS_INSTRUMENT_MIN_DURATION=0, **settings)
        check(result.returncode == 0, f"{settings}: status {result.returncode}: {err}")
        names = set(counts(db)) if db else set()
        check(wanted(names), f"{settings}: {sorted(names)}")
    # The standard library's functions, left out by default, appear when asked for (the program's
    # g++ build leaves /usr/include uninstrumented, so a name filter is what is tested here).
    where = os.path.join(directory, "bad")
    os.mkdir(where)
    expected = plain(["10"])
    result, err, db = profiled(where, ["10"], KAIROS_INSTRUMENT_INCLUDE="fib(")
    check(result.stdout == expected.stdout and result.returncode == 0, "a bad expression never harms the program")
    check("KAIROS_INSTRUMENT_INCLUDE" in err and "fib(" in err and "POSIX extended regular expression" in err,
          f"a bad expression is named with what is accepted: {err}")


def test_short_calls_stay_in_their_callers(directory):
    result, err, db = profiled(directory, ["20"], KAIROS_INSTRUMENT_MIN_DURATION="0.000002")
    check(result.returncode == 0 and db is not None, err)
    rows = db.execute("SELECT name, duration_ns FROM regions WHERE kind = 'function'").fetchall()
    fib_rows = [duration for name, duration in rows if name == "fib(int)"]
    check(fib_rows and len(fib_rows) < fib_calls(20) / 10, f"most fib calls are shorter than 2 us: {len(fib_rows)}")
    check(all(duration >= 2000 for _, duration in rows), "no row is shorter than the minimum")
    # The first call holds all the others: its row stays, with the time of the calls left out.
    first = db.execute("SELECT MAX(duration_ns) FROM regions WHERE name = 'fib(int)'").fetchone()[0]
    check(first == max(fib_rows), "the outermost fib call keeps its whole time")


def counted_calls(db):
    """Every call counted (the call_tree table), by name."""
    return dict(db.execute("SELECT s.value, SUM(c.calls) FROM call_tree AS c JOIN string AS s ON s.id = c.name "
                           "GROUP BY s.value"))


def test_call_graph_counts_every_call_at_default_settings(directory):
    """At the default minimum duration (10 us) nearly all of fib(20)'s 21,891 calls are too short
    for a row, yet every call graph (text, JSON summary, HTML, kairos-report's) counts each one."""
    result, err, db = profiled(directory, ["20"], KAIROS_OUTPUT_FORMATS="db,text,json,html")
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    expected = {"main": 1, "fib(int)": fib_calls(20), "catcher()": 1, "thrower(int)": 4}
    rows = counts(db)
    check(0 < rows.get("fib(int)", 0) < fib_calls(20), f"rows only for the calls of 10 us or more: {rows}")
    counted = counted_calls(db)
    check(all(counted.get(name) == count for name, count in expected.items()), f"every call counted: {counted}")

    def totals_by_name(pairs):
        totals = {}
        for name, count in pairs:
            totals[name] = totals.get(name, 0) + count
        return totals

    def exact(totals, where):
        check(all(totals.get(name) == count for name, count in expected.items()), f"{where}: {totals}")

    with open(os.path.join(directory, "out.txt"), encoding="utf-8", errors="replace") as file:
        paths = call_graph_paths(file.read())
    exact(totals_by_name((path.rsplit("/", 1)[-1], count) for path, count in paths.items()), "the text call graph")
    check(paths.get("main/fib(int)") == 1 and paths.get("main/fib(int)/fib(int)") == 2, f"fib's calls nest: {paths}")
    with open(os.path.join(directory, "out.json"), encoding="utf-8") as file:
        graph = json.load(file)["profile"]["call_graph"]
    exact(totals_by_name((node["name"], node["count"]) for node in graph), "the JSON summary's call graph")
    import html_page
    table = html_page.read(os.path.join(directory, "out.html")).tables["region-table"]
    exact(totals_by_name((cells[0][0], int(cells[1][0])) for cells in table[1:]), "the HTML call graph")
    report = run_process([KAIROS_REPORT, os.path.join(directory, "out.db"), "-f", "json"], TIMEOUT)
    exact(totals_by_name((node["name"], node["count"]) for node in json.loads(report.stdout)["call_graph"]),
          "kairos-report's JSON summary")


def test_deep_recursion_and_exceptions_keep_the_stack(directory):
    result, err, db = profiled(directory, ["5", "100000"], KAIROS_INSTRUMENT_MIN_DURATION=0)
    check(result.returncode == 0 and db is not None, err)
    check(b"deep 100000" in result.stdout, "the recursion ran")
    found = counts(db)
    check(found.get("deep(long)") == 100001, f"100,001 calls of deep: {found.get('deep(long)')}")
    depth_range = db.execute("SELECT MIN(depth), MAX(depth) FROM regions WHERE name = 'deep(long)'").fetchone()
    check(depth_range[1] - depth_range[0] == 100000, f"as deep as the recursion: {depth_range}")
    check("lost" not in err, f"nothing lost: {err}")
    # After the exception, calls go on at the right depth: deep's first call is main's child.
    depth_of_main = db.execute("SELECT depth FROM regions WHERE name = 'main'").fetchone()[0]
    check(depth_range[0] == depth_of_main + 1, "the stack is whole again after the exception")
    thrower = db.execute("SELECT MIN(depth), MAX(depth) FROM regions WHERE name = 'thrower(int)'").fetchone()
    catcher = db.execute("SELECT depth FROM regions WHERE name = 'catcher()'").fetchone()[0]
    check(thrower == (catcher + 1, catcher + 4), f"thrower's 4 calls nest under catcher: {thrower}, {catcher}")


def call_graph_paths(text):
    """The text report's call graph of regions: {"main/outer/fib(int)": count}."""
    lines = text.split("call graph of regions and instrumented functions, all threads\n", 1)[1].splitlines()[1:]
    paths, open_names = {}, []
    for line in lines:
        if not line.strip() or line.startswith("..."):
            break
        count, names = int(line.split()[0]), line[54:]  # five columns, 54 characters, then the indent
        depth = (len(names) - len(names.lstrip(" "))) // 2
        del open_names[depth:]
        open_names.append(names.strip())
        paths["/".join(open_names)] = paths.get("/".join(open_names), 0) + count
    return paths


def test_functions_nest_under_regions_with_components(directory):
    """With KAIROS_COMPONENTS beyond wall_clock, user-API regions keep their bundles, and their rows
    come from the traced calls' batches with the functions': the functions a region encloses nest
    under it, however the rows were flushed (every 20 ms here)."""
    regions = 20000
    result, err, db = profiled(directory, ["5", "0", "0", str(regions)], KAIROS_INSTRUMENT_MIN_DURATION=0,
                               KAIROS_COMPONENTS="wall_clock,cpu_clock", KAIROS_FLUSH_INTERVAL="0.02")
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    outer = db.execute("SELECT COUNT(*), MIN(depth), MAX(depth) FROM regions WHERE name = 'outer'").fetchone()
    depth_of_main = db.execute("SELECT depth FROM regions WHERE name = 'main'").fetchone()[0]
    check(outer == (regions, depth_of_main + 1, depth_of_main + 1), f"{regions} rows of outer under main: {outer}")
    with open(os.path.join(directory, "out.txt"), encoding="utf-8", errors="replace") as file:
        text = file.read()
    paths = call_graph_paths(text)
    check(paths.get("main/outer") == regions, f"outer under main, {regions} times: {paths}")
    check(paths.get("main/outer/fib(int)") == regions, f"fib's first calls under outer: {paths}")
    check(paths.get("main/fib(int)") == 1, f"main's own fib call beside outer: {paths}")
    check(sum(count for path, count in paths.items() if path.startswith("main/outer/")) == regions * fib_calls(5),
          f"every fib call inside a region under it: {paths}")
    check("user-API regions, by component" in text and "cpu_clock" in text, "the bundles' report is there too")
    check(result.stdout == plain(["5", "0", "0", str(regions)]).stdout, "output unchanged")


def test_a_burst_past_the_row_bound_loses_nothing(directory):
    """fib(27): 635,621 calls in a fraction of a second, all rows, more than a thread's row log holds
    (262,144) before the service thread's next tick: the thread asks for a drain and waits."""
    result, err, db = profiled(directory, ["27"], KAIROS_INSTRUMENT_MIN_DURATION=0)
    check(result.returncode == 0 and db is not None, err)
    found = counts(db)
    check(found.get("fib(int)") == fib_calls(27), f"{fib_calls(27)} rows of fib: {found.get('fib(int)')}")
    dropped = dict(db.execute("SELECT key, value FROM metadata WHERE key LIKE 'dropped.%'"))
    check(all(value == "0" for value in dropped.values()), f"nothing dropped: {dropped}")
    check("lost" not in err, f"nothing lost: {err}")


def build_with_clang(directory, name, flags):
    """instrumented_program.cpp built by clang++ with `flags` (sources among them) and linked to
    libkairos-user.so (its user-API regions); skips where clang++ or XRay's runtime is missing."""
    clang = shutil.which("clang++")
    if clang is None:
        skip("clang++ is not installed")
    program = os.path.join(directory, name)
    user_api = [f"-I{os.path.join(SOURCE_DIR, 'plugins/runtime/include')}", f"-L{USER_LIBRARY_DIR}",
                f"-Wl,-rpath,{USER_LIBRARY_DIR}", "-lkairos-user"]
    build = subprocess.run([clang, "-O2", "-g", os.path.join(SOURCE_DIR, "plugins/runtime/tests/instrumented_program.cpp"),
                            *flags, *user_api, "-o", program], capture_output=True, timeout=TIMEOUT)
    if build.returncode != 0 and b"xray" in build.stderr.lower() and b"cannot find" in build.stderr:
        skip(f"clang's XRay runtime is missing (libclang-rt-14-dev): {build.stderr.decode()}")
    check(build.returncode == 0, f"clang++ builds {name}: {build.stderr.decode()}")
    return program


def profiled_with_exact_counts(directory, program):
    """The program under kairos-run, every call a row: output unchanged, the known counts."""
    expected = plain(["12", "1000"], program)
    result, err, db = profiled(directory, ["12", "1000"], program, KAIROS_INSTRUMENT_MIN_DURATION=0)
    check(result.stdout == expected.stdout and result.returncode == expected.returncode, "output unchanged")
    found = counts(db)
    check(found.get("fib(int)") == fib_calls(12) and found.get("deep(long)") == 1001, f"exact counts: {found}")
    check(found.get("thrower(int)") == 4 and found.get("catcher()") == 1, f"the thrown-through calls: {found}")
    return db


def test_clang_build_and_exceptions(directory):
    """clang emits exits only at returns: calls an exception left are closed by their caller's exit."""
    # Instrumented before optimizing, as g++ does: clang's after-inlining mode would time the calls
    # left after its optimizations, which turn deep() and half of fib()'s calls into loops.
    program = build_with_clang(directory, "clang_program", ["-finstrument-functions"])
    db = profiled_with_exact_counts(directory, program)
    catcher = db.execute("SELECT depth, end_ns FROM regions WHERE name = 'catcher()'").fetchone()
    throwers = db.execute("SELECT MIN(depth), MAX(end_ns) FROM regions WHERE name = 'thrower(int)'").fetchone()
    check(throwers[0] == catcher[0] + 1 and throwers[1] <= catcher[1], f"closed inside catcher: {throwers}, {catcher}")
    deep_top = db.execute("SELECT MIN(depth) FROM regions WHERE name = 'deep(long)'").fetchone()[0]
    check(deep_top == catcher[0], f"later calls at the right depth: deep {deep_top}, catcher {catcher[0]}")


def build_xray_program(directory):
    """The program built with XRay as kairos_instrument(... XRAY) builds it. No sibling-call
    optimization: clang would turn deep() and half of fib()'s calls into loops, and the tests count
    calls."""
    return build_with_clang(directory, "xray_program", [
        "-fno-optimize-sibling-calls", "-fxray-instrument", "-fxray-instruction-threshold=1",
        os.path.join(SOURCE_DIR, "plugins/runtime/src/xray/kairos_xray.cpp"), "-ldl"])


def test_xray_sleds_patched_at_run_time(directory):
    program = build_xray_program(directory)
    db = profiled_with_exact_counts(directory, program)
    deep_top = db.execute("SELECT MIN(depth) FROM regions WHERE name = 'deep(long)'").fetchone()[0]
    catcher = db.execute("SELECT depth FROM regions WHERE name = 'catcher()'").fetchone()[0]
    check(deep_top == catcher, f"after the exception, calls at the right depth: deep {deep_top}, catcher {catcher}")
    # At the default minimum duration, XRay's calls are all counted too, few of them rows.
    where = os.path.join(directory, "default")
    os.mkdir(where)
    _, err, db = profiled(where, ["12", "1000"], program)
    counted = counted_calls(db)
    check(counted.get("fib(int)") == fib_calls(12) and counted.get("deep(long)") == 1001
          and counted.get("thrower(int)") == 4, f"every XRay call counted at default settings: {counted}")
    check(counts(db).get("fib(int)", 0) < fib_calls(12), f"few rows: {counts(db)}")
    # A filtered function's sleds are unpatched; the others still count.
    where = os.path.join(directory, "filtered")
    os.mkdir(where)
    _, err, db = profiled(where, ["12", "1000"], program, KAIROS_INSTRUMENT_MIN_DURATION=0,
                          KAIROS_INSTRUMENT_EXCLUDE="^fib")
    found = counts(db)
    check("fib(int)" not in found and found.get("deep(long)") == 1001, f"fib left out: {found}")
    # Off: the sleds are never patched, nothing is recorded.
    where = os.path.join(directory, "off")
    os.mkdir(where)
    result, err, db = profiled(where, ["12"], program, KAIROS_INSTRUMENT="false")
    check(result.returncode == 0 and (db is None or not counts(db)), "nothing recorded when off")


def test_xray_patched_only_inside_windows(directory):
    """A window opens and closes the sleds: top-level fib calls inside it are all there, none outside."""
    program = build_xray_program(directory)
    # Rows for the loop's calls only (each much longer than 50 us): a row for each of fib's 400,000
    # inner calls in the window would outrun the database, and some would be dropped (and counted).
    result, err, db = profiled(directory, ["16", "0", "1.2"], program, KAIROS_INSTRUMENT_MIN_DURATION="0.00005",
                               KAIROS_TRACE_PERIODS="realtime:0.4:0.4")
    check("lost" not in err, f"no rows lost: {err}")
    check(result.returncode == 0 and db is not None, err)
    loops = [tuple(map(int, line.split()[1:])) for line in result.stdout.decode().splitlines()
             if line.startswith("loop ")]
    check(len(loops) > 20, f"the loop ran: {len(loops)} calls")
    window = db.execute("SELECT start_ns, end_ns FROM window WHERE ordinal = 1").fetchone()
    check(window is not None and window[0] is not None and window[1] is not None, f"the window opened and closed: {window}")
    open_ns, close_ns = window
    depth_of_top = db.execute("SELECT MIN(depth) FROM regions WHERE name = 'fib(int)'").fetchone()[0]
    recorded = db.execute("SELECT start_ns, end_ns, clipped FROM regions WHERE name = 'fib(int)' AND depth = ?",
                          (depth_of_top,)).fetchall()
    # Patching takes effect within a few ms of the edge: calls well inside must all be there.
    slack = 20_000_000
    inside = [(s, e) for s, e in loops if s >= open_ns + slack and e <= close_ns - slack]
    whole = [(s, e) for s, e, clipped in recorded if clipped == 0]
    check(inside and len(whole) >= len(inside), f"every call well inside the window is recorded: {len(whole)} of "
                                                f"{len(inside)}")
    check(all(open_ns <= s and e <= close_ns for s, e, _ in recorded), "nothing recorded outside the window")
    # The sleds were patched only while the window was open: the hooks saw about the window's share
    # of the calls (rows alone would not tell, batches drop what lies outside every window).
    events = int(db.execute("SELECT value FROM metadata WHERE key = 'traced_events'").fetchone()[0])
    per_loop = 2 * fib_calls(16)
    inside_or_crossing = [(s, e) for s, e in loops if e >= open_ns and s <= close_ns]
    check(events <= per_loop * (len(inside_or_crossing) + 2) and events < per_loop * len(loops) / 2,
          f"{events} events: the hooks ran for about {len(inside_or_crossing)} of the {len(loops)} loop calls")


def test_hooks_time_is_charged_to_kairos(directory):
    """The hooks are kairos's own work on the program's thread: sampled, their time ends in one
    `[kairos]` leaf under the instrumented function that called them, is counted in the metadata
    (kairos_own.cpu_ns: the weight of those samples, exactly) and is said in the report."""
    result, err, db = profiled(directory, ["15", "0", "0.6"], KAIROS_SAMPLING_CPUTIME="true",
                               KAIROS_SAMPLING_FREQ="1000", KAIROS_SAMPLING_DELAY="0")
    check(result.returncode == 0 and db is not None, f"status {result.returncode}, a database: {err}")
    own_ns, under_program_ns = 0, 0
    stacks = sampled_stacks(db)
    for weight, frames in stacks:
        names = [function for function, _ in frames]
        check(not unfolded_kairos_frames(frames), f"no frame of kairos's code but [kairos]: {names}")
        check("[kairos]" not in names[1:], f"[kairos] is a leaf: {names}")
        if names[0] == "[kairos]":
            own_ns += weight
            if len(frames) > 1 and os.path.basename(frames[1][1]) == os.path.basename(PROGRAM):
                under_program_ns += weight
    total_ns = sum(weight for weight, _ in stacks)
    metadata = dict(db.execute("SELECT key, value FROM metadata WHERE key LIKE 'kairos_own.%'"))
    check(own_ns > 0.05 * total_ns, f"the hooks cost a share of fib's calls: [kairos] {own_ns} of {total_ns} ns")
    check(int(metadata.get("kairos_own.cpu_ns", -1)) == own_ns, f"the metadata counts [kairos]'s {own_ns} ns: {metadata}")
    # The rest is kairos's start and end on the main thread, under the loader and exit().
    check(under_program_ns >= 0.9 * own_ns,
          f"[kairos] sits under the instrumented functions that called: {under_program_ns} of {own_ns} ns")
    with open(os.path.join(directory, "out.txt")) as report:
        text = report.read()
    check("kairos's own work on the program's threads, shown as [kairos]" in text and "[kairos]" in text,
          f"the report says it: {text[:1500]}")


def test_hooks_without_kairos_do_nothing(directory):
    result = plain(["10"])
    check(result.returncode == 0 and result.stdout.startswith(b"fib(10) = 55\n"), f"runs alone: {result.stdout!r}")
    check(result.stderr == b"", f"says nothing: {result.stderr!r}")


def test_instrument_off_records_nothing(directory):
    result, err, db = profiled(directory, ["10"], KAIROS_INSTRUMENT="false")
    check(result.returncode == 0, err)
    check(db is None or not counts(db), "no instrumented calls")


if __name__ == "__main__":
    if not (KAIROS_RUN and PROGRAM and os.path.exists(PROGRAM)):
        print("KAIROS_RUN and KAIROS_INSTRUMENTED_PROGRAM are needed", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_named_test(globals(), "kairos-instrumentation"))
