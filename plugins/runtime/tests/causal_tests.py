#!/usr/bin/env python3
"""Causal profiling tests (docs/causal.md): kairos-causal on toys whose answer is known
(tests/causal/two_threads.cpp, pipeline.cpp, barrier_rounds.cpp, fork_join.cpp), its predictions
held against the speedups measured when the toys' work really shrinks (per CPU second of the
busiest thread, which load does not move); its outputs, its variants, coz.h programs, the program's output and exit status, bad
options, futex waits credited (tests/causal/barrier_rounds.cpp), and waits on pipes and socket pairs
between threads credited (tests/causal/pipe_round_trips.cpp).

Run one test: causal_tests.py NAME (ctest does, one at a time: timings need the machine's cores).
Needs KAIROS_CAUSAL, KAIROS_REPORT, KAIROS_TWO_THREADS, KAIROS_PIPELINE, KAIROS_BARRIER_ROUNDS,
KAIROS_FORK_JOIN, KAIROS_PIPE_ROUND_TRIPS and KAIROS_USER_LIBRARY in the environment;
KAIROS_COZ_PIPELINE (the pipeline toy built with coz.h) where coz.h is installed.
"""
import os
import re
import shutil
import sqlite3
import statistics
import sys
import xml.etree.ElementTree as ElementTree

