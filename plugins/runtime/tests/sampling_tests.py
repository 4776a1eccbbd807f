#!/usr/bin/env python3
"""Sampling tests: real processes under kairos-run, checked through their profile databases.

Run one test: sampling_tests.py NAME (ctest does, one entry per test). Needs KAIROS_RUN,
KAIROS_REPORT, KAIROS_SAMPLED_PROGRAM (tests/sampled_program.cpp) in the environment.
Bounds are set for a loaded 2-core machine: CPU time is measured by the program itself
(CLOCK_THREAD_CPUTIME_ID), so only the sampler's accuracy is tested, never the machine's speed.
"""
import glob
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from harness import Failure, check, run_named_test

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PROGRAM = os.environ.get("KAIROS_SAMPLED_PROGRAM", "")
TIMEOUT = 60


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_") and k != "LD_PRELOAD"}
    env.update({"LC_ALL": "C", "KAIROS_SAMPLING_DELAY": "0",
                "KAIROS_OUTPUT_FORMATS": "db,text,trace,folded,json"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def kairos(arguments, directory, options=(), **extra):
    result = subprocess.run([KAIROS_RUN, *options, "--", PROGRAM, *arguments], cwd=directory,
                            env=environment(**extra), capture_output=True, timeout=TIMEOUT)
    return result.stdout.decode(), result.stderr.decode(), result.returncode


def only(pattern, directory):
    found = glob.glob(os.path.join(directory, "kairos-output", pattern))
    check(len(found) == 1, f"one {pattern} expected, found {found}")
    return found[0]


def database(directory):
    path = only("*.db", directory)
    connection = sqlite3.connect(path)
    check(connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"{path} is intact")
    return connection


def cpu_split(out):
    match = re.search(r"three_quarters=(\d+) one_quarter=(\d+)", out)
    check(match, f"the program printed its CPU times: {out!r}")
    return int(match.group(1)), int(match.group(2))


def function_totals(db):
    return {name: total for name, total in db.execute("SELECT name, total FROM top_functions")}


def total_of(totals, fragment):
    return sum(total for name, total in totals.items() if fragment in name)


# --- tests -----------------------------------------------------------------------------------

def split_at(directory, frequency, source):
    out, err, status = kairos(["split", "1.6"], directory, ["--freq", str(frequency)],
                              KAIROS_SAMPLING_CPUTIME_SOURCE=source)
    check(status == 0, f"{status} {err}")
    three, one = cpu_split(out)
    db = database(directory)
    totals = function_totals(db)
    a, b = total_of(totals, "compute_three_quarters"), total_of(totals, "compute_one_quarter")
    share = 100.0 * a / (a + b)
    check(abs(share - 75.0) <= 3.0, f"{source} at {frequency} Hz: compute_three_quarters has {share:.1f}% (75 ± 3)")
    count, weight = db.execute("SELECT COUNT(*), SUM(weight_ns) FROM sample").fetchone()
    cpu_s = (three + one) / 1e9
    check(abs(weight / 1e9 - cpu_s) <= 0.10 * cpu_s,
          f"{source}: weights {weight / 1e9:.3f} s vs CPU {cpu_s:.3f} s (±10%)")
    return count, cpu_s, db


def test_cpu_split_perf(directory):
    count, cpu_s, db = split_at(directory, 1000, "perf")
    check(db.execute("SELECT value FROM metadata WHERE key = 'sampling_cpu_source'").fetchone()[0]
          == "perf task-clock", "perf task-clock was used")
    expected = 1000 * cpu_s
    check(abs(count - expected) <= 0.10 * expected,
          f"{count} samples for {cpu_s:.3f} s of CPU at 1 kHz (expected {expected:.0f} ± 10%)")


def test_cpu_split_timer_fallback(directory):
    # The POSIX CPU timer is tick-limited (250 Hz here): fewer samples, but each is weighted by the
    # CPU time it stands for, so shares and total CPU time stay right.
    count, cpu_s, db = split_at(directory, 1000, "timer")
    check(db.execute("SELECT value FROM metadata WHERE key = 'sampling_cpu_source'").fetchone()[0]
          == "POSIX CPU timer", "the timer was used")
    check(count > 0.1 * 1000 * cpu_s, f"timer samples delivered: {count}")


def test_threads_and_call_chain(directory):
    out, err, status = kairos(["split", "0.8"], directory, ["--freq", "500"])
    check(status == 0, err)
    db = database(directory)
    report = json.load(open(only("*[0-9].json", directory)))
    registry = {(t["internal_id"], t["sequent_id"], t["tid"]) for t in report["threads"] if not t["kairos_owned"]}
    rows = set(db.execute("SELECT internal_id, sequent_id, tid FROM thread"))
    check(rows == registry, f"database threads {rows} = registry {registry}")
    sampled = {tid for (tid,) in db.execute(
        "SELECT DISTINCT thread.tid FROM sample JOIN thread ON thread.id = sample.thread")}
    check(len(sampled) == 2, f"both working threads sampled: {sampled}")
    # The known chain, leaf first: compute_three_quarters <- the thread's lambda <- ... <- start_thread.
    leaf = db.execute("SELECT stack FROM samples WHERE leaf LIKE '%compute_three_quarters%' LIMIT 1").fetchone()
    check(leaf, "a sample in compute_three_quarters")
    chain = [name for (name,) in db.execute(
        """WITH RECURSIVE up (node) AS (SELECT ?
             UNION ALL SELECT stack.parent FROM up JOIN stack ON stack.id = up.node
             WHERE stack.parent IS NOT NULL)
           SELECT string.value FROM up JOIN stack ON stack.id = up.node
           JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function""", leaf)]
    joined = " <- ".join(chain)
    positions = [next((i for i, name in enumerate(chain) if fragment in name), -1)
                 for fragment in ("compute_three_quarters", "split(double)::{lambda()#1}", "start_thread")]
    check(all(p >= 0 for p in positions) and positions == sorted(positions), f"chain: {joined}")


def test_sigterm_leaves_valid_database(directory):
    process = subprocess.Popen([KAIROS_RUN, "--freq", "500", "--", PROGRAM, "busy-until-signal"],
                               cwd=directory, env=environment(KAIROS_FLUSH_INTERVAL="0.2"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(process.stdout.readline() == b"ready\n", "started")
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=TIMEOUT)
    check(process.returncode == -signal.SIGTERM, f"dies by SIGTERM: {process.returncode}")
    db = database(directory)
    count = db.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    check(count > 100, f"samples kept: {count}")
    end = db.execute("SELECT value FROM metadata WHERE key = 'end_reason'").fetchone()
    check(end and end[0] == "signal SIGTERM", f"end reason {end}")


def test_abort_leaves_valid_database(directory):
    # abort() runs no handler: the database holds what the last flush (every 0.2 s) committed.
    out, err, status = kairos(["abort-after", "1.0"], directory, ["--freq", "500"],
                              KAIROS_FLUSH_INTERVAL="0.2")
    check(status == -signal.SIGABRT, f"dies by SIGABRT: {status}")
    db = database(directory)
    count, first, last = db.execute("SELECT COUNT(*), MIN(time_ns), MAX(time_ns) FROM sample").fetchone()
    check(count > 100, f"samples up to the last flush: {count}")
    check((last - first) / 1e9 > 0.4, f"they span most of the run: {(last - first) / 1e9:.2f} s")
    check(db.execute("SELECT COUNT(*) FROM thread").fetchone()[0] >= 2, "threads were flushed too")


def test_stress_dlopen_malloc_fork(directory):
    for round in range(3):
        out, err, status = kairos(["stress", "1.5"], os.path.join(directory), ["--freq", "1000"],
                                  KAIROS_OUTPUT_PATH=f"kairos-output/stress-{round}")
        check(status == 0 and "stress done" in out, f"round {round}: {status} {out!r} {err!r}")


def test_program_sigprof_handler_keeps_working(directory):
    plain = subprocess.run([PROGRAM, "own-sigprof", "1"], capture_output=True, timeout=TIMEOUT)
    out, err, status = kairos(["own-sigprof", "1"], directory, ["--freq", "1000"])
    received = int(re.search(r"received=(\d+)", out).group(1))
    plain_received = int(re.search(r"received=(\d+)", plain.stdout.decode()).group(1))
    check(status == 0 and received >= 0.8 * plain_received and received > 50,
          f"the program's SIGPROF: {received} under kairos, {plain_received} without")
    count = database(directory).execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    check(count > 500, f"kairos sampled too: {count}")


def test_realtime_keeps_sleeps_whole(directory):
    out, err, status = kairos(["sleeps", "20", "30"], directory,
                              ["--realtime", "on", "--cputime", "off"],
                              KAIROS_SAMPLING_REALTIME_FREQ="1000")
    check(status == 0 and "short=0 interrupted=0" in out, f"sleeps cut short: {out!r} {err!r}")
    db = database(directory)
    waiting = db.execute("SELECT COUNT(*) FROM realtime_samples WHERE leaf LIKE '%nanosleep%'").fetchone()[0]
    check(waiting > 200, f"waiting threads are seen at their sleep: {waiting}")


def test_no_allocation_in_handler(directory):
    out, err, status = kairos(["alloc-hook", "1"], directory, ["--freq", "1000"])
    check(status == 0, f"{status} {err}")
    checked, in_handlers = map(int, re.search(r"checked=(\d+) in_handlers=(\d+)", out).groups())
    # The program's own SIGUSR1 handler allocates once on purpose: the hook sees that one only.
    check(in_handlers == 1 and checked > 10, f"allocations in handlers: {in_handlers} of {checked}")
    count = database(directory).execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    check(count > 1000, f"the handler ran: {count} samples")


def test_writer_threads_and_temporary_files(directory):
    for use_files in ("true", "false"):
        out, err, status = kairos(["split", "0.6"], directory, ["--freq", "1000"],
                                  KAIROS_SAMPLING_ALLOCATOR_SIZE="1",
                                  KAIROS_USE_TEMPORARY_FILES=use_files,
                                  KAIROS_OUTPUT_PATH=f"kairos-output/files-{use_files}")
        check(status == 0, err)
        cpu_ns = sum(int(value) for value in re.findall(r"=(\d+)", out))  # the workers' own CPU time
        db = sqlite3.connect(os.path.join(directory, "kairos-output", f"files-{use_files}.db"))
        weight_ns = db.execute("SELECT SUM(weight_ns) FROM sample s JOIN thread t ON s.thread = t.id "
                               "WHERE t.sequent_id > 0").fetchone()[0] or 0
        # Every sample reached the database through the writer: their weights add up to the
        # workers' CPU time (a lost batch would be missing from it).
        check(abs(weight_ns - cpu_ns) <= 0.05 * cpu_ns,
              f"temporary files {use_files}: samples weigh {weight_ns} ns for {cpu_ns} ns of CPU")
    leftovers = glob.glob(os.path.join(tempfile.gettempdir(), "kairos-spill-*"))
    check(not leftovers, f"no temporary file left: {leftovers}")


def test_outputs_and_kairos_report(directory):
    out, err, status = kairos(["split", "0.6"], directory, ["--freq", "500"])
    check(status == 0, err)
    summary = [line for line in err.splitlines() if line.startswith("[kairos]")]
    check(len(summary) == 1 and re.match(r"\[kairos\] \d+ samples, 0 regions on 3 threads; outputs: ", summary[0]),
          f"{summary}")
    for extension in (".db", ".txt", ".trace.json", ".folded"):
        check(extension in summary[0], f"{extension} listed")
    text = open(only("*.txt", directory)).read()
    check("compute_three_quarters" in text and "top functions" in text, "the text report")
    trace = json.load(open(only("*.trace.json", directory)))
    check(trace["traceEvents"] and "stackFrames" in trace, "the trace")
    folded = open(only("*.folded", directory)).read().splitlines()
    check(any("compute_one_quarter" in line for line in folded), "folded stacks")
    db_path = only("*.db", directory)
    for format in ("text", "trace", "folded", "json"):
        result = subprocess.run([KAIROS_REPORT, db_path, "--format", format], capture_output=True,
                                timeout=TIMEOUT)
        check(result.returncode == 0 and result.stdout, f"kairos-report --format {format}: {result.stderr!r}")
    offline = subprocess.run([KAIROS_REPORT, db_path, "--format", "folded"], capture_output=True).stdout
    check(offline.decode().splitlines() == folded, "kairos-report gives what finalize wrote")
    bad = subprocess.run([KAIROS_REPORT, os.path.join(directory, "nothing.db")], capture_output=True)
    check(bad.returncode != 0, "a missing database is an error")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-sampling"))
