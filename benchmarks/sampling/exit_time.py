#!/usr/bin/env python3
"""Exit work against the run's length, whole processes: cpu_bound_workload under kairos-run,
sized to deliver each count of samples, with the default formats (KAIROS_OUTPUT_FORMATS's default,
read through kairos-avail) and with every format, beside the bare program. For each run: the time from the program's last instruction
(it prints CLOCK_MONOTONIC then) to kairos-run's exit, the samples the database holds, kairos's
own exit phases (stopping, database end, outputs; kairos-run -v), and the peak resident memory of
the process (GNU time, where /usr/bin/time is). Medians [lowest-highest] of the rounds, configurations interleaved round by
round.

Usage: exit_time.py BUILD_DIR [rounds, default 3] [--samples 10000,100000,1000000] [--freq HZ]
       [--threads N]
The sample counts are targets: the work is sized from the frequency and the measured CPU time of
a work unit; the table shows what the database holds.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment  # noqa: E402

OWN_TIME = "[kairos] own time, wall/CPU: "
EXIT_PHASES = ("stopping", "database end", "outputs")


def own_times(stderr):
    """{phase: wall ms} from kairos-run -v's own-time line."""
    for line in stderr.splitlines():
        if line.startswith(OWN_TIME):
            parts = {}
            for item in line[len(OWN_TIME):].split(", "):
                name, times, _ = item.rsplit(" ", 2)
                parts[name] = float(times.split("/")[0])
            return parts
    return {}


def exit_formats(kairos_avail):
    """(the default formats, every format written at exit) as KAIROS_OUTPUT_FORMATS spells them:
    the registry's (formats.hpp's table), read through kairos-avail, never a list typed here."""
    listed = subprocess.run([kairos_avail, "--settings", "--json", "--regex", "^KAIROS_OUTPUT_FORMATS$"],
                            capture_output=True, text=True, check=True)
    setting = json.loads(listed.stdout)["settings"][0]
    return setting["default"], setting["choices"]


def run_once(command, env, cwd):
    """(ms from the program's last instruction to the exit, stdout, stderr)."""
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = process.communicate()
    exited_ns = time.monotonic_ns()
    if process.returncode != 0:
        sys.exit(f"{command} failed ({process.returncode}): {stderr.decode()}")
    fields = stdout.decode().split()
    if "end_monotonic_ns" not in fields:
        sys.exit(f"{command} printed no end time: {stdout.decode()!r}")
    end_ns = int(fields[fields.index("end_monotonic_ns") + 1])
    return (exited_ns - end_ns) / 1e6, stdout.decode(), stderr.decode()


def peak_rss_mib(command, env, cwd):
    """Runs `command` once more under GNU time for its peak resident memory (the largest
    process's). Not wait4 from here: an exec keeps the forking process's peak, this script's."""
    if not os.access("/usr/bin/time", os.X_OK):
        return float("nan")
    result = subprocess.run(["/usr/bin/time", "-f", "peak_kib %M", *command], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return int(result.stderr.decode().split("peak_kib ")[-1].split()[0]) / 1024


def summary(values):
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--samples", default="10000,100000,1000000")
    parser.add_argument("--freq", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    build = os.path.abspath(options.build)
    kairos_run = os.path.join(build, "plugins/runtime/kairos-run")
    kairos_avail = os.path.join(build, "plugins/runtime/kairos-avail")
    workload = os.path.join(build, "benchmarks/sampling/cpu_bound_workload")
    for path in (kairos_run, kairos_avail, workload):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is missing: build the project first (scripts/build.sh)")
    default_formats, all_formats = exit_formats(kairos_avail)
    base_env = clean_environment(KAIROS_SAMPLING_DELAY="0")

    # A work unit's CPU time, measured bare: it sizes each run.
    with tempfile.TemporaryDirectory() as directory:
        _, stdout, _ = run_once([workload, str(8 * options.threads), "--threads", str(options.threads)],
                                base_env, directory)
    unit_s = float(stdout.split()[1]) / (8 * options.threads)
    print(f"work unit: {unit_s * 1e3:.1f} ms of CPU; {options.freq} Hz, {options.threads} threads, "
          f"{options.rounds} rounds")
    print(f"{'target':>9} {'samples':>9} {'formats':>8} {'last instruction to exit, ms':>30} "
          f"{'stopping':>9} {'db end':>7} {'outputs':>8} {'peak MiB':>9}")
    for target in (int(count) for count in options.samples.split(",")):
        units = max(options.threads, round(target / options.freq / unit_s))
        command = [workload, str(units), "--threads", str(options.threads)]
        configurations = {"bare": None, "default": default_formats, "all": all_formats}
        results = {name: {"exit": [], "samples": [], "phases": {p: [] for p in EXIT_PHASES}, "rss": []}
                   for name in configurations}
        with tempfile.TemporaryDirectory() as directory:
            for round_number in range(options.rounds):
                for name, formats in configurations.items():
                    env = dict(base_env)
                    argv = command
                    if formats:
                        env.update({"KAIROS_OUTPUT_FORMATS": formats,
                                    "KAIROS_OUTPUT_PATH": f"kairos-output/{name}-{round_number}"})
                        argv = [kairos_run, "-v", "--freq", str(options.freq), "--", *command]
                    exit_ms, _, stderr = run_once(argv, env, directory)
                    entry = results[name]
                    entry["exit"].append(exit_ms)
                    if formats:
                        database = os.path.join(directory, f"kairos-output/{name}-{round_number}.db")
                        with sqlite3.connect(database) as db:
                            entry["samples"].append(db.execute("SELECT COUNT(*) FROM sample").fetchone()[0])
                        phases = own_times(stderr)
                        for phase in EXIT_PHASES:
                            entry["phases"][phase].append(phases.get(phase, float("nan")))
                        for suffix in os.listdir(os.path.join(directory, "kairos-output")):
                            os.unlink(os.path.join(directory, "kairos-output", suffix))
            for name, formats in configurations.items():
                env = dict(base_env)
                argv = command
                if formats:
                    env.update({"KAIROS_OUTPUT_FORMATS": formats, "KAIROS_OUTPUT_PATH": "kairos-output/rss"})
                    argv = [kairos_run, "--freq", str(options.freq), "--", *command]
                results[name]["rss"].append(peak_rss_mib(argv, env, directory))
                for leftover in os.listdir(os.path.join(directory, "kairos-output")) if formats else ():
                    os.unlink(os.path.join(directory, "kairos-output", leftover))
        for name in configurations:
            entry = results[name]
            samples = f"{statistics.median(entry['samples']):.0f}" if entry["samples"] else "-"
            phases = [summary(entry["phases"][p]) if entry["samples"] else "-" for p in EXIT_PHASES]
            print(f"{target:>9} {samples:>9} {name:>8} {summary(entry['exit']):>30} {phases[0]:>9} {phases[1]:>7} "
                  f"{phases[2]:>8} {entry['rss'][0]:>9.0f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
