#!/usr/bin/env python3
"""kairos's costs, whole processes, side by side with the floor and other profilers.

The CPU-bound program cpu_bound_workload (75/25 between two functions in every thread), with 2
threads and with 3 threads on 2 cores (kairos's own threads then compete for a core), each for a
short run (≈0.6 s, where kairos's fixed cost shows) and a long one (≈2.5 s), under each
configuration in CONFIGURATIONS: bare; kairos-run at default settings (the 0.5 s start-up delay
included), the same without a symbol cache, with its default outputs, with no delay at 300 Hz
and 1 kHz (the default source: the perf ring, no signal), at 1 kHz through the perf signal, and with
no sampler; the floor (an empty handler on the same perf task-clock signal) at
300 Hz and 1 kHz; perf record -g and gperftools at 300 Hz. kairos writes only its database
(--formats db) except in the default-outputs configuration. Its runs share a symbol cache that one
1 kHz run of each program fills before the rounds, as a user's earlier runs of the program would. Configurations are interleaved round by round: each round runs every
configuration once on every program, their order rotated by one each round, so machine drift
touches them alike. A run is timed from spawn to wait4, whose rusage gives the user and system
CPU of the whole process tree (kairos's own threads and perf included).

Printed per program: each configuration's wall and CPU time, medians with their spread (min-max),
the median of its per-round ratio to that round's bare run, the samples it delivered against those
requested (Hz x the workers' own CPU time) and its CPU per sample end to end ((CPU - bare CPU) /
samples). Then the figures of the issue "Costs at the floor", each the median over rounds of a
per-round difference or ratio, with its goal, and where kairos's part of a short run went: the
parts its KAIROS_VERBOSE=1 line names (start-up, sample delivery, symbols, the database, outputs).

Usage: benchmarks/sampling/overhead.py [build directory (default build)] [rounds (default 4)]
           [--short-units N] [--long-units N] [--runs-csv FILE]
It installs what it compares against first (scripts/install-deps.sh with
benchmarks/sampling/debian-packages.txt) and builds cpu_bound_workload, kairos-run and
libkairos.so. On a machine with more than 2 CPUs every run is pinned to 2 of them. A profiler that
fails, or a sampler that leaves no samples, fails the script. A round takes about 80 s on 2 cores.
"""
import argparse
import csv
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KAIROS_DEFAULT_DELAY_S = 0.5  # KAIROS_SAMPLING_DELAY's default


@dataclass(frozen=True)
class Configuration:
    """One way of running the program: the words before it, words after its own arguments, and
    environment variables ({run}, {kairos_run}, {perf} and {profiler_library} are filled in)."""
    name: str
    before: str = ""
    after: str = ""
    environment: dict = field(default_factory=dict)
    hz: int = 0  # requested samples per CPU second; 0: it must deliver none
    samples_from: str = ""  # kairos (its database), program (the floor prints them), perf, pprof
    delay_s: float = 0.0  # sampling starts this long after the program


