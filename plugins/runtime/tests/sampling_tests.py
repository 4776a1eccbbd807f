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
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from harness import (Failure, check, clean_environment, communicate, read_line, run_named_test, run_process,
                     sampled_stacks, skip, unfolded_kairos_frames, share_tolerance)

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PROGRAM = os.environ.get("KAIROS_SAMPLED_PROGRAM", "")
TIMEOUT = 60


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0", "KAIROS_OUTPUT_FORMATS": "db,text,trace,folded,json"}, **extra)


def kairos(arguments, directory, options=(), **extra):
    result = run_process([KAIROS_RUN, *options, "--", PROGRAM, *arguments], TIMEOUT, cwd=directory,
                         env=environment(**extra))
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


def how_sampled(db):
    """What a failed share check needs to say: the source, and what the samples left out."""
    facts = dict(db.execute("SELECT key, value FROM metadata WHERE key IN "
                            "('sampling_cpu_source', 'dropped.samples', 'unsampled_cpu_ns')"))
    samples = db.execute("SELECT COUNT(*) FROM sample WHERE stack IS NOT NULL").fetchone()[0]
    weights = [f"{ms:.0f}" for (ms,) in db.execute(
        "SELECT SUM(weight_ns) / 1e6 FROM sample WHERE stack IS NOT NULL GROUP BY thread ORDER BY 1 DESC")]
    return (f"{facts.get('sampling_cpu_source')}, {samples} samples weighing {'/'.join(weights)} ms by thread, "
            f"{facts.get('dropped.samples')} dropped, "
            f"{int(facts.get('unsampled_cpu_ns') or 0) / 1e6:.1f} ms unsampled")


def function_totals(db):
    return {name: total for name, total in db.execute("SELECT name, total FROM top_functions")}


def total_of(totals, fragment):
    return sum(total for name, total in totals.items() if fragment in name)


# --- tests -----------------------------------------------------------------------------------

def cpu_source(db):
    return db.execute("SELECT value FROM metadata WHERE key = 'sampling_cpu_source'").fetchone()[0]


def split_at(directory, frequency, source):
    out, err, status = kairos(["split", "1.6"], directory, ["--freq", str(frequency)],
                              KAIROS_SAMPLING_CPUTIME_SOURCE=source)
    check(status == 0, f"{status} {err}")
    three, one = cpu_split(out)
    db = database(directory)
    if source == "perf" and cpu_source(db) != "perf task-clock":
        # Non-root with perf_event_paranoid 3, or a seccomp profile: kairos took the timer.
        note = [line for line in err.splitlines() if "KAIROS_SAMPLING_CPUTIME_SOURCE" in line]
        check(note, f"kairos said it fell back from perf: {err!r}")
        skip(f"perf_event_open refuses task-clock here, kairos used {cpu_source(db)!r}: {note[0]}")
    totals = function_totals(db)
    a, b = total_of(totals, "compute_three_quarters"), total_of(totals, "compute_one_quarter")
    share = 100.0 * a / (a + b)
    check(abs(share - 75.0) <= 3.0, f"{source} at {frequency} Hz: compute_three_quarters has {share:.1f}% (75 ± 3)")
    count, weight = db.execute("SELECT COUNT(*), SUM(weight_ns) FROM sample").fetchone()
    cpu_s = (three + one) / 1e9
    facts = {key: int(value) for key, value in db.execute(
        "SELECT key, value FROM metadata WHERE key = 'program_cpu_ns' OR key = 'lost_cpu_ns' OR key LIKE 'coverage.%'")}
    # kairos's own measure of the program's CPU time agrees with the program's.
    check(abs(facts["program_cpu_ns"] / 1e9 - cpu_s) <= 0.03 * cpu_s,
          f"program_cpu_ns {facts['program_cpu_ns'] / 1e9:.3f} s vs the program's own {cpu_s:.3f} s (±3%)")
    # The samples' weights, with what dropped samples stood for (lost_cpu_ns, never in another
    # sample's weight), make up the CPU time while sampling was on, less kairos's handler: the
    # coverage line's parts (under load sampling may start late, and before_sampling_ns says so).
    sampled = facts["program_cpu_ns"] - sum(facts.get(f"coverage.{part}_ns", 0) for part in
                                            ("before_sampling", "paused", "after_last_sample", "signal_handler"))
    # A perf period is random (shortest 1/8 of the mean, the rest exponential), each sample weighing
    # the mean: N samples over CPU time T vary by sd 7/8 sqrt(N) periods. 4 sd, or 2% where the
    # timer's measured weights leave less.
    period = 1e9 / frequency
    bound = max(4 * 0.875 * count ** 0.5 * period, 0.02 * sampled)
    check(abs(weight + facts["lost_cpu_ns"] - sampled) <= bound,
          f"{source}: weights {weight / 1e9:.3f} s and {facts['lost_cpu_ns'] / 1e9:.3f} s lost vs {sampled / 1e9:.3f} s "
          f"of CPU while sampled (±{bound / 1e9:.3f} s: {count} samples); coverage: "
          + ", ".join(f"{key} {value / 1e6:.1f} ms" for key, value in sorted(facts.items())))
    return count, sampled / 1e9, db


