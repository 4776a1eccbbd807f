#!/usr/bin/env python3
"""Time-window tests (docs/windows.md): the phased program (tests/phased_program.cpp) under
kairos-run with windows, checked through its profile database.

Run one test: windows_tests.py NAME (ctest does). Needs KAIROS_RUN, KAIROS_REPORT and
KAIROS_PHASED_PROGRAM in the environment. The program prints each phase's monotonic start and
end, so every check compares a sample with the phase that was really running at its time, however
loaded the machine is.
"""
import json
import os
import sqlite3
import statistics
import sys

import html_page
from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PROGRAM = os.environ.get("KAIROS_PHASED_PROGRAM", "")
TIMEOUT = 60
# Edges come from timers, so they land far inside the control thread's 20 ms tick: the median edge
# of the repeated windows (20 edges) is held within EDGE_MEDIAN_BOUND_MS, which an edge taken at the
# tick (about 10 ms late on average) would miss. Any one edge only within EDGE_BOUND_MS: on a 2-core
# CI machine running two CPU-bound tests (and, in a VM, the hypervisor's other guests), waking the
# windows thread took 9 ms, and once 15.08 ms. Precision is a measurement (docs/windows.md), not a
# timed test.
EDGE_MEDIAN_BOUND_MS = 5.0
EDGE_BOUND_MS = 100.0
PHASE_FUNCTIONS = {"alpha": "alpha(double)", "beta": "beta(double)", "gamma": "gamma_phase(double)"}


def environment(**extra):
    return clean_environment({"KAIROS_OUTPUT_FORMATS": "db,text,trace,json", "KAIROS_SAMPLING_FREQ": "1000"}, **extra)


def run(directory, options, arguments, **extra):
    """The program under kairos-run: (phases {name: (start_ns, end_ns)}, stderr, database)."""
    result = run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), *options, "--", PROGRAM, *arguments],
                         TIMEOUT, env=environment(**extra))
    err = result.stderr.decode(errors="replace")
    check(result.returncode == 0, f"exit status {result.returncode}: {err}")
    check("could not be written" not in err, f"every row written: {err}")
    phases = {}
    for line in result.stdout.decode().splitlines():
        name, start, end = line.split()
        phases[name] = (int(start), int(end))
    check(set(phases) == {"alpha", "beta", "gamma"}, f"the program's output is whole: {result.stdout!r}")
    path = os.path.join(directory, "out.db")
    return phases, err, (sqlite3.connect(path) if os.path.exists(path) else None), path


def phase_at(phases, time_ns):
    for name, (start, end) in phases.items():
        if start <= time_ns <= end:
            return name
    return None


def phase_of_stack(db, stack):
    """The phase function on a sampled stack (walking the trie to its root), or None."""
    names = [name for (name,) in db.execute(
        "WITH RECURSIVE chain(node) AS (SELECT ? UNION ALL SELECT stack.parent FROM chain "
        "JOIN stack ON stack.id = chain.node WHERE stack.parent IS NOT NULL) "
        "SELECT string.value FROM chain JOIN stack ON stack.id = chain.node JOIN frame ON frame.id = stack.frame "
        "JOIN string ON string.id = frame.function", (stack,))]
    for phase, function in PHASE_FUNCTIONS.items():
        if any(function in name for name in names):
            return phase
    return None


def windows(db):
    return db.execute("SELECT ordinal, clock, planned_start, planned_end, actual_start, actual_end, start_ns, end_ns, "
                      "samples, regions FROM window ORDER BY ordinal").fetchall()


