#!/usr/bin/env python3
"""What a call of an instrumented function costs, whole processes, side by side in one run.

fib_workload.cpp's recursive fib(N), every call a real call, built three ways (g++ -O2): plain;
with -finstrument-functions (kairos_instrument's flags) and linked to libkairos-user.so; with -pg
for gprof. Configurations, interleaved round by round (their order rotated each round):
  plain              the plain build
  hooks, no kairos   the instrumented build alone: libkairos-user.so's hooks return at once
  kairos, no calls   under kairos-run, the plain build: kairos's own cost, which the rows below
                     subtract (theirs is over this one, not over plain)
  kairos, filtered   under kairos-run, fib excluded (KAIROS_INSTRUMENT_EXCLUDE): the fast path of
                     a function filtered out
  kairos             under kairos-run at default settings but no sampler: every call recorded,
                     a row for each call of 1 us or more
  kairos, every row  the same with KAIROS_INSTRUMENT_MIN_DURATION=0: a database row per call
  gprof              the -pg build (mcount on every call, its histogram, gmon.out at exit)
  clock pairs        steady_clock::now() pairs, as many as fib makes calls: the baseline
The CPU time of a run is wait4's user + system of the whole process (kairos's threads included).
Printed: per configuration, wall and CPU medians with their spread, and the CPU cost per call over
the plain build ((CPU - plain CPU) / calls) as a ratio to one steady_clock pair's cost measured in
the same round. Tracy (not packaged in Debian) records a zone in 197 ns here, 3.7x a pair.

Usage: benchmarks/instrumentation/overhead.py [build directory (default build)] [rounds (5)] [--n N]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(build_dir, work):
    subprocess.run(["cmake", "--build", build_dir, "--target", "kairos_run", "kairos_preload", "kairos_user"],
                   check=True, stdout=subprocess.DEVNULL)
    source = os.path.join(ROOT, "benchmarks/instrumentation/fib_workload.cpp")
    library_dir = os.path.join(build_dir, "plugins/runtime")
    programs = {"plain": [], "instrumented": ["-finstrument-functions", f"-L{library_dir}",
                                              f"-Wl,-rpath,{library_dir}", "-lkairos-user"], "gprof": ["-pg"]}
    paths = {}
    for name, flags in programs.items():
        paths[name] = os.path.join(work, name)
        subprocess.run(["g++", "-O2", "-g", source, "-o", paths[name], *flags], check=True)
    return paths


def run(command, env, cwd):
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    output = process.stdout.read().decode()
    error = process.stderr.read().decode()
    process.stdout.close()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{command} failed: {error}")
    return wall, usage.ru_utime + usage.ru_stime, output, error


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--n", type=int, default=30)
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    kairos_run = os.path.join(args.build, "plugins/runtime/kairos-run")
    with tempfile.TemporaryDirectory() as work:
        paths = build(args.build, work)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        base_env.update({"KAIROS_SAMPLING_CPUTIME": "false", "KAIROS_OUTPUT_FORMATS": "db"})
        probe = run([paths["plain"], str(args.n), "1"], base_env, work)[2]
        calls = int(probe.split()[3])
        fib = [str(args.n), "1"]
        out = lambda tag: ["-o", os.path.join(work, f"{tag}-%pid%")]
        configurations = {
            "plain": lambda: [paths["plain"], *fib],
            "hooks, no kairos": lambda: [paths["instrumented"], *fib],
            "kairos, no calls": lambda: [kairos_run, *out("fixed"), "--", paths["plain"], *fib],
            "kairos, filtered": lambda: [kairos_run, *out("filtered"), "-s", "KAIROS_INSTRUMENT_EXCLUDE=^fib", "--",
                                         paths["instrumented"], *fib],
            "kairos": lambda: [kairos_run, *out("default"), "--", paths["instrumented"], *fib],
            "kairos, every row": lambda: [kairos_run, *out("every"), "-s", "KAIROS_INSTRUMENT_MIN_DURATION=0", "--",
                                          paths["instrumented"], *fib],
            "gprof": lambda: [paths["gprof"], *fib],
            "clock pairs": lambda: [paths["plain"], "--clock-pairs", str(calls)],
        }
        names = list(configurations)
        results = {name: [] for name in names}
        load_before = open("/proc/loadavg").read().split()[:3]
        for round_index in range(args.rounds):
            order = names[round_index % len(names):] + names[:round_index % len(names)]
            for name in order:
                results[name].append(run(configurations[name](), base_env, work)[:2])
        load_after = open("/proc/loadavg").read().split()[:3]

    def spread(values, scale=1.0, digits=3):
        return f"{statistics.median(values) * scale:.{digits}f} ({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})"

    print(f"fib({args.n}): {calls:,} calls a run; {args.rounds} rounds; load average {' '.join(load_before)} "
          f"before, {' '.join(load_after)} after")
    print(f"{'configuration':<20} {'wall s':<24} {'CPU s':<24} {'ns a call over floor':<26} {'x clock pair':<20}")
    pair_ns = [(cpu - plain_cpu) / calls * 1e9 for (_, cpu), (_, plain_cpu) in zip(results["clock pairs"], results["plain"])]
    for name in names:
        walls = [wall for wall, _ in results[name]]
        cpus = [cpu for _, cpu in results[name]]
        # Under kairos, over kairos's own cost on the plain build: what the calls add.
        floor = results["kairos, no calls"] if name.startswith("kairos,") and name != "kairos, no calls" or name == "kairos" \
            else results["plain"]
        per_call = [(cpu - plain) / calls * 1e9 for (_, cpu), (_, plain) in zip(results[name], floor)]
        ratios = [cost / pair for cost, pair in zip(per_call, pair_ns)]
        print(f"{name:<20} {spread(walls):<24} {spread(cpus):<24} "
              f"{'' if name == 'plain' else spread(per_call, digits=1):<26} "
              f"{'' if name in ('plain', 'clock pairs') else spread(ratios, digits=2):<20}")
    print("a clock pair's cost is the 'clock pairs' row's CPU over plain's, per pair; Tracy: 197 ns a zone here (3.7x)")


if __name__ == "__main__":
    main()