def median_weight_ms(db):
    weights = sorted(w for (w,) in db.execute("SELECT weight_ns FROM sample"))
    return weights[len(weights) // 2] / 1e6


def test_cpu_split_perf(directory):
    count, cpu_s, db = split_at(directory, 1000, "perf")
    # perf's task-clock counts the thread's CPU time, so each sample stands for one 1 ms period
    # however loaded the machine is; the total weight was checked against the CPU time above.
    median = median_weight_ms(db)
    check(abs(median - 1.0) <= 0.1, f"the median sample stands for {median:.3f} ms of CPU (1 ± 0.1)")
    check(count >= 0.9 * 1000 * cpu_s, f"{count} samples for {cpu_s:.3f} s of CPU while sampled at 1 kHz")


def test_cpu_split_timer_fallback(directory):
    # The POSIX CPU timer is tick-limited (250 Hz here): fewer samples, but each is weighted by the
    # CPU time it stands for, so shares and total CPU time stay right.
    count, cpu_s, db = split_at(directory, 1000, "timer")
    check(cpu_source(db) == "POSIX CPU timer", "the timer was used")
    check(count > 0.1 * 1000 * cpu_s, f"timer samples delivered: {count}")


def system_call_share(directory, source, cpu_seconds, frequency, tolerance=3.0):
    """The share of read_random (whose CPU time is mostly urandom's, in the kernel) against the
    program's own measure (thread CPU time around each part): kernel time must be charged to the
    system call's caller, not to the user code that runs next."""
    out, err, status = kairos(["syscalls", str(cpu_seconds)], directory, ["--freq", str(frequency)],
                              KAIROS_SAMPLING_CPUTIME_SOURCE=source)
    check(status == 0, f"{status} {err}")
    match = re.search(r"read_random=(\d+) multiply_loop=(\d+)", out)
    check(match, f"the program printed its CPU times: {out!r}")
    in_read, in_loop = int(match.group(1)), int(match.group(2))
    truth = 100.0 * in_read / (in_read + in_loop)
    db = database(directory)
    totals = function_totals(db)
    a, b = total_of(totals, "read_random"), total_of(totals, "multiply_loop")
    check(a + b > 0, f"{source}: samples in read_random or multiply_loop: {totals}")
    share = 100.0 * a / (a + b)
    check(abs(share - truth) <= tolerance,
          f"{source} ({cpu_source(db)}): read_random has {share:.1f}% of the samples, "
          f"{truth:.1f}% of the CPU time (within {tolerance:g} points)")
    return cpu_source(db), err


def test_system_call_time_charged_to_caller_default(directory):
    source, _ = system_call_share(directory, "auto", 2.0, 1000)
    if source != "perf ring buffer":
        check(source == "POSIX CPU timer", f"the default falls back to the timer: {source}")
        skip("perf_event_open refuses a ring counting the kernel here: the timer was checked instead")


def test_default_cpu_sampling_keeps_sleeps_whole(directory):
    # No signal reaches a thread sampled through its ring: a sleep is never cut short, at 10 kHz
    # (the perf signal counting the kernel cut 4% of these 1 ms sleeps).
    result = run_process([KAIROS_RUN, "--freq", "10000", "--", PROGRAM, "sleeps", "1500", "1"], TIMEOUT,
                         cwd=directory, env=environment())
    out = result.stdout.decode()
    check(result.returncode == 0 and "interrupted=0" in out and "short=0" in out,
          f"every sleep whole: {out!r} {result.stderr.decode()!r}")


# The timer lands within 3 points on a quiet machine (an idle 16-core one: 1.7 points off), but
# read 4-6 points high on this project's 2 cores at load 10-12, where the ring stayed within 3.
TIMER_TOLERANCE = 6.0


def test_system_call_time_charged_to_caller_timer(directory):
    # Tick-limited (250 Hz here): 4 s of CPU for 1,000 samples.
    source, _ = system_call_share(directory, "timer", 4.0, 1000, TIMER_TOLERANCE)
    check(source == "POSIX CPU timer", f"the timer was used: {source}")


def test_system_call_time_charged_to_caller_perf(directory):
    # A fixed period phase-locked with this program's 1 ms loop (read 4-10 points high); random
    # periods each weighing the mean period hold it to the program's own measure (docs/runtime.md).
    source, err = system_call_share(directory, "perf", 2.0, 1000)
    if source != "perf task-clock":
        note = [line for line in err.splitlines() if "KAIROS_SAMPLING_CPUTIME_SOURCE" in line]
        check(note, f"kairos said it fell back from perf: {err!r}")
        skip(f"perf_event_open refuses a task-clock event counting the kernel here: {note[0]}")


def metadata(db, key):
    row = db.execute("SELECT value FROM metadata WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def test_thread_blocking_every_signal_is_sampled(directory):
    # The worker blocks every signal (as liblzma's do): sampled through a perf ring, unwound off
    # the thread, its function has its share, and its CPU time is not reported unsampled.
    out, err, status = kairos(["blocked-worker", "1.5"], directory, ["--freq", "1000"])
    check(status == 0, f"{status} {err}")
    match = re.search(r"worker=(\d+) main=(\d+)", out)
    check(match, f"the program printed its CPU times: {out!r}")
    worker, main = int(match.group(1)), int(match.group(2))
    db = database(directory)
    if metadata(db, "sampling_threads_by_ring") == "0":
        check("blocked the sampling signal" in err, f"the exit line says what was not sampled: {err!r}")
        skip("perf_event_open refuses a sampling ring buffer here (perf_event_paranoid, seccomp)")
    check(int(metadata(db, "sampling_threads_by_ring")) >= 1, "the worker was moved to a ring")
    totals = function_totals(db)
    a, b = total_of(totals, "compute_three_quarters"), total_of(totals, "compute_one_quarter")
    share, truth = 100.0 * a / (a + b), 100.0 * worker / (worker + main)
    # Samples a full ring lost stand for no stack (lost_cpu_ns): they can move a thread's share by at
    # most their own share of the whole, which a loaded machine makes a few points.
    lost = int(metadata(db, "lost_cpu_ns") or 0)
    slack = 100.0 * lost / (worker + main)
    check(abs(share - truth) <= 3.0 + slack,
          f"the blocked worker has {share:.1f}% of the samples, {truth:.1f}% of the CPU "
          f"(within 3 points, and the {slack:.1f} that lost samples stood for)")
    unsampled = int(metadata(db, "unsampled_cpu_ns"))
    check(unsampled <= 0.05 * worker, f"unsampled {unsampled / 1e9:.3f} s of the worker's {worker / 1e9:.3f} s")
    check("blocked the sampling signal" not in err, f"no unsampled time worth a sentence: {err!r}")
    (weight,) = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()
    check(abs(weight + lost - (worker + main)) <= 0.10 * (worker + main),
          f"weights {weight / 1e9:.3f} s and {lost / 1e9:.3f} s lost vs CPU {(worker + main) / 1e9:.3f} s (within 10%)")
    # Unwound off the thread: the worker's samples reach its thread's start, not just the leaf.
    frames = [name for (name,) in db.execute(
        "SELECT name FROM top_functions WHERE name LIKE '%blocked_worker%' OR name = 'start_thread'")]
    check(frames, f"the worker's callers were unwound from the stack copies: {sorted(totals)[:20]}")


def test_own_costs_at_verbose(directory):
    # KAIROS_VERBOSE=1 says what kairos's own parts cost (wall/CPU ms), so a user can see where a
    # run's fixed cost went; benchmarks/sampling/overhead.py and fixed_cost.py take their medians from this line.
    out, err, status = kairos(["split", "0.3"], directory, ["--freq", "500"], KAIROS_VERBOSE=1)
    check(status == 0, err)
    lines = [line for line in err.splitlines() if line.startswith("[kairos] own time, wall/CPU: ")]
    check(len(lines) == 1, f"one own-time line expected: {err!r}")
    parts = {}
    for item in lines[0].split(": ", 1)[1].split(", "):
        match = re.fullmatch(r"([a-z -]+) ([0-9.]+)/([0-9.]+) ms", item)
        check(match is not None, f"a part reads 'name wall/cpu ms': {item!r}")
        parts[match.group(1)] = (float(match.group(2)), float(match.group(3)))
    for name in ("start-up", "sample delivery", "database creation", "symbols", "stopping", "database end",
                 "outputs"):
        check(name in parts, f"{name} is listed: {lines[0]!r}")
        check(parts[name][1] > 0, f"{name} took some CPU: {lines[0]!r}")
    # Nesting: delivery includes the symbols it looked up; no part is longer than the run.
    check(parts["sample delivery"][1] >= parts["symbols"][1] * 0.99, lines[0])
    check(all(wall < 60_000 for wall, _ in parts.values()), lines[0])
    _, quiet, _ = kairos(["split", "0.1"], directory, ["--freq", "500"], KAIROS_OUTPUT_PATH="quiet")
    check("own time" not in quiet, f"not said at the default verbosity: {quiet!r}")


def test_unwind_tables_walk_most_samples(directory):
    # The handler walks kairos's unwind tables once the functions a stack goes through are
    # compiled (the first samples of each path go to libgcc); the split shares above check that
    # the stacks are right, this that the cheap path is the one taken.
    if os.uname().machine != "x86_64":
        skip(f"kairos's unwind tables are for x86-64; this is {os.uname().machine}")
    out, err, status = kairos(["split", "1.0"], directory, ["--freq", "1000"], KAIROS_VERBOSE=1)
    check(status == 0, err)
    match = re.search(r"\[kairos\] unwinding: (\d+) of (\d+) samples with kairos's unwind tables "
                      r"\((\d+) functions? compiled, (\d+) rows\)", err)
    check(match, f"the unwinding line is said at KAIROS_VERBOSE=1: {err!r}")
    by_tables, delivered, functions, rows = map(int, match.groups())
    check(delivered > 200, f"samples delivered: {delivered}")
    check(by_tables >= 0.8 * delivered, f"{by_tables} of {delivered} samples by the tables (80% expected)")
    check(0 < functions < 200 and rows >= functions, f"{functions} functions, {rows} rows compiled")
    recorded = database(directory).execute(
        "SELECT value FROM metadata WHERE key = 'sampling_unwound_by_tables'").fetchone()[0]
    check(int(recorded) == by_tables, f"metadata says {recorded}, the line {by_tables}")


def symbol_cache_line(err):
    match = re.search(r"\[kairos\] symbols: (\d+) address(?:es)?, (\d+) from the symbol cache(?: in (\S+)| \(off\))"
                      r"(?:; (.*))?$", err, re.MULTILINE)
    check(match, f"the symbols line is said at KAIROS_VERBOSE=1: {err!r}")
    return int(match.group(1)), int(match.group(2)), match.group(3), match.group(4)


def frames_by_place(db):
    return {(module, offset): (function, file, line) for module, offset, function, file, line in db.execute(
        """SELECT module.value, frame.offset, function.value, file.value, frame.line FROM frame
           JOIN string AS module ON module.id = frame.module
           JOIN string AS function ON function.id = frame.function
           LEFT JOIN string AS file ON file.id = frame.file""")}


def test_symbol_cache_answers_the_next_run_as_the_symbolizer_did(directory):
    # A second run of the same program finds most of its addresses in the symbol cache, and every
    # frame the two runs share reads the same: function, file and line.
    cache = os.path.join(directory, "cache")
    runs = []
    for stem in ("first", "second"):
        out, err, status = kairos(["split", "0.4"], directory, ["--freq", "500"], KAIROS_VERBOSE=1,
                                  KAIROS_SYMBOL_CACHE=cache, KAIROS_OUTPUT_PATH=stem,
                                  KAIROS_OUTPUT_FORMATS="db")
        check(status == 0, err)
        addresses, from_cache, place, problem = symbol_cache_line(err)
        check(place == cache and problem is None, f"the cache named, no problem: {err!r}")
        db = sqlite3.connect(os.path.join(directory, stem + ".db"))
        runs.append((addresses, from_cache, frames_by_place(db)))
    (first_addresses, first_cached, first), (second_addresses, second_cached, second) = runs
    check(first_cached == 0 and first_addresses > 5, f"a fresh cache answers nothing: {runs[0][:2]}")
    check(second_cached >= second_addresses // 2, f"the second run: {second_cached} of {second_addresses} cached")
    shared = set(first) & set(second)
    check(len(shared) >= 5, f"frames in both runs: {len(shared)}")
    for place in shared:
        check(first[place] == second[place], f"{place}: {first[place]} then {second[place]}")
    named = [frame for frame in second.values() if "compute_three_quarters" in frame[0]]
    check(named and all(file and file.endswith("sampled_program.cpp") and line > 0 for _, file, line in named),
          f"the program's frames keep their file:line: {named}")


def test_symbol_cache_place_off_and_unwritable(directory):
    # The default place is under $HOME/.cache; off keeps none; a directory the user named that
    # cannot be written is said once, and the program's output and status stay its own.
    home = os.path.join(directory, "home")
    os.mkdir(home)
    settings = {"HOME": home, "XDG_CACHE_HOME": "", "KAIROS_VERBOSE": 1, "KAIROS_OUTPUT_FORMATS": "db"}
    bare = run_process([PROGRAM, "split", "0.2"], TIMEOUT, cwd=directory, env=environment())
    out, err, status = kairos(["split", "0.2"], directory, KAIROS_OUTPUT_PATH="default", **settings)
    check(status == 0, err)
    default_place = os.path.join(home, ".cache", "kairos", "symbols")
    check(symbol_cache_line(err)[2] == default_place, f"the default place: {err!r}")
    check(os.listdir(default_place), f"files in {default_place}")
    out, err, status = kairos(["split", "0.2"], directory, KAIROS_OUTPUT_PATH="off", KAIROS_SYMBOL_CACHE="off",
                              **{**settings, "HOME": os.path.join(directory, "other-home")})
    check(status == 0, err)
    check(symbol_cache_line(err)[1:3] == (0, None), f"off: {err!r}")
    check(not os.path.exists(os.path.join(directory, "other-home")), "off writes nothing")
    unwritable = "/proc/kairos-symbol-cache"
    out, err, status = kairos(["split", "0.2"], directory, KAIROS_OUTPUT_PATH="named", KAIROS_SYMBOL_CACHE=unwritable,
                              **settings)
    check(status == bare.returncode == 0, f"{status} {err}")
    check(re.sub(r"\d+", "N", out) == re.sub(r"\d+", "N", bare.stdout.decode()), f"{out!r}")
    said = [line for line in err.splitlines() if line.startswith("[kairos] the symbol cache was not updated")]
    check(len(said) == 1 and unwritable in said[0] and "KAIROS_SYMBOL_CACHE" in said[0], f"said once: {err!r}")
    check(os.path.exists(os.path.join(directory, "named.db")), "the profile is written all the same")
    out, err, status = kairos(["split", "0.2"], directory, KAIROS_OUTPUT_PATH="unnamed",
                              **{**settings, "HOME": "/proc/kairos-home"})
    check(status == 0, err)
    check(not any(line.startswith("[kairos] the symbol cache was not updated") for line in err.splitlines()),
          f"a default place that cannot be written is not said: {err!r}")
    check("the symbol cache was not updated" in symbol_cache_line(err)[3], f"but the verbose line says it: {err!r}")


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
    # std::thread's start routine (libstdc++'s execute_native_thread_routine, unnamed where
    # libstdc++ is stripped) sits right on libc's start_thread, as under perf: kairos's
    # thread-start trampoline is folded out of every stack.
    root = chain[positions[2] - 1]
    check(root == "execute_native_thread_routine" or root.startswith("libstdc++"),
          f"the thread's start routine is its root: {joined}")
    for _, frames in sampled_stacks(db):
        check(not unfolded_kairos_frames(frames), f"no kairos frame in a stack: {frames}")


def test_start_routine_is_each_thread_root(directory):
    """A thread's start routine is the root of its stacks, right on libc's start_thread, as without
    kairos: its thread-start trampoline is folded out on every CPU-time source (ring, perf signal,
    timer; blocking_routine's thread blocks every signal, so it is sampled through a ring anyway)."""
    for source in ("ring", "perf", "timer"):
        place = os.path.join(directory, source)
        os.mkdir(place)
        out, err, status = kairos(["start-routines", "0.3"], place, ["--freq", "1000"],
                                  KAIROS_SAMPLING_CPUTIME_SOURCE=source)
        check(status == 0, f"{source}: {status} {err}")
        db = database(place)
        rooted = {}
        for _, frames in sampled_stacks(db):
            names = [function for function, _ in frames]
            check(not unfolded_kairos_frames(frames), f"{source}: no kairos frame in a stack: {names}")
            for routine in ("signalled_routine", "blocking_routine"):
                if routine not in names:
                    continue
                at = names.index(routine)
                check(at + 1 < len(names) and names[at + 1] == "start_thread",
                      f"{source}: {routine} is its thread's root, on start_thread: {' <- '.join(names)}")
                rooted[routine] = rooted.get(routine, 0) + 1
        wanted = ["signalled_routine"]
        if metadata(db, "sampling_threads_by_ring") != "0":
            wanted.append("blocking_routine")
        check(all(rooted.get(routine, 0) >= 20 for routine in wanted),
              f"{source} ({metadata(db, 'sampling_cpu_source')}): samples under each routine {rooted}")


def test_sigterm_leaves_valid_database(directory):
    process = subprocess.Popen([KAIROS_RUN, "--freq", "500", "--", PROGRAM, "busy-until-signal"],
                               cwd=directory, env=environment(KAIROS_FLUSH_INTERVAL="0.2"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(read_line(process, TIMEOUT) == b"ready\n", "started")
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    communicate(process, TIMEOUT)
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
        work = dict(re.findall(r"(loads|allocations|forks)=(\d+)", out))
        check(all(int(work.get(kind, 0)) > 0 for kind in ("loads", "allocations", "forks")),
              f"round {round}: every kind of churn ran: {out!r}")
        path = os.path.join(directory, "kairos-output", f"stress-{round}.db")
        db = sqlite3.connect(path)
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"{path} is intact")
        # compute_one_quarter spins until its thread has used 0.75 s of CPU: its samples' weights
        # must add up to that, however the other four threads churn around it.
        spin_s = total_of(function_totals(db), "compute_one_quarter") / 1e9
        check(abs(spin_s - 0.75) <= 0.15 * 0.75,
              f"round {round}: compute_one_quarter weighs {spin_s:.3f} s for 0.75 s of CPU (±15%)")
        threads = db.execute("SELECT COUNT(DISTINCT thread) FROM sample").fetchone()[0]
        check(threads >= 4, f"round {round}: the churning threads were sampled too: {threads} threads")


def test_program_sigprof_handler_keeps_working(directory):
    plain = run_process([PROGRAM, "own-sigprof", "1"], TIMEOUT)
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


def files_open_under(pid, folder):
    """Paths of the process's open files that lie in `folder` (unnamed ones read "#N (deleted)")."""
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(folder + "/"):
                found.add(target)
    except OSError:
        pass
    return found


def test_writer_threads_and_temporary_files(directory):
    for use_files in ("true", "false"):
        # A private TMPDIR: the spill file must appear there (and only with the setting on), and
        # nothing may be left there afterwards.
        spill_folder = os.path.join(directory, f"tmp-{use_files}")
        os.mkdir(spill_folder)
        process = subprocess.Popen(
            [KAIROS_RUN, "--freq", "1000", "--", PROGRAM, "split", "1.2"], cwd=directory,
            env=environment(KAIROS_SAMPLING_ALLOCATOR_SIZE="1", KAIROS_USE_TEMPORARY_FILES=use_files,
                            KAIROS_OUTPUT_PATH=f"kairos-output/files-{use_files}", TMPDIR=spill_folder),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = set()
        give_up = time.monotonic() + TIMEOUT
        # kairos-run execs the program: the pid is the program's.
        while process.poll() is None and time.monotonic() < give_up:
            seen |= files_open_under(process.pid, spill_folder)
            time.sleep(0.01)
        out, err = (stream.decode() for stream in communicate(process, TIMEOUT))
        check(process.returncode == 0, err)
        if use_files == "true":
            check(seen, f"a spill file was open in TMPDIR while the program ran: {seen}")
        else:
            check(not seen, f"no spill file with KAIROS_USE_TEMPORARY_FILES=false: {seen}")
        check(not os.listdir(spill_folder), f"nothing left in TMPDIR: {os.listdir(spill_folder)}")
        db = sqlite3.connect(os.path.join(directory, "kairos-output", f"files-{use_files}.db"))
        weight_s = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0] / 1e9
        cpu_s = sum(cpu_split(out)) / 1e9
        check(abs(weight_s - cpu_s) <= 0.10 * cpu_s,
              f"temporary files {use_files}: weights {weight_s:.3f} s for {cpu_s:.3f} s of CPU (±10%)")


def test_outputs_and_kairos_report(directory):
    # 1.2 s at 1 kHz: about 1,200 samples hold a 75% share within 5 points (share_tolerance).
    out, err, status = kairos(["split", "1.2"], directory, ["--freq", "1000"])
    check(status == 0, err)
    three, one = cpu_split(out)
    summary = [line for line in err.splitlines() if line.startswith("[kairos]")]
    check(len(summary) == 1 and re.match(r"\[kairos\] \d+ samples, 0 regions on 3 threads; outputs: ", summary[0]),
          f"{summary}")
    for extension in (".db", ".txt", ".trace.json", ".folded"):
        check(extension in summary[0], f"{extension} listed")
    text = open(only("*.txt", directory)).read()
    check("compute_three_quarters" in text and "top functions" in text, "the text report")
    trace = json.load(open(only("*.trace.json", directory)))
    check(trace["traceEvents"] and "stackFrames" in trace, "the trace")
    db_path = only("*.db", directory)
    samples, sampled_ns = sqlite3.connect(db_path).execute("SELECT COUNT(*), SUM(weight_ns) FROM sample").fetchone()
    sampled_us = sampled_ns / 1e3

    def check_folded(lines, source):
        # Checked against the program's own CPU split and the raw sample rows, not against the
        # other writer of folded stacks (finalize and kairos-report share one function).
        weights = {}
        for line in lines:
            stack, _, weight = line.rpartition(" ")
            check(stack and weight.isdigit(), f"{source}: 'a;b;c weight' lines: {line!r}")
            weights[stack] = weights.get(stack, 0) + int(weight)
        total = sum(weights.values())
        check(abs(total - sampled_us) <= len(lines) + 1,
              f"{source}: folded weights add up to the samples': {total} vs {sampled_us:.0f} µs")
        three_us = sum(w for stack, w in weights.items() if "compute_three_quarters" in stack)
        one_us = sum(w for stack, w in weights.items() if "compute_one_quarter" in stack)
        share = 100.0 * three_us / max(1, three_us + one_us)
        truth = 100.0 * three / (three + one)
        tolerance = share_tolerance(samples, truth)
        check(abs(share - truth) <= tolerance,
              f"{source}: compute_three_quarters {share:.1f}% vs {truth:.1f}% (±{tolerance:.1f} for {samples} samples)")
    check_folded(open(only("*.folded", directory)).read().splitlines(), "finalize's .folded")
    for format in ("text", "trace", "folded", "json"):
        result = run_process([KAIROS_REPORT, db_path, "--format", format], TIMEOUT)
        check(result.returncode == 0 and result.stdout, f"kairos-report --format {format}: {result.stderr!r}")
        if format == "folded":
            check_folded(result.stdout.decode().splitlines(), "kairos-report --format folded")
    bad = run_process([KAIROS_REPORT, os.path.join(directory, "nothing.db")], TIMEOUT)
    check(bad.returncode != 0, "a missing database is an error")


def test_speedscope_file(directory):
    """speedscope's format (its published schema's required fields), checked against the database and
    the program's own 75/25 CPU split."""
    out, err, status = kairos(["split", "1.2"], directory, ["--freq", "1000"],
                              KAIROS_OUTPUT_FORMATS="db,speedscope")
    check(status == 0, err)
    three, one = cpu_split(out)
    db_path = only("*.db", directory)
    document = json.load(open(only("*.speedscope.json", directory)))
    check(document["$schema"] == "https://www.speedscope.app/file-format-schema.json", "speedscope's schema")
    check(re.search(rf"{os.path.basename(PROGRAM)} split 1\.2 \(samples stand for .* of CPU time", document["name"]),
          f"named after the command, with what the samples cover: {document['name']}")
    frames = document["shared"]["frames"]
    check(all(isinstance(frame.get("name"), str) for frame in frames), "every frame has a name")
    names = [frame["name"] for frame in frames]
    check(len(set(names)) == len(names), "frames are shared by name")
    db = sqlite3.connect(db_path)
    by_thread = dict(db.execute(
        "SELECT thread.tid, SUM(weight_ns) FROM sample JOIN thread ON thread.id = sample.thread "
        "WHERE stack IS NOT NULL GROUP BY thread.tid"))
    profiles = document["profiles"]
    check(len(profiles) == len(by_thread), f"one profile per sampled thread: {len(profiles)} vs {len(by_thread)}")
    check([p["endValue"] for p in profiles] == sorted((p["endValue"] for p in profiles), reverse=True),
          "the heaviest thread first")
    weights = {"compute_three_quarters": 0, "compute_one_quarter": 0}
    for profile in profiles:
        check(profile["type"] == "sampled" and profile["unit"] == "nanoseconds" and profile["startValue"] == 0,
              f"a sampled profile in nanoseconds: {profile['name']}")
        check(len(profile["samples"]) == len(profile["weights"]), "one weight per sample")
        check(sum(profile["weights"]) == profile["endValue"], "endValue is the profile's weight")
        tid = int(profile["name"].split("tid ")[1].split(",")[0].rstrip(")"))
        check(profile["endValue"] == by_thread[tid], f"thread {tid}: the database's weight")
        for stack, weight in zip(profile["samples"], profile["weights"]):
            check(all(0 <= index < len(frames) for index in stack), "indices into the shared frames")
            # A worker's stack starts at the thread's creation (the main thread's, sampled during
            # exit on a loaded machine, may start in a destructor: only workers are checked).
            if any("compute_" in names[index] for index in stack):
                check(names[stack[0]] in ("_start", "__clone3", "__clone", "clone3", "clone"),
                      f"root first: {names[stack[0]]}")
            for function in weights:
                if any(function in names[index] for index in stack):
                    weights[function] += weight
    share = 100.0 * weights["compute_three_quarters"] / max(1, sum(weights.values()))
    truth = 100.0 * three / (three + one)
    check(abs(share - truth) <= 5.0, f"compute_three_quarters {share:.1f}% of the two vs {truth:.1f}% by CPU time "
                                     f"({how_sampled(db)})")
    report = run_process([KAIROS_REPORT, db_path, "--format", "speedscope"], TIMEOUT)
    check(report.returncode == 0 and json.loads(report.stdout)["profiles"] == profiles,
          f"kairos-report --format speedscope writes the same profiles: {report.stderr!r}")


def test_flamegraph_file(directory):
    """The flame graph SVG, read as a browser's DOM would be: a graph for all threads and one per
    thread, boxes as wide as their share (the 75/25 split within share_tolerance), tooltips, nothing fetched."""
    import xml.etree.ElementTree as ElementTree
    out, err, status = kairos(["split", "1.2"], directory, ["--freq", "1000"],
                              KAIROS_OUTPUT_FORMATS="db,flamegraph")
    check(status == 0, err)
    three, one = cpu_split(out)
    path = only("*.svg", directory)
    text = open(path).read()
    outside = [u for u in re.findall(r"(?:https?:)?//[^\s\"'<>)]+", text) if "www.w3.org/2000/svg" not in u]
    check(not outside and "<image" not in text and "@import" not in text, f"nothing fetched: {outside}")
    svg = "{http://www.w3.org/2000/svg}"
    root = ElementTree.parse(path).getroot()
    check(root.find(f"{svg}script") is not None, "the script is inline")
    graphs = root.findall(f"{svg}g")
    names = [g.get("data-name") for g in graphs]
    # The two workers, and the main thread too when it ran long enough to be sampled (a loaded machine).
    sampled = sqlite3.connect(only("*.db", directory)).execute(
        "SELECT COUNT(DISTINCT thread) FROM sample WHERE stack IS NOT NULL").fetchone()[0]
    check(names[0] == "all threads" and len(names) == 1 + sampled and sampled >= 2,
          f"all threads, then each of the {sampled} sampled threads: {names}")
    frames = graphs[0].findall(f"{svg}g")

    def share(function):
        return sum(float(f.get("data-w")) for f in frames if function in f.find(f"{svg}title").text)
    three_share, one_share = share("compute_three_quarters"), share("compute_one_quarter")
    truth = 100.0 * three / (three + one)
    samples = sqlite3.connect(only("*.db", directory)).execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    tolerance = share_tolerance(samples, truth)
    check(abs(100.0 * three_share - truth) <= tolerance and abs(100.0 * one_share - (100.0 - truth)) <= tolerance,
          f"widths {100 * three_share:.1f}% / {100 * one_share:.1f}% of the root vs {truth:.1f}% by CPU time "
          f"({how_sampled(sqlite3.connect(only('*.db', directory)))})")
    for frame in frames:
        title = frame.find(f"{svg}title").text
        check(re.search(r" \(total [0-9.]+ ms, [0-9.]+%; self [0-9.]+ ms\)$", title), f"a tooltip: {title}")
        rect = frame.find(f"{svg}rect")
        check(abs(float(rect.get("width")) + 0.5 - 1200 * float(frame.get("data-w"))) <= 0.6 or
              float(rect.get("width")) == 0.1, "each box drawn as wide as its share")
    report = run_process([KAIROS_REPORT, only("*.db", directory), "--format", "flamegraph"], TIMEOUT)
    check(report.returncode == 0 and report.stdout.decode() == text,
          f"kairos-report --format flamegraph draws the same picture: {report.stderr!r}")


def test_html_report(directory):
    """The HTML report, read without a browser: every section, the top functions by the program's
    75/25 CPU split, the flame graph inline, nothing fetched; kairos-report writes the same page."""
    import html_page
    out, err, status = kairos(["split", "1.2"], directory, ["--freq", "1000"], KAIROS_OUTPUT_FORMATS="db,html")
    check(status == 0, err)
    check(re.search(r"outputs: \S+\.db, \S+\.html", err), f"the exit line names the page: {err!r}")
    three, one = cpu_split(out)
    path = only("*.html", directory)
    page = html_page.read(path)
    check(page.sections == ["summary", "functions", "flame-graph", "regions", "timeline", "settings"],
          f"the sections, in order: {page.sections}")
    check(not page.fetches, f"nothing fetched: {page.fetches}")
    check(page.svgs == 2 and page.scripts == 2, "the flame graph and the timeline inline, with their scripts")
    rows = page.tables["function-table"]
    check([text for text, _ in rows[0]] == ["self %", "self ms", "total %", "total ms", "function"], f"{rows[0]}")
    self_ms = {cells[4][0]: float(cells[1][1]) for cells in rows[1:]}
    three_ms = sum(ms for name, ms in self_ms.items() if "compute_three_quarters" in name)
    one_ms = sum(ms for name, ms in self_ms.items() if "compute_one_quarter" in name)
    check(three_ms > 0 and one_ms > 0, f"both workers among the top functions: {sorted(self_ms)}")
    truth = 100.0 * three / (three + one)
    check(abs(100.0 * three_ms / (three_ms + one_ms) - truth) <= 5.0,
          f"compute_three_quarters {100 * three_ms / (three_ms + one_ms):.1f}% of the two vs {truth:.1f}% "
          f"({how_sampled(sqlite3.connect(only('*.db', directory)))})")
    summary = dict((cells[0][0], cells[1][0]) for cells in page.tables["summary-table"])
    samples = sqlite3.connect(only("*.db", directory)).execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    check(summary["samples"].startswith(f"{samples} standing for"), f"the summary counts the samples: {summary}")
    check(summary["command"].endswith("split 1.2") and summary["ended by"] == "exit", f"{summary}")
    check("KAIROS_SAMPLING_FREQ" in dict((c[0][0], c[1][0]) for c in page.tables["settings-table"]), "the settings")
    report = run_process([KAIROS_REPORT, only("*.db", directory), "--format", "html"], TIMEOUT)
    check(report.returncode == 0 and report.stdout.decode() == open(path).read(),
          f"kairos-report --format html writes the same page: {report.stderr!r}")


def test_coverage_stated_in_every_report(directory):
    """A worker that blocks every signal burns 0.8 s of CPU beside the main thread's 0.4 s, sampled
    by the perf signal (the default ring would sample the worker), and sampling starts 0.2 s late: every output
    that shows shares states how much of the program's CPU time the samples stand for and what was
    not sampled (the figures the metadata holds), the HTML summary first; kairos-report's outputs say
    the same."""
    import html_page
    # 5 kHz: each perf-signal sample weighs the mean period, so the sampled sum carries Poisson
    # noise of sqrt(CPU time x period): 22 ms on the main thread's 0.24 s at 500 Hz, against a
    # margin of about 33 ms below (a fresh clone's run under load failed it once), 7 ms at 5 kHz.
    out, err, status = kairos(["blocked-worker", "1.2"], directory, ["--freq", "5000"], KAIROS_SAMPLING_DELAY="0.2",
                              KAIROS_SAMPLING_CPUTIME_SOURCE="perf",
                              KAIROS_OUTPUT_FORMATS="db,text,json,html,flamegraph,speedscope")
    check(status == 0, err)
    match = re.search(r"worker=(\d+) main=(\d+)", out)
    check(match, f"the program printed its CPU times: {out!r}")
    program_cpu_ns = int(match.group(1)) + int(match.group(2))
    db = database(directory)
    metadata = dict(db.execute("SELECT key, value FROM metadata"))
    sampled_ns = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0]
    recorded_cpu_ns = int(metadata["program_cpu_ns"])
    check(abs(recorded_cpu_ns - program_cpu_ns) < 0.1 * program_cpu_ns,
          f"the program's CPU time is recorded: {recorded_cpu_ns} vs {program_cpu_ns} measured by the program")
    blocked_ns = int(metadata["unsampled_cpu_ns"])
    before_ns = int(metadata["coverage.before_sampling_ns"])
    after_last_ns = int(metadata["coverage.after_last_sample_ns"])
    handler_ns = int(metadata["coverage.signal_handler_ns"])
    shortfall_ns = int(metadata["coverage.weights_shortfall_ns"])
    lost_ns = int(metadata["lost_cpu_ns"])  # what lost or throttled samples stood for: said apart
    dropped = int(metadata["dropped.samples"])
    # Each part is measured: with the weights they add up to the whole (the perf signal's samples
    # weigh its mean period, so only their shortfall is left: chance, within a few periods a thread).
    check(metadata["coverage.paused_ns"] == "0", f"sampling was never off once on: {metadata}")
    check(abs(shortfall_ns) <= 0.05 * recorded_cpu_ns, f"the weights' shortfall {shortfall_ns} ns is chance")
    # The CPU time the main thread had used when its first sample came, less that sample's weight:
    # all before sampling began (the worker blocks the signal and has its ring by then).
    before_first_ns = db.execute("SELECT c.value - s.weight_ns FROM sample AS s JOIN counter AS c ON c.thread = s.thread "
                                 "AND c.time_ns = s.time_ns ORDER BY s.time_ns LIMIT 1").fetchone()[0]
    check(before_first_ns > 1e6 and before_ns >= 0.5 * before_first_ns,
          f"the CPU time before the sampling delay ({before_first_ns} ns) is measured: {before_ns} ns")
    check(blocked_ns <= 0.05 * int(match.group(1)),
          f"the blocked worker's time before the delay is not called blocked: {blocked_ns} ns")
    percent = f"({100.0 * sampled_ns / recorded_cpu_ns:.1f}%)"
    whole = f"samples stand for {sampled_ns * 1e-9:.3f} s of the program's {recorded_cpu_ns * 1e-9:.3f} s of CPU time {percent}"
    unseen = [f"{before_ns * 1e-9:.3f} s before sampling began (KAIROS_SAMPLING_DELAY=0.2 s)"]
    if blocked_ns >= 1e6:
        unseen.append(f"{blocked_ns * 1e-9:.3f} s in {metadata['unsampled_threads']} thread"
                      f"{'' if metadata['unsampled_threads'] == '1' else 's'} that blocked the sampling signal")
    if after_last_ns >= 1e6:
        unseen.append(f"{after_last_ns * 1e-9:.3f} s after a thread's last sample")
    if handler_ns >= 1e6:
        unseen.append(f"{handler_ns * 1e-9:.3f} s in kairos's signal handler")
    if dropped > 0:
        unseen.append(f"{lost_ns * 1e-9:.3f} s in {dropped} lost sample{'' if dropped == 1 else 's'}")

    def states_coverage(text, where):
        check(whole in text, f"{where} says what the samples cover ({whole!r}): {text[:600]!r}")
        for part in unseen:
            check(part in text, f"{where} says what was not sampled ({part!r}): {text[:600]!r}")

    with open(only("*.txt", directory), encoding="utf-8") as file:
        states_coverage(file.read().split("\n\n", 2)[1], "the text report's head")
    summary = json.load(open(only("*[0-9].json", directory)))["profile"]["coverage"]
    check(summary["program_cpu_ns"] == recorded_cpu_ns and summary["sampled_cpu_ns"] == sampled_ns
          and summary["not_sampled"]["blocked_signal_cpu_ns"] == blocked_ns
          and summary["not_sampled"]["before_sampling_cpu_ns"] == before_ns
          and summary["not_sampled"]["weights_shortfall_ns"] == shortfall_ns, f"the JSON summary's figures: {summary}")
    states_coverage(summary["text"], "the JSON summary")
    page = html_page.read(only("*.html", directory))
    first = page.tables["summary-table"][0]
    check(first[0][0] == "coverage", f"the HTML summary's first row is the coverage: {first}")
    states_coverage(first[1][0], "the HTML summary")
    with open(only("*.svg", directory), encoding="utf-8") as file:
        states_coverage(file.read().replace("&#39;", "'"), "the flame graph")
    speedscope = json.load(open(only("*.speedscope.json", directory)))
    states_coverage(speedscope["name"], "speedscope's title")
    for format_name, read in (("text", lambda text: text), ("json", lambda text: json.loads(text)["coverage"]["text"]),
                              ("speedscope", lambda text: json.loads(text)["name"])):
        report = run_process([KAIROS_REPORT, only("*.db", directory), "--format", format_name], TIMEOUT)
        check(report.returncode == 0, f"kairos-report --format {format_name}: {report.stderr!r}")
        states_coverage(read(report.stdout.decode()), f"kairos-report --format {format_name}")


def node_program():
    """node's path, or a skip: the JIT tests need it."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        skip("node is not installed (Debian's nodejs; scripts/install-deps.sh installs it)")
    return node


def perf_program():
    """perf's path, or a skip: the tests that compare shares with perf need it."""
    perf = shutil.which("perf")
    if not perf:
        skip("perf is not installed (Debian's linux-perf)")
    return perf


NODE_SCRIPT = """
function mixer(n) { let x = 0; for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; return x; }
const end = Date.now() + 1500; let sum = 0;
while (Date.now() < end) sum += mixer(200000);
console.log(sum > 0 ? "mixed" : "none");
"""


def test_jit_code_named_by_its_perf_map(directory):
    # node --perf-basic-prof writes /tmp/perf-<pid>.map as it compiles: its JavaScript functions
    # by name, not one row per instruction address.
    node = node_program()
    bare = run_process([node, "-e", NODE_SCRIPT], TIMEOUT, cwd=directory, env=environment())
    result = run_process([KAIROS_RUN, "--", node, "--perf-basic-prof", "-e", NODE_SCRIPT], TIMEOUT,
                         cwd=directory, env=environment())
    check(result.returncode == bare.returncode == 0 and result.stdout == bare.stdout == b"mixed\n",
          f"node's output and status unchanged: {result.stdout!r} {result.stderr.decode()!r}")
    db = database(directory)
    for (pid,) in db.execute("SELECT pid FROM process"):  # node leaves its map behind
        if os.path.exists(f"/tmp/perf-{pid}.map"):
            os.unlink(f"/tmp/perf-{pid}.map")
    totals = function_totals(db)
    whole = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0]
    mixer = total_of(totals, "mixer")
    check(whole and mixer > 0.3 * whole, f"mixer named in {mixer / max(whole or 1, 1):.0%} of the samples: "
          f"{sorted(totals.items(), key=lambda item: -item[1])[:8]}")
    modules = [m for (m,) in db.execute(
        "SELECT DISTINCT module.value FROM frame JOIN string AS module ON module.id = frame.module "
        "JOIN string AS function ON function.id = frame.function WHERE function.value LIKE '%mixer%'")]
    check(modules and all(re.fullmatch(r"/tmp/perf-\d+\.map", m) for m in modules),
          f"mixer's frames come from the perf map: {modules}")
    named = int(db.execute("SELECT value FROM metadata WHERE key = 'jit_map.functions'").fetchone()[0])
    check(named > 0, f"the map named {named} functions")


def test_jit_shares_match_perf(directory):
    # One run of the node program, under perf record and kairos at once (perf follows the process
    # kairos profiles; runs apart differ by up to 8 points here), perf's samples kept to the span of
    # kairos's (both on CLOCK_MONOTONIC: node's loading, before kairos starts, is 2-3 points of
    # perf's): mixer's share of the main thread within 3 points of perf's, which walks JIT frames by
    # frame pointers.
    node, perf = node_program(), perf_program()
    data = os.path.join(directory, "perf.data")
    result = run_process([perf, "record", "-q", "-k", "CLOCK_MONOTONIC", "-F", "999", "-g", "-e", "cpu-clock",
                          "-o", data, "--",
                          KAIROS_RUN, "--", node, "--perf-basic-prof", "-e", NODE_SCRIPT], TIMEOUT,
                         cwd=directory, env=environment(KAIROS_SAMPLING_FREQ=999))
    if result.returncode != 0 and not os.path.exists(data):
        skip(f"perf record cannot run here: {result.stderr.decode(errors='replace')[-300:]}")
    check(result.returncode == 0 and result.stdout == b"mixed\n", f"node ran: {result.stderr.decode()!r}")
    db = database(directory)
    samples = perf_main_thread_samples(perf, data, directory, db)
    for (pid,) in db.execute("SELECT pid FROM process"):
        if os.path.exists(f"/tmp/perf-{pid}.map"):
            os.unlink(f"/tmp/perf-{pid}.map")
    check(len(samples) > 500, f"perf recorded {len(samples)} samples of the program")
    perf_share = sum(1 for block in samples if "mixer" in block) / len(samples)
    totals, whole = inclusive_weights(db, MAIN_THREAD)
    kairos_share = sum(weight for name, weight in totals.items() if "mixer" in name) / max(whole, 1)
    print(f"mixer: kairos {kairos_share:.1%}, perf {perf_share:.1%} ({len(samples)} samples)")
    check(abs(kairos_share - perf_share) <= 0.03, f"mixer within 3 points of perf's: kairos {kairos_share:.1%}, "
          f"perf {perf_share:.1%}")


# Sorting and JSON, as node programs spend their time; `outer` runs from start to end.
NODE_WORK_SCRIPT = """
function makeRecords(n, seed) {
  const out = []; let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push({ id: i, key: x % 100000, name: "item" + (x % 977), tags: [x % 7, x % 11, x % 13] });
  }
  return out;
}
function sortRecords(records) { return records.slice().sort((a, b) => a.key - b.key || a.id - b.id); }
function roundTrip(records) { return JSON.parse(JSON.stringify(records)); }
function checksum(records) { let s = 0; for (const r of records) s = (s * 31 + r.key + r.tags[1]) % 1000003; return s; }
function outer(seconds) {
  const end = Date.now() + seconds * 1000; let total = 0, round = 0;
  while (Date.now() < end) total = (total + checksum(sortRecords(roundTrip(makeRecords(20000, round++))))) % 1000003;
  return total;
}
console.log(outer(%SECONDS%) >= 0 ? "worked" : "none");
"""
NODE_WORK_FUNCTIONS = ("outer", "roundTrip", "sortRecords", "makeRecords", "checksum")


MAIN_THREAD = "thread.tid = (SELECT pid FROM process WHERE process.id = thread.process)"


def perf_main_thread_samples(perf, data, directory, db):
    """perf script's samples (blocks: a header, then the frames) of the profiled process's main
    thread, within the span of kairos's samples of it (both on CLOCK_MONOTONIC). The main thread
    alone: a ring the writer could not drain in time (a loaded machine) loses samples of the busiest
    thread, which thins its share of the whole but not the shares within it."""
    script = run_process([perf, "script", "-i", data, "-F", "comm,tid,time,ip,sym"], TIMEOUT, cwd=directory)
    pid = db.execute("SELECT pid FROM process").fetchone()[0]
    first, last = db.execute(f"SELECT MIN(time_ns), MAX(time_ns) FROM sample JOIN thread ON thread.id = sample.thread "
                             f"WHERE {MAIN_THREAD}").fetchone()
    samples = []
    for block in script.stdout.decode(errors="replace").split("\n\n"):
        header = block.strip().split("\n")[0].split()
        if len(header) < 3 or not header[-1].rstrip(":").replace(".", "").isdigit() or header[-2] != str(pid):
            continue
        if first <= float(header[-1].rstrip(":")) * 1e9 <= last:
            samples.append(block)
    return samples


def node_and_perf_map_cleanup(db):
    for (pid,) in db.execute("SELECT pid FROM process"):  # node leaves its map behind
        if os.path.exists(f"/tmp/perf-{pid}.map"):
            os.unlink(f"/tmp/perf-{pid}.map")


def inclusive_weights(db, thread_condition="1", sample_condition="1"):
    """Each function's inclusive CPU time (ns) over the samples of the threads the condition keeps,
    and their whole: a stack counts once for a function however often it holds it."""
    parent_and_name = {stack: (parent, name) for stack, parent, name in db.execute(
        "SELECT stack.id, stack.parent, string.value FROM stack JOIN frame ON frame.id = stack.frame "
        "JOIN string ON string.id = frame.function")}
    totals, whole = {}, 0
    for stack, weight in db.execute(
            f"SELECT stack, SUM(weight_ns) FROM sample JOIN thread ON thread.id = sample.thread "
            f"WHERE stack IS NOT NULL AND {thread_condition} AND {sample_condition} GROUP BY stack"):
        whole += weight
        names, node = set(), stack
        while node is not None:
            node, name = parent_and_name[node]
            names.add(name)
        for name in names:
            totals[name] = totals.get(name, 0) + weight
    return totals, whole


def share_of(totals, whole, fragment):
    # A JS function's perf-map name: "JS:*outer /path:22:15" (optimized) or "JS:~outer ..." (not).
    pattern = re.compile(r"JS:[*~^+]?" + re.escape(fragment) + r"\b")
    return sum(weight for name, weight in totals.items() if pattern.search(name)) / max(whole, 1)


def test_jit_stacks_whole_under_the_ring(directory):
    # The default source: node's stacks, walked off the thread from the ring's copies (and the
    # kernel's frame-pointer chain beyond them), reach the function that runs the whole time; no
    # sample weighs more than two periods; lost time is counted, not charged to a stack.
    node = node_program()
    script = NODE_WORK_SCRIPT.replace("%SECONDS%", "2.5")
    result = run_process([KAIROS_RUN, "--freq", "999", "--", node, "--perf-basic-prof",
                          "--interpreted-frames-native-stack", "-e", script], TIMEOUT,
                         cwd=directory, env=environment())
    check(result.returncode == 0 and result.stdout == b"worked\n",
          f"node's output and status unchanged: {result.stdout!r} {result.stderr.decode()!r}")
    db = database(directory)
    node_and_perf_map_cleanup(db)
    if cpu_source(db) != "perf ring buffer":
        skip(f"the kernel refuses a ring counting its own time here: kairos used {cpu_source(db)!r}")
    main_thread = MAIN_THREAD
    # The main thread's samples while outer runs: node's start (0.12 s of CPU alone, more on a
    # loaded machine) and exit are not outer's. Its span: from the first sample holding it to the
    # last.
    totals, _ = inclusive_weights(db, main_thread)
    outer_frames = [name for name in totals if re.search(r"JS:[*~^+]?outer\b", name)]
    check(outer_frames, f"outer is named: {sorted(totals.items(), key=lambda item: -item[1])[:12]}")
    marks = ",".join("?" * len(outer_frames))
    first, last = db.execute(
        "WITH RECURSIVE up (sample, node) AS (SELECT sample.id, sample.stack FROM sample WHERE stack IS NOT NULL "
        "  UNION ALL SELECT up.sample, stack.parent FROM up JOIN stack ON stack.id = up.node "
        "  WHERE stack.parent IS NOT NULL) "
        "SELECT MIN(sample.time_ns), MAX(sample.time_ns) FROM up JOIN stack ON stack.id = up.node "
        "JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function "
        f"JOIN sample ON sample.id = up.sample WHERE string.value IN ({marks})", outer_frames).fetchone()
    totals, whole = inclusive_weights(db, main_thread, f"sample.time_ns BETWEEN {first} AND {last}")
    outer = share_of(totals, whole, "outer")
    cut = totals.get("[stack cut]", 0) / max(whole, 1)
    print(f"main thread while outer runs: outer {outer:.1%} inclusive, {cut:.1%} of its time in cut stacks "
          f"({how_sampled(db)})")
    check(outer >= 0.95, f"outer holds {outer:.1%} of the main thread's samples while it runs (>= 95%), {cut:.1%} cut: "
          f"{sorted(totals.items(), key=lambda item: -item[1])[:12]}")
    # A ring sample weighs at most two periods; a thread's first 20 ms are on the POSIX timer, which
    # fires at scheduler ticks (4 ms at 250 Hz: 4 periods). Lost samples' time once weighed 220.
    period_ns = 1e9 / 999
    heaviest = db.execute("SELECT MAX(weight_ns) FROM sample").fetchone()[0]
    check(heaviest <= 5 * period_ns, f"the heaviest sample weighs {heaviest / period_ns:.2f} periods (<= 5)")
    keys = dict(db.execute("SELECT key, value FROM metadata WHERE key IN "
                           "('lost_cpu_ns', 'sampling_cut_stacks', 'sampling_chained_stacks')"))
    check(len(keys) == 3, f"lost time and cut stacks are in the metadata: {keys}")
    cut_samples = db.execute(
        "WITH RECURSIVE up (sample, node) AS (SELECT id, stack FROM sample WHERE stack IS NOT NULL "
        "  UNION ALL SELECT up.sample, stack.parent FROM up JOIN stack ON stack.id = up.node "
        "  WHERE stack.parent IS NOT NULL) "
        "SELECT COUNT(*) FROM up JOIN stack ON stack.id = up.node JOIN frame ON frame.id = stack.frame "
        "JOIN string ON string.id = frame.function WHERE stack.depth = 0 AND string.value = '[stack cut]'"
    ).fetchone()[0]
    check(int(keys["sampling_cut_stacks"]) == cut_samples,
          f"sampling_cut_stacks {keys['sampling_cut_stacks']} counts the {cut_samples} samples rooted at [stack cut]")


def test_jit_mix_shares_match_perf(directory):
    # Sorting and JSON under perf record -g and kairos at once (as jit_shares_match_perf): the JS
    # functions' inclusive shares of the main thread within 3 points of perf's, which follows frame
    # pointers. The three that hold most of it: makeRecords and checksum (2-13%) differ by up to 3.4
    # points, since a JIT reuses the addresses of code it freed and the two name an address by the
    # perf map at different times (kairos when it first meets it, perf at the end).
    node, perf = node_program(), perf_program()
    data = os.path.join(directory, "perf.data")
    script = os.path.join(directory, "work.js")  # a file, as node programs are run
    with open(script, "w", encoding="utf-8") as file:
        file.write(NODE_WORK_SCRIPT.replace("%SECONDS%", "3"))
    result = run_process([perf, "record", "-q", "-k", "CLOCK_MONOTONIC", "-F", "999", "-g", "-e", "cpu-clock",
                          "-o", data, "--", KAIROS_RUN, "--", node, "--perf-basic-prof",
                          "--interpreted-frames-native-stack", script],
                         TIMEOUT, cwd=directory, env=environment(KAIROS_SAMPLING_FREQ=999))
    if result.returncode != 0 and not os.path.exists(data):
        skip(f"perf record cannot run here: {result.stderr.decode(errors='replace')[-300:]}")
    check(result.returncode == 0 and result.stdout == b"worked\n", f"node ran: {result.stderr.decode()!r}")
    db = database(directory)
    samples = perf_main_thread_samples(perf, data, directory, db)  # perf reads node's map: removed after
    node_and_perf_map_cleanup(db)
    check(len(samples) > 500, f"perf recorded {len(samples)} samples of the program's main thread")
    # Samples a ring lost (its writer kept away: a machine loaded far beyond its cores) are lost
    # unevenly over time, so the shares of what was kept are not comparable.
    kept, lost = db.execute("SELECT (SELECT COUNT(*) FROM sample), "
                            "(SELECT value FROM metadata WHERE key = 'dropped.samples')").fetchone()
    if int(lost) > 0.02 * (kept + int(lost)):
        skip(f"kairos's rings lost {lost} of {kept + int(lost)} samples on this loaded machine "
             f"({os.getloadavg()[0]:.1f} runnable threads on {os.cpu_count()} cores): shares not comparable")
    totals, whole = inclusive_weights(db, MAIN_THREAD)
    differences = []
    for function in NODE_WORK_FUNCTIONS:
        pattern = re.compile(r"JS:[*~^+]?" + re.escape(function) + r"\b")
        perf_share = sum(1 for block in samples if pattern.search(block)) / len(samples)
        kairos_share = share_of(totals, whole, function)
        differences.append((function, kairos_share, perf_share))
    said = "; ".join(f"{f}: kairos {k:.1%}, perf {p:.1%}" for f, k, p in differences)
    print(f"{said} ({len(samples)} perf samples; {how_sampled(db)})")
    for function, kairos_share, perf_share in differences[:3]:
        check(abs(kairos_share - perf_share) <= 0.03, f"{function} within 3 points of perf's: {said}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-sampling"))