def check_samples_follow_phases(db, phases):
    """Every sample lies inside its window and in the phase running at its time."""
    spans = {ordinal: (start, end) for ordinal, _, _, _, _, _, start, end, _, _ in windows(db)}
    wrong = []
    for time_ns, stack, window in db.execute("SELECT time_ns, stack, window FROM sample WHERE stack IS NOT NULL"):
        check(window in spans, f"a sample in window {window}, which the window table does not have")
        start, end = spans[window]
        # A window's edge reaches every thread within a few ms; more slack on a loaded machine.
        check(start - 10_000_000 <= time_ns <= end + 10_000_000,
              f"a sample at {time_ns} outside its window {window} [{start}, {end}]")
        running, sampled = phase_at(phases, time_ns), phase_of_stack(db, stack)
        if sampled and running and sampled != running:
            wrong.append((time_ns, sampled, running))
    check(not wrong, f"samples in a phase that was not running: {wrong[:5]}")


def edge_errors_ms(db):
    return [abs(actual - planned) / 1e6 for _, _, ps, pe, a_s, a_e, _, _, _, _ in windows(db)
            for planned, actual in ((ps, a_s), (pe, a_e)) if actual is not None]


def test_realtime_window_around_beta(directory):
    # alpha 1 s, beta 1 s, gamma 1 s of CPU; a 0.4 s window 1.3 s after the start lies inside beta
    # on any machine that runs the program at full speed, and the checks hold either way.
    phases, err, db, path = run(directory, ["--periods", "realtime:1.3:0.4"], ["1"])
    rows = windows(db)
    check(len(rows) == 1 and rows[0][4] is not None, f"one window, opened: {rows}")
    _, clock, planned_start, planned_end, actual_start, actual_end, start_ns, end_ns, samples, regions = rows[0]
    check(clock == "realtime" and planned_start == 1_300_000_000 and planned_end == 1_700_000_000, f"the plan: {rows}")
    errors = edge_errors_ms(db)
    check(max(errors) <= EDGE_BOUND_MS, f"realtime edges within {EDGE_BOUND_MS} ms of plan: {errors} ms")
    # About 400 at full speed; a machine loaded by other work runs the thread, and so signals it,
    # less often, and the check is that the window collects, not how fast this machine is.
    check(samples >= 40, f"{samples} samples in a 0.4 s window at 1 kHz")
    counted = db.execute("SELECT (SELECT COUNT(*) FROM sample WHERE window = 1), "
                         "(SELECT COUNT(*) FROM region WHERE window = 1)").fetchone()
    check((samples, regions) == counted, f"the window's counts are its rows': {(samples, regions)} vs {counted}")
    check(db.execute("SELECT COUNT(*) FROM sample WHERE window != 1").fetchone()[0] == 0, "nothing outside")
    check_samples_follow_phases(db, phases)
    if phases["beta"][0] <= start_ns and end_ns <= phases["beta"][1]:
        names = {name for (name,) in db.execute("SELECT name FROM top_functions WHERE name LIKE '%(double)'")}
        check(names == {"(anonymous namespace)::beta(double)", "(anonymous namespace)::burn(double)"},
              f"the window inside beta sees only beta: {names}")
        region = db.execute("SELECT name, start_ns, end_ns, window, clipped FROM regions").fetchall()
        check(region == [("beta", start_ns, end_ns, 1, 3)], f"beta's region, clipped at both ends: {region}")
    text = open(os.path.join(directory, "out.txt")).read()
    check("window 1 (realtime:1.3:0.4): realtime 1.3" in text, f"the text report's window section: {text[:2000]}")
    trace = json.load(open(os.path.join(directory, "out.trace.json")))
    slices = [e for e in trace["traceEvents"] if e.get("cat") == "window"]
    # The slice is the window as it ran (its edges were held to the plan above, within
    # EDGE_BOUND_MS: a loaded machine opened one 3.3 ms late, a 396.7 ms window).
    actual_us = (actual_end - actual_start) / 1000
    check(len(slices) == 1 and slices[0]["tid"] == 0 and abs(slices[0]["dur"] - actual_us) < 100,
          f"the trace's window slice lasts the window's {actual_us:.1f} us: {slices}")
    check("1 time window opened" in err, f"the summary line names the windows: {err}")