# Every kairos configuration but one shares a symbol cache that warm-up runs filled (the state of a
# user's second run onwards); "symbol cache off" shows a run without one.
KAIROS_WITHOUT_CACHE = "{kairos_run} -o {run}/kairos-%pid%"
KAIROS = KAIROS_WITHOUT_CACHE + " -s KAIROS_SYMBOL_CACHE={symbol_cache}"
CONFIGURATIONS = [
    Configuration("bare"),
    Configuration("kairos default settings", KAIROS + " --formats db --", hz=300,
                  samples_from="kairos", delay_s=KAIROS_DEFAULT_DELAY_S),
    Configuration("kairos default, symbol cache off",
                  KAIROS_WITHOUT_CACHE + " --formats db -s KAIROS_SYMBOL_CACHE=off --", hz=300,
                  samples_from="kairos", delay_s=KAIROS_DEFAULT_DELAY_S),
    # -v: its "own time" line says where kairos's part of the run went (print_costs shows it).
    Configuration("kairos default, outputs db,text,trace", KAIROS + " -v --", hz=300,
                  samples_from="kairos", delay_s=KAIROS_DEFAULT_DELAY_S),
    Configuration("kairos delay 0, 300 Hz",
                  KAIROS + " --formats db -s KAIROS_SAMPLING_DELAY=0 --freq 300 --", hz=300,
                  samples_from="kairos"),
    Configuration("kairos delay 0, 1 kHz",
                  KAIROS + " --formats db -s KAIROS_SAMPLING_DELAY=0 --freq 1000 --", hz=1000,
                  samples_from="kairos"),
    # The default source is the perf ring (no signal, unwound by the writer); this one samples
    # the same 1 kHz through a signal on the thread, as the floor does.
    Configuration("kairos delay 0, 1 kHz, perf signal",
                  KAIROS + " --formats db -s KAIROS_SAMPLING_DELAY=0 -s KAIROS_SAMPLING_CPUTIME_SOURCE=perf"
                  " --freq 1000 --", hz=1000, samples_from="kairos"),
    Configuration("kairos no sampler (CPUTIME=false)",
                  KAIROS + " --formats db -s KAIROS_SAMPLING_CPUTIME=false --",
                  samples_from="kairos"),
    Configuration("floor: empty handler 300 Hz", after="--empty-handler 300", hz=300,
                  samples_from="program"),
    Configuration("floor: empty handler 1 kHz", after="--empty-handler 1000", hz=1000,
                  samples_from="program"),
    Configuration("perf record -e cpu-clock -g 300 Hz",
                  "{perf} record -q -F 300 -e cpu-clock -g -o {run}/perf.data --", hz=300,
                  samples_from="perf"),
    Configuration("gperftools 300 Hz", environment={
        "CPUPROFILE": "{run}/cpu.prof", "CPUPROFILE_FREQUENCY": "300",
        "LD_PRELOAD": "{profiler_library}"}, hz=300, samples_from="pprof"),
]
BARE, KAIROS_DEFAULT, KAIROS_NO_CACHE, KAIROS_OUTPUTS, KAIROS_300, KAIROS_1000, KAIROS_1000_SIGNAL, \
    KAIROS_NO_SAMPLER, FLOOR_300, FLOOR_1000, PERF_300, GPERFTOOLS_300 = \
    (c.name for c in CONFIGURATIONS)


@dataclass(frozen=True)
class Program:
    name: str
    threads: int
    units: int
    long: bool


@dataclass
class Run:
    wall_s: float
    user_s: float
    system_s: float
    samples: int
    workers_cpu_s: float  # what the program's own threads used, as it prints it
    own_parts: dict = field(default_factory=dict)  # part: (wall ms, CPU ms), from kairos's -v line

    @property
    def cpu_s(self):
        return self.user_s + self.system_s


def fail(message):
    sys.exit(f"[kairos] overhead.py: {message}")


OWN_TIME = "[kairos] own time, wall/CPU: "


def parse_own_time(line):
    """'[kairos] own time, wall/CPU: start-up 2.77/2.45 ms, ...' as {part: (wall ms, CPU ms)}."""
    parts = {}
    for item in line[len(OWN_TIME):].split(", "):
        name, times, _ = item.rsplit(" ", 2)
        wall, cpu = times.split("/")
        parts[name] = (float(wall), float(cpu))
    return parts


