#!/usr/bin/env python3
"""What the signal-free CPU-time sampler (the perf ring, kairos's default) costs against the perf
overflow signal and the empty-handler floor, on cpu_bound_workload (2 threads), whole processes:
the process's CPU time (user + system, every thread, kairos's own included), configurations
interleaved round by round, medians with their range, ratios to the bare run. A quicker, narrower
companion of overhead.py, whose full matrix takes long on a 2-core VM.

Usage: ring_vs_signal.py [build directory, default build] [rounds, default 5] [Hz, default 1000]"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hz = sys.argv[3] if len(sys.argv) > 3 else "1000"
    workload = [os.path.join(build, "benchmarks/sampling/cpu_bound_workload"), "200"]
    run = [os.path.join(build, "plugins/runtime/kairos-run"), "--formats", "db", "--freq", hz, "--"]
    configurations = {
        "bare": (workload, {}),
        f"floor {hz} Hz (empty handler)": (workload + ["--empty-handler", hz], {}),
        f"kairos {hz} Hz, perf ring (default)": (run + workload, {"KAIROS_SAMPLING_DELAY": "0"}),
        f"kairos {hz} Hz, perf signal": (run + workload, {"KAIROS_SAMPLING_DELAY": "0",
                                                         "KAIROS_SAMPLING_CPUTIME_SOURCE": "perf"}),
    }
    seconds = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="kairos-ring-vs-signal-") as directory:
        for round_index in range(rounds):
            for name, (command, settings) in configurations.items():
                environment = dict(os.environ, KAIROS_OUTPUT_PATH=os.path.join(directory, f"r{round_index}-%pid%"),
                                   **settings)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                result = subprocess.run(command, cwd=directory, env=environment, capture_output=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if result.returncode != 0:
                    sys.exit(f"{name}: exit status {result.returncode}: {result.stderr.decode(errors='replace')}")
                seconds[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    bare = statistics.median(seconds["bare"])
    print(f"process CPU time, {rounds} interleaved rounds (median, min-max), ratio of medians to bare")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"  {name:36} {median:.3f} s ({min(values):.3f}-{max(values):.3f})  {median / bare:.3f}x")


if __name__ == "__main__":
    main()