def test_cputime_window_skips_sleeps(directory):
    # alpha 0.5 s of CPU, 1 s asleep, beta 0.5 s, 1 s asleep, gamma. A window from 0.6 s to 0.9 s of
    # process CPU time opens 0.1 s into beta: the sleep does not advance its clock.
    phases, err, db, path = run(directory, ["--periods", "process_cputime:0.6:0.3"], ["0.5", "1"])
    rows = windows(db)
    check(len(rows) == 1 and rows[0][4] is not None, f"one window, opened: {rows}")
    _, clock, _, _, actual_start, actual_end, start_ns, end_ns, samples, _ = rows[0]
    check(phases["beta"][0] <= start_ns <= phases["beta"][1], f"it opened in beta: {start_ns} vs {phases}")
    errors = edge_errors_ms(db)
    check(max(errors) <= EDGE_BOUND_MS, f"CPU-time edges within {EDGE_BOUND_MS} ms of CPU time of plan: {errors} ms")
    # No sleep inside: the window lies within beta (the sleeps are between phases), and its 0.3 s of
    # CPU took at least that long in wall time, however loaded the machine.
    wall_ms = (end_ns - start_ns) / 1e6
    check(phases["beta"][0] <= start_ns and end_ns <= phases["beta"][1] + 2_000_000 and wall_ms >= 280,
          f"0.3 s of CPU in {wall_ms:.0f} ms of wall time, within beta {phases['beta']}: [{start_ns}, {end_ns}]")
    check_samples_follow_phases(db, phases)
    names = {name for (name,) in db.execute("SELECT name FROM top_functions WHERE name LIKE '%(double)'")}
    check("(anonymous namespace)::alpha(double)" not in names, f"alpha was over before the window: {names}")


def test_repeated_windows(directory):
    # Ten 50 ms windows, one every 200 ms (monotonic), across the three 1 s phases.
    phases, err, db, path = run(directory, ["--periods", "monotonic:0.15:0.05:10"], ["1"])
    rows = windows(db)
    check([row[0] for row in rows] == list(range(1, 11)), f"the planned ten windows: {[row[0] for row in rows]}")
    check(all(row[4] is not None for row in rows), "every window opened")
    starts = [row[2] for row in rows]
    check(starts == [150_000_000 + i * 200_000_000 for i in range(10)] or
          all(b - a >= 200_000_000 for a, b in zip(starts, starts[1:])), f"planned starts: {starts}")
    errors = edge_errors_ms(db)
    check(statistics.median(errors) <= EDGE_MEDIAN_BOUND_MS and max(errors) <= EDGE_BOUND_MS,
          f"edges within {EDGE_MEDIAN_BOUND_MS} ms of plan at the median, each within {EDGE_BOUND_MS} "
          f"(median {statistics.median(errors):.3f} ms, max {max(errors):.3f} ms)")
    check_samples_follow_phases(db, phases)
    by_window = dict(db.execute("SELECT window, COUNT(*) FROM sample GROUP BY window"))
    check(0 not in by_window and len(by_window) >= 8, f"samples per window: {by_window}")
    # kairos-report: one window, a range, the comparison; bad ranges named.
    one = run_process([KAIROS_REPORT, path, "--window", "2", "--format", "json"], TIMEOUT)
    check(one.returncode == 0, one.stderr)
    summary = json.loads(one.stdout)
    check([w["ordinal"] for w in summary["windows"]] == [2] and summary["samples"] == by_window.get(2, 0),
          f"--window 2 restricts the summary: {summary['samples']} vs {by_window.get(2)}")
    page_path = os.path.join(directory, "windows.html")
    result = run_process([KAIROS_REPORT, path, "-f", "html", "-o", page_path], TIMEOUT)
    check(result.returncode == 0, f"kairos-report -f html: {result.stderr!r}")
    table = html_page.read(page_path).tables["window-table"]
    check([int(row[0][0]) for row in table[1:]] == list(range(1, 11)) and
          [int(row[5][0]) for row in table[1:]] == [by_window.get(w, 0) for w in range(1, 11)],
          f"the HTML report's windows and their samples: {table}")
    compare = run_process([KAIROS_REPORT, path, "--compare-windows"], TIMEOUT)
    lines = compare.stdout.decode().splitlines()
    check(compare.returncode == 0 and len(lines) > 2, f"the comparison: {compare.stderr!r}")
    # The windows span alpha and beta when the program runs at full speed; on a loaded machine its
    # phases stretch and the windows may all fall in one, which then changes nothing.
    spanned = {phase_at(phases, row[6]) for row in rows} - {None}
    if {"alpha", "beta"} <= spanned:
        check("alpha" in "\n".join(lines[2:4]) and "beta" in "\n".join(lines[2:4]),
              f"the phases change most between windows: {lines[:6]}")
    for bad, expected in (("0", "is not valid"), ("3..2", "is not valid"), ("11", "has windows 1 to 10")):
        result = run_process([KAIROS_REPORT, path, "--window", bad], TIMEOUT)
        check(result.returncode == 2 and expected in result.stderr.decode(), f"--window {bad}: {result.stderr!r}")


