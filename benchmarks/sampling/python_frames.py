#!/usr/bin/env python3
"""Python programs under kairos beside Austin (a Python frame sampler, built from its public
source where Debian's 1.0 cannot read this interpreter): the runtime tests'
python_shares_program.py, configurations interleaved round by round, medians [lowest-highest] and
ratios of medians from the same run.

Prints, per configuration: wall time and process CPU time (user + system of every thread and
child, wait4); samples delivered; each function's share of the samples' weight against the
program's own thread CPU time (the truth). Then the wall ratio at kairos's defaults (goal: within
3% of bare), and the cost of a sample with Python frames against a native one on the same source
and rate (the perf signal; goal: at most 1.2x): (process CPU - bare) / samples, frames on and off.

Usage: python_frames.py [build directory] [rounds, default 5] [--austin PATH] [--python PATH]
  --austin: an austin executable (3.x), or its source tree, built here with cc
  --python: the interpreter (default /usr/bin/python3, Debian's, with numpy)"""
import argparse
import glob
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment, run_measured  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHARES_PROGRAM = os.path.join(HERE, "../../plugins/runtime/tests/python_shares_program.py")
FUNCTIONS = ("pure_loop", "matrix_work", "nested_outer")


def austin_binary(path, directory):
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    sources = [os.path.join(path, "src", name) for name in ("argparse.c", "austin.c", "cache.c", "error.c",
                                                             "logging.c", "stats.c", "platform.c",
                                                             "py_proc_list.c", "py_proc.c", "py_thread.c")]
    binary = os.path.join(directory, "austin")
    subprocess.run(["cc", "-O2", "-pthread", "-I", os.path.join(path, "src"), "-o", binary, *sources, "-lm"],
                   check=True)
    return binary


def truth(output):
    fields = dict(word.split("=") for word in output.splitlines()[0].split())
    return {name: float(fields[name]) / float(fields["process"]) for name in FUNCTIONS}


def kairos_figures(stem_directory):
    found = glob.glob(os.path.join(stem_directory, "*.db"))
    if not found:  # a run that ended before the sampling delay writes none
        return 0, {name: 0.0 for name in FUNCTIONS}
    db = sqlite3.connect(found[0])
    samples, whole = db.execute("SELECT COUNT(*), SUM(weight_ns) FROM sample").fetchone()
    totals = {}
    for name, total in db.execute("SELECT name, total FROM top_functions"):
        totals[name.split(" (")[0]] = totals.get(name.split(" (")[0], 0) + total
    return samples, {name: totals.get(name, 0) / whole for name in FUNCTIONS}


