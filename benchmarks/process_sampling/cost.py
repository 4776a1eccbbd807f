#!/usr/bin/env python3
"""What process sampling costs a run: a program of idle threads (idle_threads.cpp: 8 threads
asleep for --seconds) under kairos-run with KAIROS_PROCESS_SAMPLING on and off, interleaved round by
round, everything else alike (its database only). The process's CPU time comes from wait4 (user +
system of every thread, kairos's included); the difference of the medians over the wall time is
process sampling's share of one core (its thread's reads, and the rows it adds to the database).
kairos's own line (KAIROS_VERBOSE=1) gives the sampling thread's own CPU too.

Usage: benchmarks/process_sampling/cost.py --kairos-run build/plugins/runtime/kairos-run
           --program build/benchmarks/process_sampling/idle_threads [--rounds 5] [--seconds 5]
           [--threads 8] [--period 0.05]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment, run_measured  # noqa: E402

OWN_PART = re.compile(r"process sampling ([0-9.]+)/([0-9.]+) ms")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kairos-run", required=True)
    parser.add_argument("--program", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--period", default="")
    options = parser.parse_args()
    options.kairos_run, options.program = os.path.abspath(options.kairos_run), os.path.abspath(options.program)
    configurations = {"off": "off", "on": "on"}
    cpu = {name: [] for name in configurations}
    wall = {name: [] for name in configurations}
    own_cpu_ms = []
    with tempfile.TemporaryDirectory() as directory:
        for round_number in range(options.rounds):
            # Each round in the other order: drift touches both alike.
            order = list(configurations.items())
            if round_number % 2:
                order.reverse()
            for name, value in order:
                env = clean_environment(KAIROS_PROCESS_SAMPLING=value, KAIROS_OUTPUT_FORMATS="db", KAIROS_VERBOSE="1")
                if options.period:
                    env["KAIROS_PROCESS_SAMPLING_PERIOD"] = options.period
                stem = os.path.join(directory, f"r{round_number}-{name}")
                command = [options.kairos_run, "-o", stem, "--", options.program, str(options.seconds),
                           str(options.threads)]
                elapsed, cpu_s, _, error = run_measured(command, env, directory)
                cpu[name].append(cpu_s)
                wall[name].append(elapsed)
                part = OWN_PART.search(error)
                if name == "on" and part:
                    own_cpu_ms.append(float(part.group(2)))
                os.remove(stem + ".db")
    period = options.period or "default"
    print(f"{options.rounds} rounds of {options.threads} idle threads for {options.seconds} s, period {period}")
    for name in configurations:
        print(f"  sampling {name:<3}  CPU {statistics.median(cpu[name]) * 1e3:8.2f} ms "
              f"[{min(cpu[name]) * 1e3:.2f}-{max(cpu[name]) * 1e3:.2f}]  wall {statistics.median(wall[name]):.3f} s")
    difference = statistics.median(cpu["on"]) - statistics.median(cpu["off"])
    share = 100 * difference / statistics.median(wall["on"])
    if own_cpu_ms:
        own = statistics.median(own_cpu_ms) * 1e-3 / statistics.median(wall["on"]) * 100
        print(f"its thread's own CPU (KAIROS_VERBOSE=1): {statistics.median(own_cpu_ms):.2f} ms a run, {own:.3f}% of one core")
    print(f"process sampling costs {share:.3f}% of one core (median CPU on - off, over the wall time)")


if __name__ == "__main__":
    main()