class Bench:
    def __init__(self, build, work):
        self.build = build
        self.work = work
        self.program = build / "benchmarks/sampling/cpu_bound_workload"
        libraries = sorted(Path("/usr/lib").glob("*/libprofiler.so.0"))
        perf = shutil.which("perf")
        if not libraries or not perf or not shutil.which("google-pprof"):
            fail("gperftools or perf is missing: run "
                 "scripts/install-deps.sh benchmarks/sampling/debian-packages.txt")
        self.words = {"kairos_run": str(build / "plugins/runtime/kairos-run"), "perf": perf,
                      "profiler_library": str(libraries[0]), "symbol_cache": str(work / "symbol-cache")}
        # A KAIROS_* variable, a preload or a profile request from the caller's shell would skew
        # every configuration: each run starts without them.
        self.environment = {k: v for k, v in os.environ.items()
                            if not k.startswith(("KAIROS_", "CPUPROFILE")) and k != "LD_PRELOAD"}
        self.messages = {}  # stderr lines kairos printed besides its outputs line, with a count

    def run(self, configuration, program):
        run = self.work / "run"
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir()
        words = dict(self.words, run=str(run))
        argv = (configuration.before.format(**words).split()
                + [str(self.program), str(program.units), "--threads", str(program.threads)]
                + configuration.after.split())
        environment = dict(self.environment,
                           **{k: v.format(**words) for k, v in configuration.environment.items()})
        described = f"{configuration.name} on {program.name}: " + " ".join(
            [f"{k}={v}" for k, v in configuration.environment.items()] + argv)
        actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)] + [
            (os.POSIX_SPAWN_OPEN, fd, str(run / name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for fd, name in ((1, "stdout"), (2, "stderr"))]
        begin = time.perf_counter_ns()
        pid = os.posix_spawn(argv[0], argv, environment, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        wall_s = (time.perf_counter_ns() - begin) / 1e9
        stdout, stderr = (run / "stdout").read_text(), (run / "stderr").read_text()
        if os.waitstatus_to_exitcode(status) != 0:
            fail(f"{described}\nfailed (exit status {os.waitstatus_to_exitcode(status)}); "
                 f"its stderr:\n{stderr}")
        fields = stdout.split()
        if len(fields) < 4 or fields[0] != "cpu_seconds":
            fail(f"{described}\nprinted no CPU time; its stdout:\n{stdout}\nits stderr:\n{stderr}")
        samples = self.samples(configuration, run, fields, described)
        own_parts = {}
        if configuration.samples_from == "kairos":
            for line in stderr.splitlines():
                if line.startswith(OWN_TIME):
                    own_parts = parse_own_time(line)
                elif " outputs: " not in line and not line.startswith("[kairos] profiling pid "):
                    self.messages[line] = self.messages.get(line, 0) + 1
        # A run shorter than the start-up delay cannot deliver samples; any other sampler must.
        if configuration.hz and samples == 0 and wall_s > configuration.delay_s + 0.1:
            fail(f"{described}\ndelivered no samples; its stderr:\n{stderr}")
        if not configuration.hz and samples:
            fail(f"{described}\ndelivered {samples} samples where none were asked for")
        return Run(wall_s, usage.ru_utime, usage.ru_stime, samples, float(fields[1]), own_parts)

    def samples(self, configuration, run, fields, described):
        def output_of(command):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                fail(f"{described}\nits samples cannot be read: {' '.join(command)} said:\n"
                     f"{done.stderr}")
            return done.stdout

        if configuration.samples_from == "program":
            return int(fields[3])
        if configuration.samples_from == "perf":
            return len(output_of([self.words["perf"], "script", "-i", str(run / "perf.data"),
                                  "-F", "tid"]).splitlines())
        if configuration.samples_from == "pprof":
            for line in output_of(["google-pprof", "--text", str(self.program),
                                   str(run / "cpu.prof")]).splitlines():
                if line.startswith("Total:"):
                    return int(line.split()[1])
            fail(f"{described}\npprof printed no 'Total:' line")
        if configuration.samples_from == "kairos":
            # A run that records nothing writes no database.
            databases = list(run.glob("*.db"))
            if not databases:
                return 0
            with closing(sqlite3.connect(f"file:{databases[0]}?mode=ro", uri=True)) as database:
                return database.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
        return 0


def per_round(runs, program, a, b, how):
    """how(run of a, run of b) for each round of program, a list."""
    return [how(x, y) for x, y in zip(runs[program, a], runs[program, b])]


def wall_over_ms(x, y):
    return 1e3 * (x.wall_s - y.wall_s)


def cpu_over_ms(x, y):
    return 1e3 * (x.cpu_s - y.cpu_s)


def wall_ratio(x, y):
    return x.wall_s / y.wall_s


def cpu_per_sample_us(x, y):
    """x's CPU over y's, per sample of x: end to end when y is bare."""
    return 1e6 * (x.cpu_s - y.cpu_s) / x.samples if x.samples else float("nan")


def cpu_per_extra_sample_us(x, y):
    """What one more sample costs: x and y the same sampler at two rates."""
    return 1e6 * (x.cpu_s - y.cpu_s) / (x.samples - y.samples)


def spread(values, digits):
    """'median (lowest-highest)'; a round without a figure (a run without samples) is left out."""
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return "-"
    low, middle, high = (f"{v:.{digits}f}"
                         for v in (values[0], statistics.median(values), values[-1]))
    return f"{middle} ({low}-{high})"


def print_programs(runs, programs):
    columns = "{:<38} {:>20} {:>20} {:>20} {:>20} {:>7} {:>9} {:>9} {:>20}"
    for program in programs:
        p = program.name
        # The bare program keeps both cores busy: its wall time is its CPU time / 2 unless other
        # work shared the cores, and then the wall figures below mean little.
        crowding = [2 * r.wall_s / r.cpu_s for r in runs[p, BARE]]
        warning = "; other work shared the cores" if statistics.median(crowding) > 1.1 else ""
        print(f"\n{p}; bare wall / (bare CPU / 2 cores): {spread(crowding, 2)}{warning}")
        print(columns.format("configuration", "wall s", "ratio", "CPU s (user+system)", "+CPU ms",
                             "samples", "requested", "delivered", "µs CPU/sample"))
        for configuration in CONFIGURATIONS:
            c = configuration.name
            these = runs[p, c]
            samples = requested = delivered = per_sample = "-"
            if configuration.samples_from:
                samples = f"{statistics.median(r.samples for r in these):.0f}"
            if configuration.hz:
                if configuration.delay_s == 0:
                    wanted = statistics.median(configuration.hz * r.workers_cpu_s for r in these)
                    requested = f"{wanted:.0f}"
                    delivered = f"{100 * statistics.median(r.samples for r in these) / wanted:.1f}%"
                per_sample = spread(per_round(runs, p, c, BARE, cpu_per_sample_us), 1)
            print(columns.format(
                c, spread([r.wall_s for r in these], 3),
                spread(per_round(runs, p, c, BARE, wall_ratio), 3),
                spread([r.cpu_s for r in these], 3),
                "-" if c == BARE else spread(per_round(runs, p, c, BARE, cpu_over_ms), 1), samples,
                requested, delivered, per_sample))


def figure(label, values, digits, unit="", goal=None, met=None):
    middle = statistics.median(v for v in values if not math.isnan(v))
    verdict = "" if goal is None else f"   goal {goal}: {'met' if met(middle) else 'NOT met'}"
    print(f"    {label:<58} {spread(values, digits)}{unit}{verdict}")


def cost_ratio(kairos_cost, floor_cost, goal=None, met=None):
    """kairos's cost per sample against the floor's per signal. Each is a difference of two CPU
    times a few percent apart, so one round's floor can come out near zero or below on a busy
    machine, and a per-round ratio with it: the goal is judged on the ratio of the medians."""
    ratio = statistics.median(kairos_cost) / statistics.median(floor_cost)
    verdict = "" if goal is None else f"   goal {goal}: {'met' if met(ratio) else 'NOT met'}"
    per_round_ratios = spread([k / f for k, f in zip(kairos_cost, floor_cost)], 2)
    label = f"ratio of the medians (per round: {per_round_ratios})"
    print(f"    {label:<58} {ratio:.2f}{verdict}")


def print_costs(runs, programs):
    """The issue's figures, each a median over rounds of a per-round figure, with its goal."""
    shorts = [p.name for p in programs if not p.long]
    longs = [p.name for p in programs if p.long]
    print("\nCosts at the floor: medians over rounds of per-round figures (min-max)")
    print("kairos's fixed cost: short runs, over bare")
    for p in shorts:
        print(f"  {p}")
        for c in (KAIROS_NO_SAMPLER, KAIROS_DEFAULT, KAIROS_NO_CACHE):
            figure(f"{c}: wall", per_round(runs, p, c, BARE, wall_over_ms), 1, " ms", "<= 10 ms",
                   lambda v: v <= 10)
            figure(f"{c}: CPU", per_round(runs, p, c, BARE, cpu_over_ms), 1, " ms")
        figure(f"{KAIROS_300} over no sampler: wall",
               per_round(runs, p, KAIROS_300, KAIROS_NO_SAMPLER, wall_over_ms), 1, " ms")
        figure(f"{KAIROS_300} over no sampler: CPU",
               per_round(runs, p, KAIROS_300, KAIROS_NO_SAMPLER, cpu_over_ms), 1, " ms")
    print(f"where kairos's part of a short run went ({KAIROS_OUTPUTS}: its -v line, wall/CPU ms of "
          "the thread doing each part;\nsample delivery includes the symbols and the database's creation "
          "it needed, stopping the last delivery)")
    for p in shorts:
        print(f"  {p}")
        names = []
        for run in runs[p, KAIROS_OUTPUTS]:
            names += [name for name in run.own_parts if name not in names]
        for name in names:
            walls = [run.own_parts[name][0] for run in runs[p, KAIROS_OUTPUTS] if name in run.own_parts]
            cpus = [run.own_parts[name][1] for run in runs[p, KAIROS_OUTPUTS] if name in run.own_parts]
            print(f"    {name:<24} wall {spread(walls, 2)} ms, CPU {spread(cpus, 2)} ms")
    print("writing text and trace at exit: default outputs over --formats db, wall")
    for p in shorts + longs:
        figure(p, per_round(runs, p, KAIROS_OUTPUTS, KAIROS_DEFAULT, wall_over_ms), 1, " ms")
    print("CPU per sample, long runs: end to end ((CPU - bare CPU) / samples) against the floor's "
          "per signal,\nand one more sample ((CPU at 1 kHz - CPU at 300 Hz) / (samples at 1 kHz "
          "- samples at 300 Hz))")
    for p in longs:
        print(f"  {p}")
        for kairos, floor in ((KAIROS_300, FLOOR_300), (KAIROS_1000, FLOOR_1000), (KAIROS_1000_SIGNAL, FLOOR_1000)):
            kairos_cost = per_round(runs, p, kairos, BARE, cpu_per_sample_us)
            floor_cost = per_round(runs, p, floor, BARE, cpu_per_sample_us)
            figure(kairos, kairos_cost, 1, " µs")
            figure(floor, floor_cost, 1, " µs")
            cost_ratio(kairos_cost, floor_cost, "<= 1.25", lambda v: v <= 1.25)
        kairos_cost = per_round(runs, p, KAIROS_1000, KAIROS_300, cpu_per_extra_sample_us)
        floor_cost = per_round(runs, p, FLOOR_1000, FLOOR_300, cpu_per_extra_sample_us)
        figure("one more kairos sample", kairos_cost, 1, " µs")
        figure("one more floor signal", floor_cost, 1, " µs")
        cost_ratio(kairos_cost, floor_cost)
        for c in (PERF_300, GPERFTOOLS_300):
            figure(f"{c}, end to end", per_round(runs, p, c, BARE, cpu_per_sample_us), 1, " µs")
    print("wall ratio to bare, long runs")
    for p in longs:
        print(f"  {p}")
        for c in (KAIROS_300, KAIROS_DEFAULT, FLOOR_300):
            goal = ("<= 1.02", lambda v: v <= 1.02) if c == KAIROS_300 and p.startswith("3") \
                else (None, None)
            figure(c, per_round(runs, p, c, BARE, wall_ratio), 3, "", *goal)


def write_csv(path, runs):
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["program", "configuration", "round", "wall_s", "user_s", "system_s",
                         "samples", "workers_cpu_s"])
        for (program, configuration), program_runs in runs.items():
            for index, r in enumerate(program_runs):
                writer.writerow([program, configuration, index + 1, f"{r.wall_s:.6f}",
                                 f"{r.user_s:.6f}", f"{r.system_s:.6f}", r.samples,
                                 f"{r.workers_cpu_s:.4f}"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", nargs="?", default=str(ROOT / "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=4)
    parser.add_argument("--short-units", type=int, default=105,
                        help="work units of the short run (≈11 ms of CPU each; default 105)")
    parser.add_argument("--long-units", type=int, default=440,
                        help="work units of the long run (default 440)")
    parser.add_argument("--runs-csv", help="also write every run to this CSV file")
    arguments = parser.parse_args()
    build = Path(arguments.build).resolve()

    subprocess.run([ROOT / "scripts/install-deps.sh",
                    ROOT / "benchmarks/sampling/debian-packages.txt"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "--target", "cpu_bound_workload", "kairos_run",
                    "kairos_preload"], check=True, stdout=subprocess.DEVNULL)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 2:
        os.sched_setaffinity(0, cpus[:2])  # the runs and everything they start inherit it
    programs = [Program(f"{threads} threads{' on 2 cores' if threads > 2 else ''}, "
                        f"{'long' if long else 'short'} ({units} units)", threads, units, long)
                for long, units in ((False, arguments.short_units), (True, arguments.long_units))
                for threads in (2, 3)]

    load_before = os.getloadavg()
    started = time.monotonic()
    runs = {(p.name, c.name): [] for p in programs for c in CONFIGURATIONS}
    with tempfile.TemporaryDirectory() as work:
        bench = Bench(build, Path(work))
        warm_up = next(c for c in CONFIGURATIONS if c.name == KAIROS_1000)
        for program in programs:  # fills the symbol cache, as a user's earlier runs would
            bench.run(warm_up, program)
        for round_index in range(arguments.rounds):
            shift = round_index % len(CONFIGURATIONS)
            for program in programs:
                for configuration in CONFIGURATIONS[shift:] + CONFIGURATIONS[:shift]:
                    runs[program.name, configuration.name].append(bench.run(configuration, program))
            print(f"round {round_index + 1}/{arguments.rounds} done, "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    if arguments.runs_csv:
        write_csv(arguments.runs_csv, runs)

    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    print(f"cpu_bound_workload under each configuration, {arguments.rounds} interleaved rounds, "
          f"medians (min-max), {time.monotonic() - started:.0f} s; kairos {commit}; "
          f"{min(len(cpus), 2)} of {len(cpus)} CPUs;\nload average (1, 5, 15 min) "
          f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after")
    print("ratio: median of per-round ratios to that round's bare run; +CPU ms: over bare; "
          "requested: Hz x the workers' CPU time;\nµs CPU/sample: (CPU - bare CPU) / samples")
    print_programs(runs, programs)
    print_costs(runs, programs)
    if bench.messages:
        print("\nkairos also said (times):")
        for line, count in sorted(bench.messages.items()):
            print(f"  {count:>4}  {line}")


if __name__ == "__main__":
    main()
