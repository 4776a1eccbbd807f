#!/usr/bin/env python3
"""kairos's fixed cost: what a run pays whatever its length, whole processes, many short rounds.

overhead.py's short runs (0.6 s) move by ±20-60 ms of CPU from round to round on these VMs, more
than the 10 ms this is about. Here the program runs 0.14 s (cpu_bound_workload 20 units on 2
threads), sampled from its start at 300 Hz (about 75 samples), so a round is short and many rounds
fit: bare; the floor (an empty handler on the same signal); kairos-run with a symbol cache its
earlier runs filled; the same without a cache (what a first run pays); kairos-run with no sampler.
Then what starting costs, on /bin/true: kairos-run with kairos disabled (the launcher), LD_PRELOAD
of libkairos.so disabled (loading it), and enabled (its constructor and exit with nothing
recorded). Configurations are interleaved round by round, their order rotated; each figure is the
median of per-round differences to bare, with the quartiles. Wall is spawn to wait4; CPU is
wait4's user + system time of the process (kairos's threads included). Last, the parts kairos's
KAIROS_VERBOSE=1 line names for the cached runs (CPU of the thread doing each).

Usage: benchmarks/sampling/fixed_cost.py [build directory (default build)] [rounds (default 30)]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OWN_TIME = "[kairos] own time, wall/CPU: "


def run(argv, environment, stderr_path=None):
    stderr = open(stderr_path, "w") if stderr_path else subprocess.DEVNULL
    begin = time.perf_counter()
    process = subprocess.Popen(argv, env=environment, stdout=subprocess.DEVNULL, stderr=stderr)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - begin
    if stderr_path:
        stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"[kairos] fixed_cost.py: {' '.join(argv)} failed (status {os.waitstatus_to_exitcode(status)})")
    return wall * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3


def quartiles(values):
    low, middle, high = statistics.quantiles(values, n=4)
    return f"{middle:7.2f} ms [{low:.2f} .. {high:.2f}]"


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build").resolve()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    subprocess.run(["cmake", "--build", build, "--target", "cpu_bound_workload", "kairos_run", "kairos_preload"],
                   check=True, stdout=subprocess.DEVNULL)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 2:
        os.sched_setaffinity(0, cpus[:2])
    kairos_run = str(build / "plugins/runtime/kairos-run")
    library = str(build / "plugins/runtime/libkairos.so")
    program = [str(build / "benchmarks/sampling/cpu_bound_workload"), "20", "--threads", "2"]
    environment = clean_environment()
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "symbol-cache")
        sampled = [kairos_run, "-o", os.path.join(work, "out", "k-%pid%"), "-s", "KAIROS_SAMPLING_DELAY=0",
                   "--freq", "300"]
        configurations = {
            "bare": (program, environment),
            "floor: empty handler 300 Hz": (program + ["--empty-handler", "300"], environment),
            "kairos, symbol cache filled": (sampled + ["-v", "-s", f"KAIROS_SYMBOL_CACHE={cache}", "--"] + program,
                                            environment),
            "kairos, no symbol cache": (sampled + ["-s", "KAIROS_SYMBOL_CACHE=off", "--"] + program, environment),
            "kairos, no sampler": (sampled + ["-s", "KAIROS_SAMPLING_CPUTIME=false", "--"] + program, environment),
            "/bin/true": (["/bin/true"], environment),
            "/bin/true under kairos-run, disabled": ([kairos_run, "-s", "KAIROS_ENABLED=false", "--", "/bin/true"],
                                                     environment),
            "/bin/true, libkairos.so preloaded, disabled": (["/bin/true"],
                                                            dict(environment, LD_PRELOAD=library,
                                                                 KAIROS_ENABLED="false")),
            "/bin/true, libkairos.so preloaded": (["/bin/true"], dict(environment, LD_PRELOAD=library)),
        }
        for _ in range(3):  # fills the symbol cache, as a user's earlier runs would
            run(*configurations["kairos, symbol cache filled"])
        names = list(configurations)
        results = {name: [] for name in names}
        parts = {}
        started = time.monotonic()
        for round_index in range(rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                argv, env = configurations[name]
                stderr_path = os.path.join(work, "stderr") if "-v" in argv else None
                results[name].append(run(argv, env, stderr_path))
                if stderr_path:
                    for line in Path(stderr_path).read_text().splitlines():
                        if line.startswith(OWN_TIME):
                            for item in line[len(OWN_TIME):].split(", "):
                                part, times, _ = item.rsplit(" ", 2)
                                parts.setdefault(part, []).append(float(times.split("/")[1]))
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    print(f"kairos's fixed cost: {rounds} interleaved rounds, {time.monotonic() - started:.0f} s, kairos {commit}, "
          f"load average {os.getloadavg()[0]:.2f}; medians of per-round differences [quartiles]")
    for group, base in ((names[1:5], "bare"), (names[6:], "/bin/true")):
        base_runs = results[base]
        print(f"\nover {base} (its wall {statistics.median(w for w, _ in base_runs):.2f} ms, "
              f"CPU {statistics.median(c for _, c in base_runs):.2f} ms)")
        for name in group:
            walls = [w - b for (w, _), (b, _) in zip(results[name], base_runs)]
            cpus_used = [c - b for (_, c), (_, b) in zip(results[name], base_runs)]
            print(f"  {name:<45} wall {quartiles(walls)}   CPU {quartiles(cpus_used)}")
    print("\nkairos's parts, symbol cache filled (KAIROS_VERBOSE=1, CPU of the thread doing each; delivery "
          "includes the symbols and the database's creation, stopping the last delivery)")
    for part, values in parts.items():
        print(f"  {part:<20} {quartiles(values)}")
    ends = ("start-up", "stopping", "database end", "outputs")
    if all(part in parts for part in ends):
        totals = [sum(values) for values in zip(*(parts[part] for part in ends))]
        print(f"  {'start-up + stopping + database end + outputs':<45} {quartiles(totals)}")


if __name__ == "__main__":
    main()
