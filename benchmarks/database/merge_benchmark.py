#!/usr/bin/env python3
"""kairos-merge on generated rank databases: 10, 100 and 1,000 ranks of 100,000 samples each.

kairos_profile_generator writes the inputs once (16 distinct profiles written by the database
plugin's profile_writer, copied to every rank with its own pid, rank, host and start time: 4
threads, a program of 200 functions, 400 stacks 3 to 24 deep, a region and a counter every 100
samples). Each round merges every rank count once, their order rotated by one each round, so
machine drift touches them alike. A run is timed from spawn to wait4, whose rusage gives its CPU
time and peak resident memory.

Printed per rank count: wall and CPU time, medians with their spread (min-max), samples merged
per second, CPU per sample, peak memory, the output's size. Then how the cost grows: the ratio of
the per-rank time at each count to that at the smallest, the exponent of a power law through the
medians, a straight line through them, and the time for 10,000 ranks each predicts; and the goal
(1,000 ranks in under 60 s).

Usage: benchmarks/database/merge_benchmark.py [build directory (default build)] [rounds (default 3)]
           [--ranks 10,100,1000] [--samples 100000] [--work DIR] [--merge PATH --generator PATH]
It builds kairos-merge and kairos_profile_generator in the build directory unless both paths are
given. The inputs of 1,000 ranks take 2.7 GB and a merge of them as much again, under --work
(default: a temporary folder in the build directory, removed at the end). A round of the default
counts takes about a minute on 2 cores.
"""
import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOAL_RANKS, GOAL_S = 1000, 60.0


def spread(values, scale=1.0, digits=2):
    """'median (min-max)'."""
    return (f"{statistics.median(values) * scale:.{digits}f} "
            f"({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})")


def timed(command):
    """(wall s, CPU s, peak resident KiB) of a command run to its end; it must succeed."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    err = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"FAILED: {' '.join(command[:3])} ... exited {os.waitstatus_to_exitcode(status)}: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def fit_line(xs, ys):
    """Least squares y = a + b x."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - b * mean_x, b


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--ranks", default="10,100,1000")
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--work")
    parser.add_argument("--merge")
    parser.add_argument("--generator")
    options = parser.parse_args()
    counts = sorted({int(count) for count in options.ranks.split(",")})
    build = Path(options.build).resolve()
    merge, generator = options.merge, options.generator
    if not (merge and generator):
        subprocess.run(["cmake", "--build", str(build), "--target", "kairos_merge", "kairos_profile_generator"],
                       check=True, stdout=subprocess.DEVNULL)
        merge = str(build / "plugins/runtime/kairos-merge")
        generator = str(build / "plugins/database/kairos_profile_generator")
    work = Path(options.work) if options.work else Path(tempfile.mkdtemp(prefix="merge-benchmark-", dir=build))
    try:
        inputs_dir = work / "inputs"
        start = time.monotonic()
        subprocess.run([generator, str(inputs_dir), str(counts[-1]), str(options.samples), "16"], check=True)
        inputs = sorted(str(path) for path in inputs_dir.glob("rank-*.db"))
        print(f"inputs: {len(inputs)} rank databases of {options.samples} samples, "
              f"{sum(os.path.getsize(path) for path in inputs) / 1e9:.2f} GB, written in "
              f"{time.monotonic() - start:.1f} s")
        runs = {count: [] for count in counts}
        sizes = {}
        for round_index in range(options.rounds):
            order = counts[round_index % len(counts):] + counts[:round_index % len(counts)]
            for count in order:
                output = work / f"merged-{count}.db"
                output.unlink(missing_ok=True)
                runs[count].append(timed([merge, "-o", str(output), *inputs[:count]]))
                sizes[count] = output.stat().st_size
                output.unlink()
            print(f"round {round_index + 1}/{options.rounds}: " +
                  ", ".join(f"{count} ranks {runs[count][-1][0]:.2f} s" for count in counts), flush=True)
    finally:
        if not options.work:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nkairos-merge, {options.rounds} rounds, medians (min-max)")
    print(f"{'ranks':>6} {'wall s':>22} {'CPU s':>22} {'M samples/s':>12} {'CPU us/sample':>14} "
          f"{'peak MiB':>9} {'output GB':>10}")
    medians = {}
    for count in counts:
        walls = [run[0] for run in runs[count]]
        cpus = [run[1] for run in runs[count]]
        samples = count * options.samples
        medians[count] = statistics.median(walls)
        print(f"{count:>6} {spread(walls):>22} {spread(cpus):>22} {samples / medians[count] / 1e6:>12.2f} "
              f"{statistics.median(cpus) / samples * 1e6:>14.3f} "
              f"{statistics.median(run[2] for run in runs[count]) / 1024:>9.1f} {sizes[count] / 1e9:>10.2f}")

    smallest = counts[0]
    print(f"\nhow the cost grows (per-rank wall time against {smallest} ranks')")
    for count in counts[1:]:
        per_rank = [run[0] / count for run in runs[count]]
        base = [run[0] / smallest for run in runs[smallest]]
        ratios = [a / b for a, b in zip(per_rank, base)]
        print(f"ratio per-rank time {count} ranks vs {smallest} ranks: {spread(ratios)}")
    if len(counts) >= 2:
        xs = [math.log(count) for count in counts]
        ys = [math.log(medians[count]) for count in counts]
        log_a, exponent = fit_line(xs, ys)
        intercept, slope = fit_line(counts, [medians[count] for count in counts])
        print(f"power law through the medians: time ~ ranks^{exponent:.3f}; 10,000 ranks: "
              f"{math.exp(log_a) * 10_000 ** exponent:.0f} s")
        print(f"straight line through the medians: {intercept:.2f} s + {slope * 1e3:.2f} ms a rank; 10,000 ranks: "
              f"{intercept + slope * 10_000:.0f} s")
    if GOAL_RANKS in medians and options.samples == 100_000:
        met = medians[GOAL_RANKS] < GOAL_S
        print(f"goal: {GOAL_RANKS} ranks of 100,000 samples in under {GOAL_S:.0f} s: median "
              f"{medians[GOAL_RANKS]:.1f} s, {'met' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
