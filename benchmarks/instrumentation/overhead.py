#!/usr/bin/env python3
"""What a call of an instrumented function costs, whole processes, side by side in one run.

fib_workload.cpp's recursive fib(N), every call a real call, built three ways (g++ -O2): plain;
with -finstrument-functions (kairos_instrument's flags) and linked to libkairos-user.so; with -pg
for gprof. Configurations, interleaved round by round (their order rotated each round):
  plain              the plain build
  hooks, no kairos   the instrumented build alone: libkairos-user.so's hooks return at once
  kairos, filtered   under kairos-run, fib excluded (KAIROS_INSTRUMENT_EXCLUDE): the fast path of
                     a function filtered out
  kairos             under kairos-run at default settings but no sampler: every call recorded,
                     a row for each call of 1 us or more
  user API, no kairos / user API, kairos
                     kairos_push_region + kairos_pop_region, as many as fib's calls, without
                     kairos (over plain) and under kairos-run (over without): a row each
  user API, outputs  the same with kairos-run's default outputs (db,text,trace), which read every
                     region back at the end
  gprof              the -pg build (mcount on every call, its histogram, gmon.out at exit)
  clock pairs        steady_clock::now() pairs, as many as fib makes calls: the baseline
With clang++ (and its XRay runtime), also, against clang's plain build (-fno-optimize-sibling-calls):
  xray, no kairos    built with XRay sleds (-fxray-instruction-threshold=1), run alone: unpatched
  xray, kairos off   under kairos-run with KAIROS_INSTRUMENT=false: the sleds stay unpatched
  xray, kairos       under kairos-run: sleds patched, every call timed
The CPU time of a run is wait4's user + system of the whole process (kairos's threads included).
Each configuration runs at two sizes, fib(N-2) and fib(N); a call's cost is the CPU the extra calls
take, over the plain build's for the same calls, per call: fixed costs (kairos's start, its
symbolizer, the outputs) cancel out. Printed: per configuration, wall and CPU medians of fib(N) with
their spread, and a call's cost, alone and as a ratio to a steady_clock pair's cost measured the
same way in the same round. Peers' regions (Tracy, Caliper) are measured by benchmarks/peers/.

With --baseline DIR (another build directory, or a copy of its plugins/runtime/kairos-run and
libkairos.so under DIR/plugins/runtime), also "kairos, baseline" and "xray, kairos, baseline": the
same runs under that kairos, interleaved with this one's, to measure a change's cost.

Usage: benchmarks/instrumentation/overhead.py [build directory (default build)] [rounds (5)] [--n N]
       [--baseline DIR]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from interleaved import clean_environment, run_measured  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(build_dir, work):
    subprocess.run(["cmake", "--build", build_dir, "--target", "kairos_run", "kairos_preload", "kairos_user"],
                   check=True, stdout=subprocess.DEVNULL)
    source = os.path.join(ROOT, "benchmarks/instrumentation/fib_workload.cpp")
    library_dir = os.path.join(build_dir, "plugins/runtime")
    include_dir = os.path.join(ROOT, "plugins/runtime/include")
    programs = {"plain": [], "instrumented": ["-finstrument-functions", "-fno-plt", "-DKAIROS_USER_API",
                                              f"-I{include_dir}", f"-L{library_dir}",
                                              f"-Wl,-rpath,{library_dir}", "-lkairos-user"], "gprof": ["-pg"]}
    paths = {}
    for name, flags in programs.items():
        paths[name] = os.path.join(work, name)
        subprocess.run(["g++", "-O2", "-g", source, "-o", paths[name], *flags], check=True)
    # XRay: clang, with and without sleds (no sibling calls in either, or clang turns half of fib's
    # calls into a loop).
    clang = shutil.which("clang++")
    if clang is None:
        print("clang++ not found: no XRay rows")
        return paths
    glue = os.path.join(ROOT, "plugins/runtime/src/xray/kairos_xray.cpp")
    for name, flags in {"clang plain": [], "xray": ["-fxray-instrument", "-fxray-instruction-threshold=1", glue,
                                                    "-ldl"]}.items():
        paths[name] = os.path.join(work, name.replace(" ", "_"))
        subprocess.run([clang, "-O2", "-g", "-fno-optimize-sibling-calls", source, "-o", paths[name], *flags],
                       check=True)
    return paths


def remove_profiles(work):
    """The profiles a run left (21 rounds of them came to nearly 2 GB of temporary files)."""
    for name in os.listdir(work):
        if name.startswith(("filtered-", "default-", "regions-", "outputs-", "xoff-", "xray-")):
            os.remove(os.path.join(work, name))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--baseline", help="another build directory whose kairos-run runs beside this one's")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    kairos_run = os.path.join(args.build, "plugins/runtime/kairos-run")
    baseline_run = os.path.join(os.path.abspath(args.baseline), "plugins/runtime/kairos-run") if args.baseline else None
    sizes = (args.n - 2, args.n)  # the cost of a call is the difference between the two, per call
    with tempfile.TemporaryDirectory() as work:
        paths = build(args.build, work)
        base_env = clean_environment(KAIROS_SAMPLING_CPUTIME="false", KAIROS_OUTPUT_FORMATS="db")
        calls = {n: int(run_measured([paths["plain"], str(n), "1"], base_env, work)[2].split()[3]) for n in sizes}
        out = lambda tag: ["-o", os.path.join(work, f"{tag}-%pid%")]
        configurations = {
            "plain": lambda n: [paths["plain"], str(n), "1"],
            "hooks, no kairos": lambda n: [paths["instrumented"], str(n), "1"],
            "kairos, filtered": lambda n: [kairos_run, *out("filtered"), "-s", "KAIROS_INSTRUMENT_EXCLUDE=^fib", "--",
                                           paths["instrumented"], str(n), "1"],
            "kairos": lambda n: [kairos_run, *out("default"), "--", paths["instrumented"], str(n), "1"],
            **({"kairos, baseline": lambda n: [baseline_run, *out("default"), "--", paths["instrumented"], str(n), "1"]}
               if args.baseline else {}),
            # As many regions as fib makes calls, a row each (a sixteenth as many while a row cost
            # over a microsecond: too few regions to weigh one to a nanosecond).
            "user API, no kairos": lambda n: [paths["instrumented"], "--regions", str(calls[n])],
            "user API, kairos": lambda n: [kairos_run, *out("regions"), "--", paths["instrumented"], "--regions",
                                           str(calls[n])],
            # The same with kairos-run's default outputs (the text's call graph and the trace read
            # every region back at finalize).
            "user API, outputs": lambda n: [kairos_run, *out("outputs"), "--formats", "db,text,trace", "--",
                                            paths["instrumented"], "--regions", str(calls[n])],
            "gprof": lambda n: [paths["gprof"], str(n), "1"],
            "clock pairs": lambda n: [paths["plain"], "--clock-pairs", str(calls[n])],
        }
        if "xray" in paths:
            configurations.update({
                "clang plain": lambda n: [paths["clang plain"], str(n), "1"],
                "xray, no kairos": lambda n: [paths["xray"], str(n), "1"],
                "xray, kairos off": lambda n: [kairos_run, *out("xoff"), "-s", "KAIROS_INSTRUMENT=false", "--",
                                               paths["xray"], str(n), "1"],
                "xray, kairos": lambda n: [kairos_run, *out("xray"), "--", paths["xray"], str(n), "1"],
            })
            if args.baseline:
                configurations["xray, kairos, baseline"] = lambda n: [baseline_run, *out("xray"), "--", paths["xray"],
                                                                      str(n), "1"]
        names = list(configurations)
        runs = [(name, n) for name in names for n in sizes]
        results = {key: [] for key in runs}
        load_before = open("/proc/loadavg").read().split()[:3]
        for round_index in range(args.rounds):
            shift = round_index % len(runs)
            for key in runs[shift:] + runs[:shift]:
                results[key].append(run_measured(configurations[key[0]](key[1]), base_env, work)[:2])
                remove_profiles(work)
        load_after = open("/proc/loadavg").read().split()[:3]

    def spread(values, digits=3):
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    small, large = sizes
    extra_calls = calls[large] - calls[small]
    # Per round: the CPU a configuration's extra calls cost, over the plain build's for the same calls.
    # XRay's builds are clang's: their baseline is clang's plain build. Regions under kairos: over
    # the user API without kairos (two calls of functions that return at once).
    def per_call(name):
        base = "clang plain" if name.startswith("xray") else "plain"
        if name in ("user API, kairos", "user API, outputs"):
            base = "user API, no kairos"
        return [((big - little) - (plain_big - plain_little)) / extra_calls * 1e9
                for (_, big), (_, little), (_, plain_big), (_, plain_little)
                in zip(results[(name, large)], results[(name, small)], results[(base, large)], results[(base, small)])]
    pair_ns = per_call("clock pairs")
    print(f"fib({small}) and fib({large}): {calls[small]:,} and {calls[large]:,} calls; {args.rounds} rounds; "
          f"load average {' '.join(load_before)} before, {' '.join(load_after)} after")
    print("ns a call: the CPU of fib's extra calls between the two sizes, over the plain build's, per call "
          "(fixed costs, such as kairos's start and its symbolizer, cancel out)")
    print(f"{'configuration':<20} {'wall s, fib(%d)' % large:<24} {'CPU s, fib(%d)' % large:<24} {'ns a call':<24} "
          f"{'x clock pair':<20}")
    for name in names:
        walls = [wall for wall, _ in results[(name, large)]]
        cpus = [cpu for _, cpu in results[(name, large)]]
        costs = per_call(name)
        ratios = [cost / pair for cost, pair in zip(costs, pair_ns)]
        print(f"{name:<20} {spread(walls):<24} {spread(cpus):<24} "
              f"{'' if name in ('plain', 'clang plain') else spread(costs, 1):<24} "
              f"{'' if name in ('plain', 'clang plain', 'clock pairs') else spread(ratios, 2):<20}")
    print("Peers' regions (Tracy, Caliper), built from their source: benchmarks/peers/regions_vs_peers.py")


if __name__ == "__main__":
    main()