from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_CAUSAL = os.environ.get("KAIROS_CAUSAL", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
TWO_THREADS = os.environ.get("KAIROS_TWO_THREADS", "")
PIPELINE = os.environ.get("KAIROS_PIPELINE", "")
BARRIER_ROUNDS = os.environ.get("KAIROS_BARRIER_ROUNDS", "")
FORK_JOIN = os.environ.get("KAIROS_FORK_JOIN", "")
PIPE_ROUND_TRIPS = os.environ.get("KAIROS_PIPE_ROUND_TRIPS", "")
COZ_PIPELINE = os.environ.get("KAIROS_COZ_PIPELINE", "")
TIMEOUT = 120
# The bar: a prediction within 5 percentage points of the speedup really measured.
TOLERANCE = 0.05
# Real speedups are medians over rounds of (base, variant) pairs run back to back, each run's rate
# taken per CPU second of its busiest thread (causal/toy.hpp), which a loaded machine
# does not move; when even those base rates spread wider than this, no prediction can be judged.
STEADY_SPREAD = 0.10
# A profile assumes a core per busy thread: when the toy's threads waited longer than this for a
# core (in a share of the time they ran), its predictions describe the machine, not the toy.
# Measured on 2 cores: 45-77% beside another engineer's builds, 3% with the cores to itself.
MOST_WAITED_FOR_A_CORE = 0.10
# Three standard errors, in 95% half-widths (1.96 standard errors each).
NOISE_INTERVALS = 3 / 1.96



def disturbance(result, directory):
    """Why the profile whose kairos-causal `result` this is cannot be judged, or None: kairos's
    report says the program's threads lacked cores (under 95% of their ready time: the hypervisor's
    steal, which the toy's own measure does not see, or other processes), or the toy's threads
    waited too long for a core (its last line; causal/toy.hpp). The report's line is what a user
    reads at that load, so the skip hides nothing from them."""
    with open(os.path.join(directory, "out", "causal.txt"), encoding="utf-8") as report:
        lacked = re.search(r"the program's threads had a core [0-9]+% of the time they were ready to run[^\n]*", report.read())
    if lacked:
        return f"kairos-causal's report says: {lacked.group(0)}"
    waited = re.search(rb"waited for a core ([0-9.]+)%", result.stdout)
    check(waited is not None, f"the toy says how long its threads waited for a core: {result.stdout!r}")
    share = float(waited.group(1)) / 100
    print(f"the profiled toy's threads waited for a core {share:.1%} of the time they ran")
    if share <= MOST_WAITED_FOR_A_CORE:
        return None
    return (f"the profiled toy's threads waited for a core {share:.0%} of the time they ran (other processes "
            f"held the cores; at most {MOST_WAITED_FOR_A_CORE:.0%} is judged): a profile assumes a core per busy "
            "thread, so its predictions cannot be judged here")


def causal(directory, options, command, limit=TIMEOUT):
    """kairos-causal -o DIRECTORY/out OPTIONS -- COMMAND: (result, stderr text, causal.db or None)."""
    output = os.path.join(directory, "out")
    result = run_process([KAIROS_CAUSAL, "-o", output, *options, "--", *command], limit, env=clean_environment())
    path = os.path.join(output, "causal.db")
    return result, result.stderr.decode(errors="replace"), sqlite3.connect(path) if os.path.exists(path) else None


def predicted_speedups(db):
    """{(function, speedup): predicted program speedup} from the raw experiment rows, as coz's viewer
    computes it (each cell's summed duration over its summed visits), against a baseline pooled over
    every 0% experiment: one inserts no delay whatever it selected, so all of them measure the same
    program, and the toys' baseline is then twice as precise as one location's."""
    rows = db.execute("SELECT e.selected, ROUND(e.speedup, 2), SUM(e.duration_ns), SUM(p.delta) "
                      "FROM causal_experiment AS e JOIN causal_progress AS p ON p.experiment = e.id "
                      "GROUP BY 1, 2").fetchall()
    baseline_duration = sum(duration for _, speedup, duration, _ in rows if speedup == 0)
    baseline_visits = sum(visits for _, speedup, _, visits in rows if speedup == 0)
    check(baseline_visits > 0, f"no 0% experiment to compare with: {rows}")
    baseline = baseline_duration / baseline_visits
    return {(re.sub(r"^\(anonymous namespace\)::|\(.*$", "", name), speedup): (baseline - duration / visits) / baseline
            for name, speedup, duration, visits in rows if visits > 0 and speedup > 0}


def real_speedups(program, configurations, rounds=3, seconds="1", mode=()):
    """{label: measured program speedup} of each (label, arguments) after the first (the base), run
    as PROGRAM MODE... SECONDS ARGUMENTS...: each round runs the base right before each variant and
    takes the speedup within that pair, the median over rounds. A run's rate is its progress per CPU
    second of its busiest thread (the toy's second line), not per second of wall time: the critical
    thread computes without waiting, so on an idle machine the two agree, and on a loaded one waits
    for a core lengthen the wall time only (on a 2-core machine with builds beside it, a producer
    that should gain nothing gained 16% by wall time; the CPU-time rates stayed within 1 point of the
    known answers). Skips when even the CPU-time base rates spread too widely to judge."""
    def rate(arguments):
        result = run_process([program, *mode, seconds, *arguments], 30, env=clean_environment())
        check(result.returncode == 0, f"{program} {arguments} failed: {result.stderr.decode(errors='replace')}")
        per_cpu_second = re.search(rb"per CPU second of (?:the busiest thread|its threads together): ([0-9.]+)",
                                   result.stdout)
        check(per_cpu_second is not None, f"{program} prints its rate per CPU second: {result.stdout!r}")
        return float(per_cpu_second.group(1))

    (_, base_arguments), variants = configurations[0], configurations[1:]
    bases, speedups = [], {label: [] for label, _ in variants}
    for _ in range(rounds):
        for label, arguments in variants:
            base = rate(base_arguments)
            bases.append(base)
            speedups[label].append(1 - base / rate(arguments))
    spread = (max(bases) - min(bases)) / statistics.median(bases)
    print(f"base rates per CPU second: {sorted(bases)} (spread {spread:.1%})")
    if spread > STEADY_SPREAD:
        skip(f"even the base's rates per CPU second of its busiest thread {sorted(bases)} spread {spread:.0%} "
             f"> {STEADY_SPREAD:.0%} (the machine's load changed the work itself, caches or frequency): "
             "no ground truth to hold predictions against")
    return {label: statistics.median(values) for label, values in speedups.items()}


def reported_intervals(directory):
    """{(function, line speedup): half-width of the 95% interval kairos-causal reported} from the
    text report it wrote into DIRECTORY/out (docs/causal.md, "The interval")."""
    intervals, function = {}, None
    with open(os.path.join(directory, "out", "causal.txt"), encoding="utf-8") as report:
        for line in report:
            location = re.match(r"\s*\d+\. (?:\(anonymous namespace\)::)?([\w:]+)", line)
            if location:
                function = location.group(1)
            elif function and "->" in line and "(" in line:
                for percent, half_width in re.findall(r"(\d+)% -> [+-][0-9.]+% ± ([0-9.]+)", line):
                    intervals[(function, int(percent) / 100)] = float(half_width) / 100
    return intervals


def check_predictions(predictions, real, expectations, why_not_judged=None, intervals=None):
    """expectations: (function, line speedup, real label) triples; each prediction within TOLERANCE.
    why_not_judged: why the profile cannot be judged (disturbance()): a skip once the figures are
    printed. intervals: the 95% intervals kairos reported ({(function, line speedup): half-width};
    reported_intervals()): a prediction further than TOLERANCE from the truth but within three of
    its standard errors (NOISE_INTERVALS of its 95% half-width) is noise the report showed its
    reader, not an error: the test skips, saying so, unless another prediction is wrong; one
    outside both fails. Three, not two: six tests hold 17 predictions, and at two standard errors
    one in three clean runs would fail on chance alone."""
    intervals = intervals or {}
    lines = []
    for function, speedup, label in expectations:
        predicted = predictions.get((function, speedup))
        check(predicted is not None, f"no prediction for {function} at {speedup:.0%}: {predictions}")
        interval = intervals.get((function, speedup))
        shown = f" ± {interval:.1%}" if interval is not None else ""
        lines.append(f"{function} {speedup:.0%}: predicted {predicted:+.1%}{shown}, real {real[label]:+.1%}")
    print("\n".join(lines))
    if why_not_judged:
        skip(why_not_judged)
    noisy = []
    for (function, speedup, label), line in zip(expectations, lines):
        error = abs(predictions[(function, speedup)] - real[label])
        if error <= TOLERANCE:
            continue
        check(error <= NOISE_INTERVALS * intervals.get((function, speedup), 0),
              f"{line}: more than {TOLERANCE:.0%} apart, and more than three standard errors (the 95% interval kairos "
              f"reported, times {NOISE_INTERVALS})\n" + "\n".join(lines))
        noisy.append(line)
    if noisy:
        skip(f"{'; '.join(noisy)}: further than {TOLERANCE:.0%} from the real speedup but within three standard "
             "errors of the estimate kairos reported (the experiments varied too much to judge at 5 points; a longer "
             "profile narrows it)")


def predictions_match_real_speedups(directory, program, variants, expectations, mode=(), inspect=None):
    """Profiles PROGRAM MODE... 24 (--scope function, every function of `expectations` selected, at
    0% and every line speedup of `expectations`), measures the real speedups of `variants` ((label, work factors), the
    base first; real_speedups) and holds each (function, line speedup, label) of `expectations`
    to its real speedup (check_predictions). inspect(db), if given, checks the profile first."""
    functions = sorted({function for function, _, _ in expectations})
    selects = [option for function in functions for option in ("--select", function)]
    speedups = ",".join(str(percent) for percent in sorted({0} | {round(s * 100) for _, s, _ in expectations}))
    result, err, db = causal(directory, ["--scope", "function", *selects, "--speedups", speedups,
                                         "--experiment", "0.1"], [program, *mode, "24"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    if inspect:
        inspect(db)
    share = db.execute("SELECT CAST(value AS INTEGER) FROM process_metadata WHERE key = 'causal.core_share_permille'").fetchone()
    check(share is not None and 0 < share[0] <= 1000, f"kairos measured the threads' share of a core: {share}")
    print(f"kairos: the toy's threads had a core {share[0] / 10:.1f}% of the time they were ready to run")
    predictions = predicted_speedups(db)
    real = real_speedups(program, variants, mode=mode)
    check_predictions(predictions, real, expectations, disturbance(result, directory), reported_intervals(directory))


def test_two_threads_predictions_match_real_speedups(directory):
    # Thread A does 3 units in a_work, B 2 in b_work, a barrier per round: speeding a_work up by 25%
    # gains 25%, by 50% a third (B becomes the critical thread); speeding b_work up gains nothing.
    predictions_match_real_speedups(
        directory, TWO_THREADS, [("base", ["1", "1"]), ("a25", ["0.75", "1"]), ("a50", ["0.5", "1"]), ("b50", ["1", "0.5"])],
        [("a_work", 0.25, "a25"), ("a_work", 0.5, "a50"), ("b_work", 0.5, "b50")])



def test_pipeline_predictions_match_real_speedups(directory):
    # The consumer (2 units an item) is the bottleneck of a producer (1 unit): speeding consume_item
    # up by 25% gains 25%, by 50% 50% (it meets the producer); produce_item gains nothing.
    predictions_match_real_speedups(
        directory, PIPELINE, [("base", ["1", "1"]), ("c25", ["1", "0.75"]), ("c50", ["1", "0.5"]), ("p50", ["0.5", "1"])],
        [("consume_item", 0.25, "c25"), ("consume_item", 0.5, "c50"), ("produce_item", 0.5, "p50")])


def test_barrier_rounds_predictions_match_real_speedups(directory):
    # two_threads' answer with rounds of 0.3 ms, under the 1 ms sample period (A 3 units in a_work,
    # B 2 in b_work, a unit 0.1 ms), meeting on a mutex and a condition variable: a delay owed at
    # once at each sample fell on one round, past its slack, and a_work at 50% came out +18% for
    # +33% real; released at the pace it was incurred, it holds (docs/causal.md, "The delays").
    # At 25%, where B's 0.1 ms of slack a round is nearly spent, a_work comes out 4 to 6 points low
    # (docs/causal.md, "Limits"): held at 50%, where the issue found B's line at +57%.
    predictions_match_real_speedups(
        directory, BARRIER_ROUNDS, [("base", ["1", "1"]), ("a50", ["0.5", "1"]), ("b50", ["1", "0.5"])],
        [("a_work", 0.5, "a50"), ("b_work", 0.5, "b50")], mode=["condvar"])


def test_fork_join_predictions_match_real_speedups(directory):
    # Each round main starts two workers through std::counting_semaphore and waits on a std::latch
    # (every wait a futex in the program's code): left_work 3 units, right_work 2, rounds of 1.6
    # sample periods. Speeding left_work up by 25% gains 25%, by 50% a third; right_work nothing.
    predictions_match_real_speedups(
        directory, FORK_JOIN,
        [("base", ["1", "1"]), ("l25", ["0.75", "1"]), ("l50", ["0.5", "1"]), ("r50", ["1", "0.5"])],
        [("left_work", 0.25, "l25"), ("left_work", 0.5, "l50"), ("right_work", 0.5, "r50")])



def test_futex_waits_are_credited(directory):
    # std::barrier waits in syscall(SYS_futex, ...) inlined into the program (libstdc++'s atomic
    # wait), not in a pthread function: kairos must still see its wake-ups, or a woken thread pays
    # delays its waker already paid. Without the futex wrapper this toy's only credited waits are
    # its two joins; with it, hundreds (libstdc++ spins before it sleeps, so not every meeting
    # blocks, and only wake-ups during experiments count).
    result, err, db = causal(directory, ["--scope", "function", "--select", "a_work", "--speedups", "0,50",
                                         "--experiment", "0.1"], [BARRIER_ROUNDS, "std", "4"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    rounds = int(re.search(rb"\((\d+) rounds\)", result.stdout).group(1))
    credited = db.execute("SELECT CAST(value AS INTEGER) FROM process_metadata "
                          "WHERE key = 'causal.wakeups_credited'").fetchone()
    print(f"{credited[0] if credited else None} wake-ups credited in {rounds} rounds")
    # At least 10: without the futex wrapper only the two joins are credited. Not hundreds: under load
    # (a hypervisor taking a fifth of the cores) libstdc++'s spin met most rounds, and 27 of 998 rounds blocked.
    check(credited is not None and credited[0] >= 10,
          f"the barrier's futex wake-ups are credited: {credited} for {rounds} rounds")


def test_pipe_round_trips_predictions_match_real_speedups(directory):
    # A client (3 units a round, make_request) and a server (2 units, serve_request) take turns
    # through a pipe and a socket pair: speeding make_request up by 25% gains 15%, by 50% 30%;
    # serve_request by 50%, 20%. Uncredited, each thread's wake-ups would make it pay its waker's
    # delays again, and every prediction would come out near 0 (docs/causal.md). Its rates are per
    # CPU second of both threads together.
    predictions_match_real_speedups(
        directory, PIPE_ROUND_TRIPS,
        [("base", ["1", "1"]), ("r25", ["0.75", "1"]), ("r50", ["0.5", "1"]), ("s50", ["1", "0.5"])],
        [("make_request", 0.25, "r25"), ("make_request", 0.5, "r50"), ("serve_request", 0.5, "s50")])



def test_pipe_wakeups_are_credited(directory):
    # pipe_round_trips' threads wait for each other only in read and recv (besides the final joins):
    # the transfers that moved data on descriptors the process made with pipe() and socketpair()
    # are credited (four a round, during experiments), counted apart (causal.pipe_wakeups_credited)
    # and in the total.
    # Made with raw system calls ("hidden"), the same descriptors are not the process's own to
    # kairos, and none of their transfers is credited.
    # Waiting in poll, ppoll, select, pselect or epoll_wait before reading and writing with raw
    # system calls, the waits are what is credited (two a round).
    def credited(visibility, wait="read"):
        result, err, db = causal(os.path.join(directory, f"{visibility}-{wait}"),
                                 ["--scope", "function", "--select", "make_request", "--speedups", "0,50",
                                  "--experiment", "0.1"],
                                 [PIPE_ROUND_TRIPS, "3", "1", "1", visibility, wait])
        check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
        rounds = int(re.search(rb"\((\d+) round trips", result.stdout).group(1))
        keys = dict(db.execute("SELECT key, CAST(value AS INTEGER) FROM process_metadata WHERE key IN "
                               "('causal.pipe_wakeups_credited', 'causal.wakeups_credited', 'causal.experiments')"))
        print(f"{visibility} descriptors, waits in {wait}: {keys} in {rounds} round trips")
        check(keys.get("causal.experiments", 0) > 0, f"experiments ran: {keys}\n{err}")
        return keys, rounds

    keys, rounds = credited("seen")
    check(keys.get("causal.pipe_wakeups_credited", 0) >= 50,
          f"the pipe's and the socket pair's wake-ups are credited: {keys} for {rounds} round trips")
    check(keys["causal.wakeups_credited"] >= keys["causal.pipe_wakeups_credited"],
          f"the total counts the pipes' wake-ups: {keys}")
    keys, rounds = credited("hidden")
    check(keys.get("causal.pipe_wakeups_credited") == 0,
          f"descriptors kairos did not see made are not credited: {keys} for {rounds} round trips")
    for wait in ("poll", "ppoll", "select", "pselect", "epoll"):
        keys, rounds = credited("seen", wait)
        check(keys.get("causal.pipe_wakeups_credited", 0) >= 100,
              f"waits in {wait} on the pipe and the socket pair are credited: {keys} for {rounds} round trips")

def test_coz_annotated_predictions_match_real_speedups(directory):
    # The pipeline toy with its progress point marked by coz.h's COZ_PROGRESS_NAMED, which finds
    # kairos's counter through _coz_get_counter: its predictions hold as the kairos_progress build's.
    if not COZ_PIPELINE:
        skip("coz.h is not installed (Debian's coz-profiler; scripts/install-deps.sh installs it), so the "
             "coz.h-annotated toy was not built")
    def only_coz_point(db):
        points = set(db.execute("SELECT DISTINCT name FROM causal_progress"))
        check(points == {("item",)}, f"coz.h's point is the one counted: {points}")

    predictions_match_real_speedups(
        directory, COZ_PIPELINE, [("base", ["1", "1"]), ("c25", ["1", "0.75"]), ("c50", ["1", "0.5"]), ("p50", ["0.5", "1"])],
        [("consume_item", 0.25, "c25"), ("consume_item", 0.5, "c50"), ("produce_item", 0.5, "p50")],
        inspect=only_coz_point)


def test_line_scope_outputs_are_written_and_readable(directory):
    result, err, db = causal(directory, ["--experiment", "0.1", "--top", "5"], [PIPELINE, "5"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    check(re.match(rb"items per second: [0-9.]+ \(\d+ items, checksum [01]\)\n"
                   rb"items per CPU second of the busiest thread: [0-9.]+ "
                   rb"\(its threads waited for a core [0-9.]+% of the time they ran\)\n$", result.stdout) is not None,
          f"the program's stdout is its own: {result.stdout!r}")
    selected = [row[0] for row in db.execute("SELECT DISTINCT selected FROM causal_experiment")]
    check(selected and all(re.search(r"pipeline\.cpp:\d+$", name) for name in selected),
          f"line scope: every selected location is a line of pipeline.cpp: {selected}")
    check(db.execute("SELECT COUNT(*) FROM causal_sample WHERE location LIKE '%pipeline.cpp:%'").fetchone()[0] > 0,
          "samples per line were written")
    output = os.path.join(directory, "out")
    text = open(os.path.join(output, "causal.txt")).read()
    check("causal profile:" in text and "item (throughput)" in text, f"causal.txt has the section:\n{text}")
    check("causal profile:" in err, f"the report is printed on stderr:\n{err}")
    coz = open(os.path.join(output, "profile.coz")).read().splitlines()
    experiments = [line for line in coz if line.startswith("experiment\t")]
    check(len(experiments) == db.execute("SELECT COUNT(*) FROM causal_experiment").fetchone()[0],
          f"profile.coz has one experiment record per experiment: {len(experiments)}")
    check(all(re.match(r"experiment\tselected=\S+:\d+\tspeedup=[0-9.]+\tduration=\d+\tselected-samples=\d+$", line)
              for line in experiments), f"coz's experiment records: {experiments[:3]}")
    check(any(line.startswith("throughput-point\tname=item\tdelta=") for line in coz), "the progress point's records")
    svg = ElementTree.parse(os.path.join(output, "causal.svg")).getroot()
    check(svg.tag.endswith("svg"), f"causal.svg is an SVG document: {svg.tag}")
    again = run_process([KAIROS_REPORT, "--format", "coz", os.path.join(output, "causal.db")], TIMEOUT,
                        env=clean_environment())
    check(again.returncode == 0 and again.stdout.decode().splitlines() == coz,
          "kairos-report --format coz writes the same profile.coz")


def test_line_scope_in_a_clang_program(directory):
    # clang writes no .debug_aranges by default, and libdw then finds no line for any address
    # unless kairos asks each compilation unit (backtrace/symbolizer.hpp): lines must be found.
    clang = shutil.which("clang++")
    if clang is None:
        skip("clang++ is not installed (Debian's clang; scripts/install-deps.sh installs it)")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "causal", "two_threads.cpp")
    program = os.path.join(directory, "two_threads_clang")
    include = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
    library = os.path.dirname(os.path.realpath(os.environ.get("KAIROS_USER_LIBRARY", "")))
    build = run_process([clang, "-O2", "-g", source, "-I", include, "-L", library, "-lkairos-user",
                         f"-Wl,-rpath,{library}", "-pthread", "-o", program], TIMEOUT)
    check(build.returncode == 0, f"building with clang: {build.stderr.decode(errors='replace')}")
    result, err, db = causal(directory, ["--experiment", "0.1"], [program, "4"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    selected = [row[0] for row in db.execute("SELECT DISTINCT selected FROM causal_experiment")]
    check(selected and all(re.search(r"two_threads\.cpp:\d+$", name) for name in selected),
          f"lines of two_threads.cpp were sped up: {selected}")


def test_variants_run_one_process_per_configuration(directory):
    result, err, db = causal(directory, ["--variants", "--scope", "function", "--select", "a_work",
                                         "--speedups", "50", "--experiment", "0.1"], [TWO_THREADS, "3"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    runs = sorted(name for name in os.listdir(os.path.join(directory, "out")) if name.startswith("run"))
    check(runs == ["run1-select0-speedup0.db", "run1-select0-speedup50.db"],
          f"one run for the 0% baseline (added) and one at 50%: {runs}")
    processes = db.execute("SELECT COUNT(*) FROM process").fetchone()[0]
    check(processes == 2, f"both runs' processes are in causal.db: {processes}")
    per_process = db.execute("SELECT process, COUNT(DISTINCT speedup), MIN(speedup) FROM causal_experiment "
                             "GROUP BY process ORDER BY 3").fetchall()
    check([(speedups, speedup) for _, speedups, speedup in per_process] == [(1, 0.0), (1, 0.5)],
          f"each run experiments at its one speedup: {per_process}")


def test_experiments_run_only_inside_time_windows(directory):
    # Two windows of 1.5 s, each after 1 s off (docs/windows.md): every experiment lies inside one.
    result, err, db = causal(directory, ["--scope", "function", "--select", "a_work", "--experiment", "0.1",
                                         "-s", "KAIROS_TRACE_PERIODS=realtime:1:1.5:2"], [TWO_THREADS, "6"])
    check(result.returncode == 0 and db is not None, f"status {result.returncode}: {err}")
    windows = db.execute("SELECT ordinal, start_ns, end_ns FROM window WHERE start_ns IS NOT NULL").fetchall()
    check(len(windows) == 2, f"both windows opened: {windows}")
    experiments = db.execute("SELECT window, start_ns, start_ns + duration_ns + delay_ns FROM causal_experiment").fetchall()
    check(len(experiments) >= 4, f"experiments ran in the windows: {experiments}")
    slack = 20_000_000  # an experiment ends within a slice of the experiments' thread after its window
    for window, start, end in experiments:
        inside = [w for w in windows if w[0] == window and w[1] <= start and end <= w[2] + slack]
        check(inside, f"experiment {start}..{end} (window {window}) lies inside its window: {windows}")


def test_coz_annotated_program_works_unchanged(directory):
    if not os.path.exists("/usr/include/coz.h"):
        skip("coz.h is not installed (Debian's coz-profiler; scripts/install-deps.sh installs it)")
    source = os.path.join(directory, "annotated.c")
    with open(source, "w") as file:
        file.write('#include <coz.h>\n#include <stdio.h>\n#include <time.h>\n'
                   'static volatile unsigned long sink;\n'
                   'int main(void) {\n  struct timespec start, now;\n  clock_gettime(CLOCK_MONOTONIC, &start);\n'
                   '  do {\n    for (unsigned long i = 0; i < 200000; ++i) sink += i * i;\n'
                   '    COZ_PROGRESS_NAMED("chunk");\n    COZ_BEGIN("request");\n    sink += 1;\n'
                   '    COZ_END("request");\n    clock_gettime(CLOCK_MONOTONIC, &now);\n'
                   '  } while (now.tv_sec - start.tv_sec < 3);\n  puts("annotated done");\n  return 0;\n}\n')
    program = os.path.join(directory, "annotated")
    build = run_process(["cc", "-O1", "-g", source, "-o", program, "-ldl"], TIMEOUT)
    check(build.returncode == 0, f"building a coz.h program: {build.stderr.decode(errors='replace')}")
    result, err, db = causal(directory, ["--experiment", "0.1"], [program])
    check(result.returncode == 0 and result.stdout == b"annotated done\n", f"status {result.returncode}: {err}")
    check(db is not None, f"a causal database: {err}")
    points = set(db.execute("SELECT DISTINCT name || ' ' || kind FROM causal_progress"))
    check({("chunk throughput",), ("request latency",)} <= points,
          f"coz.h's throughput and latency points are counted: {points}")


def test_output_and_exit_status_unchanged(directory):
    command = ["sh", "-c", "echo out; echo err >&2; exit 7"]
    plain = run_process(command, TIMEOUT, env=clean_environment())
    result, err, _ = causal(directory, [], command)
    check(result.returncode == 7 and plain.returncode == 7, f"exit status 7 passed through: {result.returncode}")
    check(result.stdout == plain.stdout == b"out\n", f"stdout unchanged: {result.stdout!r}")
    check(err.startswith("err\n"), f"the program's stderr comes first: {err!r}")
    check("no causal experiment" in err, f"a run without progress points says why nothing was learned: {err}")


def test_bad_options_are_named(directory):
    for options, expected in (
        (["--scope", "banana"], "--scope"),
        (["--select", "("], "KAIROS_CAUSAL_SELECT"),
        (["--speedups", "33"], "KAIROS_CAUSAL_SPEEDUPS"),
    ):
        output = os.path.join(directory, f"out{len(options[1])}")
        result = run_process([KAIROS_CAUSAL, "-o", output, *options, "--", "true"], TIMEOUT, env=clean_environment())
        err = result.stderr.decode(errors="replace")
        check(result.returncode == 2 and expected in err, f"{options}: status {result.returncode}, names {expected}: {err}")
    existing = os.path.join(directory, "exists")
    os.mkdir(existing)
    result = run_process([KAIROS_CAUSAL, "-o", existing, "--", "true"], TIMEOUT, env=clean_environment())
    check(result.returncode == 2 and "exists already" in result.stderr.decode(), "an existing output directory is refused")
    result = run_process([KAIROS_CAUSAL, "true"], TIMEOUT, env=clean_environment())
    check(result.returncode == 2 and "missing '--'" in result.stderr.decode(), "the missing '--' is named")


if __name__ == "__main__":
    if not (KAIROS_CAUSAL and TWO_THREADS and PIPELINE):
        print("KAIROS_CAUSAL, KAIROS_TWO_THREADS and KAIROS_PIPELINE must be set", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_named_test(globals(), "kairos-causal"))