def test_windows_file(directory):
    csv = os.path.join(directory, "windows.csv")
    with open(csv, "w") as file:
        file.write("# two irregular windows\nclock,start,length\nrealtime,0.2,100ms\nmonotonic,2.2s,0.2\n")
    phases, err, db, path = run(directory, ["--windows-file", csv], ["1"])
    rows = db.execute("SELECT ordinal, spec, clock, planned_start, actual_start IS NOT NULL FROM window").fetchall()
    check(rows == [(1, "windows.csv:3: realtime,0.2,100ms", "realtime", 200_000_000, 1),
                   (2, "windows.csv:4: monotonic,2.2s,0.2", "monotonic", 2_200_000_000, 1)], f"the file's windows: {rows}")
    check_samples_follow_phases(db, phases)


def test_instruction_windows(directory):
    phases, err, db, path = run(directory, ["--periods", "instructions:500M:100M realtime:0.1:0.1"], ["0.5"])
    skipped = [line for line in err.splitlines() if "instruction windows are skipped" in line]
    if skipped:
        # No PMU here: one line naming the kernel's reason, the other windows still run.
        check(len(skipped) == 1 and "perf_event_open" in skipped[0], f"one line says why: {err}")
        check(db is not None and len(windows(db)) == 1, "the realtime window ran")
        skip(f"no countable instructions here ({skipped[0].strip()})")
    rows = windows(db)
    check(rows[0][1] == "instructions" and rows[0][4] is not None, f"the instructions window opened: {rows}")
    _, _, planned_start, planned_end, actual_start, actual_end, _, _, _, _ = rows[0]
    for planned, actual in ((planned_start, actual_start), (planned_end, actual_end)):
        check(abs(actual - planned) <= 0.01 * 100_000_000, f"within 1% of 100 M instructions: {actual} vs {planned}")


def test_bad_specs_are_named(directory):
    result = run_process([KAIROS_RUN, "--periods", "realtime:1:x", "--", PROGRAM, "0.01"], TIMEOUT, env=environment())
    err = result.stderr.decode()
    check(result.returncode == 0 and "KAIROS_TRACE_PERIODS=\"realtime:1:x\"" in err and "character 12" in err and
          "the program runs without it" in err,
          f"kairos-run names the position and runs the program without kairos: {result.returncode} {err!r}")
    plain = run_process([PROGRAM, "0.01"], TIMEOUT)
    result = run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), "--", PROGRAM, "0.01"], TIMEOUT,
                         env=environment(KAIROS_TRACE_PERIODS="10M:1"))
    err = result.stderr.decode()
    check(result.returncode == 0 and len(result.stdout.splitlines()) == len(plain.stdout.splitlines()),
          "the program runs unchanged")
    check("\"10M\" counts instructions" in err and "kairos is disabled for this run" in err, f"named: {err!r}")
    check(not os.path.exists(os.path.join(directory, "out.db")), "nothing is collected")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-windows"))
