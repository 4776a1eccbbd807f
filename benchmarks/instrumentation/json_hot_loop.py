#!/usr/bin/env python3
"""Instrumentation on a real library's hot loop: nlohmann_json dumping and parsing a document
(json_workload.cpp), side by side in one run, configurations interleaved round by round.

Builds (g++ -O2): plain; instrumented with -finstrument-functions and no exclusion list (every call
of the library's header code reaches the hooks), linked to libkairos-user.so; the same with hooks
that count the calls (to know how many there are); and kairos_instrument's own flags, which leave
/usr/include uninstrumented. Configurations:
  plain                       the plain build
  hooks, no kairos            the instrumented build alone (libkairos-user.so's hooks return at once)
  kairos, library filtered    under kairos-run at default settings: the library's functions are
                              /usr/include's, left out by default, so their calls take the
                              excluded fast path
  kairos, library recorded    under kairos-run with KAIROS_INSTRUMENT_SYSTEM=true: every call timed
  kairos_instrument build     kairos_instrument's flags under kairos-run: the library not instrumented
Each runs at N/2 and N objects; a call's cost is the extra CPU (wait4, kairos's threads included)
between the two sizes over the plain build's, per extra call. Printed with the ratio to a
steady_clock::now() pair measured the same way (fib_workload.cpp --clock-pairs).

Usage: benchmarks/instrumentation/json_hot_loop.py [build directory (default build)] [rounds (3)] [--objects N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import ROOT  # noqa: E402
from interleaved import clean_environment, run_measured  # noqa: E402  (overhead.py put benchmarks/ on the path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--objects", type=int, default=2000)
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build)
    subprocess.run(["cmake", "--build", build_dir, "--target", "kairos_run", "kairos_preload", "kairos_user"],
                   check=True, stdout=subprocess.DEVNULL)
    here = os.path.dirname(os.path.abspath(__file__))
    library_dir = os.path.join(build_dir, "plugins/runtime")
    link_user = [f"-L{library_dir}", f"-Wl,-rpath,{library_dir}", "-lkairos-user"]
    kairos_run = os.path.join(library_dir, "kairos-run")
    sizes = (args.objects // 2, args.objects)
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(here, "json_workload.cpp")
        builds = {
            "plain": [source],
            "instrumented": [source, "-finstrument-functions", "-fno-plt", *link_user],
            "counted": [source, os.path.join(here, "count_hooks.cpp"), "-finstrument-functions", "-fno-plt"],
            "kairos_instrument": [source, "-finstrument-functions", "-fno-plt",
                                  "-finstrument-functions-exclude-file-list=/usr/include", *link_user],
            "clock": [os.path.join(here, "fib_workload.cpp")],
        }
        paths = {}
        for name, flags in builds.items():
            paths[name] = os.path.join(work, name)
            subprocess.run(["g++", "-O2", "-g", *flags, "-o", paths[name]], check=True)
        env = clean_environment(KAIROS_SAMPLING_CPUTIME="false", KAIROS_OUTPUT_FORMATS="db")
        calls = {}
        for n in sizes:
            counted = subprocess.run([paths["counted"], str(n)], capture_output=True, text=True, check=True)
            calls[n] = int(counted.stderr.split()[-1])
        out = lambda tag: ["-o", os.path.join(work, f"{tag}-%pid%")]
        configurations = {
            "plain": lambda n: [paths["plain"], str(n)],
            "hooks, no kairos": lambda n: [paths["instrumented"], str(n)],
            "kairos, library filtered": lambda n: [kairos_run, *out("filtered"), "--", paths["instrumented"], str(n)],
            "kairos, library recorded": lambda n: [kairos_run, *out("recorded"), "-s", "KAIROS_INSTRUMENT_SYSTEM=true",
                                                   "--", paths["instrumented"], str(n)],
            "kairos_instrument build": lambda n: [kairos_run, *out("own"), "--", paths["kairos_instrument"], str(n)],
            "clock pairs": lambda n: [paths["clock"], "--clock-pairs", str(calls[n])],
        }
        runs = [(name, n) for name in configurations for n in sizes]
        results = {key: [] for key in runs}
        load_before = open("/proc/loadavg").read().split()[:3]
        for round_index in range(args.rounds):
            shift = round_index % len(runs)
            for key in runs[shift:] + runs[:shift]:
                results[key].append(run_measured(configurations[key[0]](key[1]), env, work)[:2])
        load_after = open("/proc/loadavg").read().split()[:3]

    small, large = sizes
    extra = calls[large] - calls[small]

    def per_call(name):
        return [((big - little) - (plain_big - plain_little)) / extra * 1e9
                for (_, big), (_, little), (_, plain_big), (_, plain_little)
                in zip(results[(name, large)], results[(name, small)], results[("plain", large)],
                       results[("plain", small)])]

    def spread(values, digits):
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    pairs = per_call("clock pairs")
    print(f"nlohmann_json, {small} and {large} objects: {calls[small]:,} and {calls[large]:,} instrumented calls; "
          f"{args.rounds} rounds; load average {' '.join(load_before)} before, {' '.join(load_after)} after")
    print(f"{'configuration':<26} {'CPU s, ' + str(large) + ' objects':<24} {'x plain':<20} {'ns a call':<22} "
          f"{'x clock pair':<18}")
    plain_cpu = [cpu for _, cpu in results[("plain", large)]]
    for name in configurations:
        cpus = [cpu for _, cpu in results[(name, large)]]
        ratios = [cpu / base for cpu, base in zip(cpus, plain_cpu)]
        costs = per_call(name)
        print(f"{name:<26} {spread(cpus, 3):<24} {spread(ratios, 2):<20} "
              f"{'' if name == 'plain' else spread(costs, 1):<22} "
              f"{'' if name in ('plain', 'clock pairs') else spread([c / p for c, p in zip(costs, pairs)], 2):<18}")


if __name__ == "__main__":
    main()