def austin_figures(path):
    """Austin writes one line a sample: 'P<pid>;T<tid>;file:function:line;... <microseconds>'."""
    samples, whole, totals = 0, 0, {name: 0 for name in FUNCTIONS}
    with open(path) as trace:
        for line in trace:
            if not line.startswith("P"):
                continue
            stack, _, metric = line.rstrip().rpartition(" ")
            samples += 1
            whole += int(metric)
            names = {frame.split(":")[1] for frame in stack.split(";")[2:] if frame.count(":") >= 2}
            for name in FUNCTIONS:
                if name in names:
                    totals[name] += int(metric)
    return samples, {name: totals[name] / max(whole, 1) for name in FUNCTIONS}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--austin")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--seconds", default="3.0")
    options = parser.parse_args()
    kairos_run = os.path.join(os.path.abspath(options.build), "plugins/runtime/kairos-run")
    program = [options.python, SHARES_PROGRAM, options.seconds]
    with tempfile.TemporaryDirectory(prefix="kairos-python-frames-") as directory:
        signal = {"KAIROS_SAMPLING_DELAY": "0", "KAIROS_SAMPLING_FREQ": "1000",
                  "KAIROS_SAMPLING_CPUTIME_SOURCE": "perf", "KAIROS_OUTPUT_FORMATS": "db"}
        configurations = {
            "bare": None,
            "kairos defaults": {},
            "kairos 1 kHz, native frames": dict(signal, KAIROS_SAMPLING_PYTHON="off"),
            "kairos 1 kHz, Python frames": dict(signal, KAIROS_SAMPLING_PYTHON="on"),
        }
        if options.austin:
            configurations["austin 1 kHz, CPU time (-s)"] = austin_binary(options.austin, directory)
        figures = {name: {"wall": [], "cpu": [], "samples": [], "shares": []} for name in configurations}
        for round_index in range(options.rounds):
            for index, (name, settings) in enumerate(configurations.items()):
                where = os.path.join(directory, f"r{round_index}-{index}")
                os.makedirs(where)
                env = clean_environment(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
                command = program
                if isinstance(settings, dict):
                    env.update(settings, KAIROS_OUTPUT_PATH=os.path.join(where, "profile"))
                    command = [kairos_run, "--", *program]
                elif isinstance(settings, str):
                    command = [settings, "-s", "-i", "1000", "-o", os.path.join(where, "austin.txt"), *program]
                wall, cpu, output, _ = run_measured(command, env, where)
                figures[name]["wall"].append(wall)
                figures[name]["cpu"].append(cpu)
                expected = truth(output)
                if isinstance(settings, dict):
                    samples, shares = kairos_figures(where)
                elif isinstance(settings, str):
                    samples, shares = austin_figures(os.path.join(where, "austin.txt"))
                else:
                    samples, shares = 0, expected
                figures[name]["samples"].append(samples)
                figures[name]["shares"].append({f: shares[f] - expected[f] for f in FUNCTIONS})
    median = statistics.median
    print(f"{options.python} python_shares_program.py {options.seconds}: {options.rounds} interleaved rounds, "
          "median [lowest-highest]")
    for name, values in figures.items():
        cells = [f"wall {median(values['wall']):.3f} s [{min(values['wall']):.3f}-{max(values['wall']):.3f}]",
                 f"CPU {median(values['cpu']):.3f} s [{min(values['cpu']):.3f}-{max(values['cpu']):.3f}]"]
        if name != "bare":
            cells.append(f"samples {median(values['samples']):.0f}")
        if name not in ("bare", "kairos defaults"):  # the defaults sample from 0.5 s on: not the whole run
            errors = {f: median([round_shares[f] for round_shares in values["shares"]]) for f in FUNCTIONS}
            cells.append("shares - truth: " + ", ".join(f"{f} {errors[f] * 100:+.1f}" for f in FUNCTIONS))
        print(f"  {name:30} " + "  ".join(cells))
    if not options.austin:
        print("austin: skipped, --austin not given")
    bare_wall, bare_cpu = median(figures["bare"]["wall"]), median(figures["bare"]["cpu"])
    for name in list(figures)[1:]:
        print(f"ratio wall {name} vs bare: {median(figures[name]['wall']) / bare_wall:.3f}")
    per_sample = {}
    for name in ("kairos 1 kHz, native frames", "kairos 1 kHz, Python frames"):
        extra, samples = median(figures[name]["cpu"]) - bare_cpu, median(figures[name]["samples"])
        # A short round on a loaded machine can leave a sampled run cheaper than the bare one: no cost
        # can be read from it, and a negative one would be noise printed as a figure.
        per_sample[name] = extra / samples if extra > 0 and samples > 0 else None
        cost = f"{per_sample[name] * 1e6:.1f} us" if per_sample[name] else \
            f"not measured (CPU {extra * 1e3:+.0f} ms against bare over {samples:.0f} samples)"
        print(f"cost per sample, {name}: {cost}")
    native, python = per_sample["kairos 1 kHz, native frames"], per_sample["kairos 1 kHz, Python frames"]
    ratio = f"{python / native:.2f}" if native and python else \
        "not measured (a sampled run was not slower than bare: more rounds or a longer --seconds)"
    print(f"ratio cost per sample, Python frames vs native: {ratio}")


if __name__ == "__main__":
    main()
