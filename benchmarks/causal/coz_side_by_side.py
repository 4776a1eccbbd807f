#!/usr/bin/env python3
"""kairos-causal side by side with coz (Debian's coz-profiler) on the causal toys whose answer is
known (plugins/runtime/tests/causal/two_threads.cpp, pipeline.cpp, barrier_rounds.cpp in its
condvar mode, whose 0.3 ms rounds are shorter than a sample period, and fork_join.cpp, whose waits
are futexes in the program's own code), in one run.

Each toy is built twice with clang++ -O2 -gdwarf-4 -gdwarf-aranges -fno-omit-frame-pointer, the same
code: with -DKAIROS_TOY_FOR_COZ (progress marked with coz.h's COZ_PROGRESS_NAMED) for coz, and linked
to libkairos-user.so (kairos_progress) for kairos. Why those flags:
  clang++ -gdwarf-4   coz 0.2.2's DWARF reader refuses g++ 12's DWARF 5 ("unknown compilation unit
                      version 5") and finds no line in g++'s DWARF 4 either.
  -gdwarf-aranges     clang writes no .debug_aranges by default, and libdw 0.188 (Debian 12), which
                      kairos symbolizes with, then finds no line for any address: kairos's line scope
                      sees no sample in the program.
  -fno-omit-frame-pointer
                      coz finds a call site on the stack through perf's callchain, which walks frame
                      pointers: without them a sample in work() never counts for the line calling it
                      (selected-samples=0 in every experiment, a prediction of 0).
The lines sped up are those that call work() in a_work() and b_work() (two_threads, barrier_rounds),
consume_item() and produce_item() (pipeline), left_work() and right_work() (fork_join), found in the sources; each tool gets them by file:line (coz
--fixed-line, kairos --scope line --select). Speeding a_work's line up by s gains s up to 1/3;
left_work's likewise; consume_item's gains s up to 1/2; b_work's, right_work's and produce_item's
gain nothing.

Every round runs, for each toy, in an order rotated round by round:
  real      bare runs (kairos's build, no kairos) in pairs: work factor 1, then the line's work
            scaled by 0.75 or 0.5; the real speedup is 1 - base rate / rate within the pair (on this
            2-core machine a base run a minute away moved the two_threads figure by up to 10 points)
  coz       per line, one run of SECONDS per speedup (--fixed-speedup 0, 25, 50): 3 runs
  kairos    per line, one run of 3 x SECONDS drawing 0, 25 and 50% (--experiment 0.2): the same
            wall time as coz's three
  overhead  each build bare for SECONDS, and kairos-causal --speedups 0 on the first line for
            SECONDS; coz's is its 0% run above. The ratio is the toy's own printed rate under the
            tool over its build's bare rate in the same round.
A prediction comes from the tool's profile.coz (kairos writes one too, so one parser serves both):
per speedup s, P(s) = sum(duration) / sum(progress delta) over the cell's experiments, and the program
speedup is (P(0) - P(s)) / P(0), as coz's viewer computes it. Printed: medians over the rounds with
their spread (lowest-highest); a prediction's error is taken against the real speedup of its round.
A figure that cannot be computed prints MISSING and the script exits 1.

Usage: benchmarks/causal/coz_side_by_side.py [build directory (default build)] [rounds (3)]
           [--seconds S (4)] [--real-seconds R (2)]
Needs coz (apt-get install coz-profiler: coz and /usr/include/coz.h) and clang++ (apt-get install
clang); benchmarks/causal/debian-packages.txt lists them for scripts/install-deps.sh.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOYS = os.path.join(ROOT, "plugins/runtime/tests/causal")
FLAGS = ["-std=c++20", "-O2", "-gdwarf-4", "-gdwarf-aranges", "-fno-omit-frame-pointer"]
SPEEDUPS = (0, 25, 50)
REAL_FACTORS = {25: "0.75", 50: "0.5"}

# Per toy: the progress point, and per line sped up, its caller and the position of its work factor
# among the toy's arguments (SECONDS FACTOR_1 FACTOR_2).
TOY_LINES = {
    "two_threads": [("a_work", 0), ("b_work", 1)],
    "pipeline": [("consume_item", 1), ("produce_item", 0)],
    "barrier_rounds": [("a_work", 0), ("b_work", 1)],
    "fork_join": [("left_work", 0), ("right_work", 1)],
}
# Arguments a toy takes before SECONDS: barrier_rounds' barrier, its condition-variable one.
TOY_MODES = {"barrier_rounds": ["condvar"]}


def require_tools():
    missing = []
    if shutil.which("coz") is None or not os.path.exists("/usr/include/coz.h"):
        missing.append("coz and coz.h: apt-get install coz-profiler")
    if shutil.which("clang++") is None:
        missing.append("clang++: apt-get install clang")
    if missing:
        sys.exit("[kairos] coz_side_by_side.py needs what is missing here: " + "; ".join(missing) +
                 " (or scripts/install-deps.sh benchmarks/causal/debian-packages.txt)")


def work_call_line(source, function):
    """The number of the line in `function`'s body that calls work(), read from the source."""
    lines = open(source).read().splitlines()
    start = next(i for i, text in enumerate(lines) if re.search(rf"\b{function}\(.*\)\s*{{", text))
    for number in range(start + 1, len(lines)):
        if re.search(r"\bwork\(", lines[number]):
            return number + 1
    sys.exit(f"[kairos] no call of work() in {function} of {source}: the toy changed, update TOY_LINES")


def build(build_dir, work):
    subprocess.run(["cmake", "--build", build_dir, "--target", "kairos_causal", "kairos_preload", "kairos_user"],
                   check=True, stdout=subprocess.DEVNULL)
    library_dir = os.path.join(build_dir, "plugins/runtime")
    include_dir = os.path.join(ROOT, "plugins/runtime/include")
    programs = {}
    for toy in TOY_LINES:
        source = os.path.join(TOYS, f"{toy}.cpp")
        programs[toy] = {"coz": os.path.join(work, f"{toy}-coz"), "kairos": os.path.join(work, f"{toy}-kairos")}
        subprocess.run(["clang++", *FLAGS, "-DKAIROS_TOY_FOR_COZ", source, "-o", programs[toy]["coz"], "-pthread",
                        "-ldl"], check=True)
        subprocess.run(["clang++", *FLAGS, source, "-o", programs[toy]["kairos"], f"-I{include_dir}",
                        f"-L{library_dir}", f"-Wl,-rpath,{library_dir}", "-lkairos-user", "-pthread"], check=True)
    return programs


def run_rate(command, errors=None):
    """The toy's printed rate (rounds or items per second); the command's stderr appended to `errors`."""
    out = subprocess.run(command, env=clean_environment(), capture_output=True, text=True, check=False)
    found = re.search(r"per second: ([0-9.]+)", out.stdout)
    if out.returncode != 0 or found is None:
        sys.exit(f"[kairos] {' '.join(command)} failed (status {out.returncode}): {out.stderr[-2000:]}")
    if errors is not None:
        errors.append(out.stderr)
    return float(found.group(1))


def read_profile(path, location):
    """{speedup percent: (summed duration, summed progress delta, experiments)} of `location`'s
    experiments in a profile.coz (coz's own format, tab-separated key=value records)."""
    cells = {}
    current = None
    for line in open(path):
        kind, *fields = line.rstrip("\n").split("\t")
        values = dict(field.split("=", 1) for field in fields if "=" in field)
        if kind == "experiment":
            current = None
            # kairos names a file under the working directory by its relative path, coz by the debug
            # information's (full) path.
            if values["selected"] == location or location.endswith("/" + values["selected"]):
                current = round(float(values["speedup"]) * 100)
                duration, delta, count = cells.get(current, (0, 0, 0))
                cells[current] = (duration + int(values["duration"]), delta, count + 1)
        elif kind == "throughput-point" and current is not None:
            duration, delta, count = cells[current]
            cells[current] = (duration, delta + int(values["delta"]), count)
    return cells


def predictions(cells):
    """{speedup: predicted program speedup}: (P0 - Ps) / P0, P = summed duration / summed delta."""
    period = {s: duration / delta for s, (duration, delta, _) in cells.items() if delta > 0}
    if 0 not in period:
        return {}
    return {s: (period[0] - value) / period[0] for s, value in period.items() if s != 0}


def merge(cell_maps):
    merged = {}
    for cells in cell_maps:
        for s, (duration, delta, count) in cells.items():
            old = merged.get(s, (0, 0, 0))
            merged[s] = (old[0] + duration, old[1] + delta, old[2] + count)
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="one coz run; kairos gets 3x per line")
    parser.add_argument("--real-seconds", type=float, default=2.0, help="one bare run measuring a real speedup")
    args = parser.parse_args()
    require_tools()
    args.build = os.path.abspath(args.build)
    kairos_causal = os.path.join(args.build, "plugins/runtime/kairos-causal")
    seconds = f"{args.seconds:g}"
    kairos_seconds = f"{args.seconds * len(SPEEDUPS):g}"
    real_seconds = f"{args.real_seconds:g}"
    lines = {toy: [(function, work_call_line(os.path.join(TOYS, f"{toy}.cpp"), function), factor)
                   for function, factor in entries] for toy, entries in TOY_LINES.items()}

    # results[key] is a list with one entry per round.
    results = {}

    def add(key, value):
        results.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory() as work:
        programs = build(args.build, work)
        tasks = []  # (name, function of the round number): one configuration's runs in a round
        for toy, entries in lines.items():
            mode = TOY_MODES.get(toy, [])
            bare, for_coz = [programs[toy]["kairos"], *mode], [programs[toy]["coz"], *mode]
            source = os.path.join(TOYS, f"{toy}.cpp")

            def factors(position, factor):
                values = ["1", "1"]
                values[position] = factor
                return values

            for function, line, position in entries:
                location = f"{source}:{line}"
                for percent, factor in REAL_FACTORS.items():
                    tasks.append((f"{toy} real {function} {percent}", lambda r, toy=toy, bare=bare, function=function,
                                  percent=percent, arguments=factors(position, factor):
                                  add((toy, "real", function, percent),
                                      1 - run_rate([*bare, real_seconds, "1", "1"])
                                      / run_rate([*bare, real_seconds, *arguments]))))

                def coz_runs(r, toy=toy, function=function, location=location, for_coz=for_coz):
                    cell_maps = []
                    for percent in SPEEDUPS:
                        profile = os.path.join(work, f"coz-{toy}-{function}-{percent}-{r}.coz")
                        rate = run_rate(["coz", "run", "--fixed-line", location, "--fixed-speedup", str(percent),
                                         "-o", profile, "---", *for_coz, seconds])
                        if percent == 0:
                            add((toy, "coz rate", function), rate)
                        cell_maps.append(read_profile(profile, location))
                    add((toy, "coz", function), merge(cell_maps))

                def kairos_runs(r, toy=toy, function=function, line=line, bare=bare, location=location):
                    output = os.path.join(work, f"kairos-{toy}-{function}-{r}")
                    errors = []
                    run_rate([kairos_causal, "--scope", "line", "--select", rf"{re.escape(toy)}\.cpp:{line}$",
                              "--speedups", ",".join(map(str, SPEEDUPS)), "--experiment", "0.2", "-o", output,
                              "--", *bare, kairos_seconds], errors)
                    profile = os.path.join(output, "profile.coz")
                    if not os.path.exists(profile):
                        print(f"kairos-causal wrote no profile.coz for {toy} {function}: {errors[0][-600:]}",
                              file=sys.stderr)
                    add((toy, "kairos", function), read_profile(profile, location) if os.path.exists(profile) else {})

                tasks.append((f"{toy} coz {function}", coz_runs))
                tasks.append((f"{toy} kairos {function}", kairos_runs))
            first_function, first_line = entries[0][0], entries[0][1]
            tasks.append((f"{toy} bare, kairos build", lambda r, toy=toy, bare=bare:
                          add((toy, "bare rate", "kairos"), run_rate([*bare, seconds, "1", "1"]))))
            tasks.append((f"{toy} bare, coz build", lambda r, toy=toy, for_coz=for_coz:
                          add((toy, "bare rate", "coz"), run_rate([*for_coz, seconds, "1", "1"]))))

            def kairos_overhead(r, toy=toy, line=first_line, bare=bare):
                output = os.path.join(work, f"kairos-{toy}-overhead-{r}")
                add((toy, "kairos rate"), run_rate([kairos_causal, "--scope", "line", "--select",
                                                    rf"{re.escape(toy)}\.cpp:{line}$", "--speedups", "0",
                                                    "--experiment", "0.2", "-o", output, "--", *bare, seconds]))
            tasks.append((f"{toy} kairos overhead", kairos_overhead))

        load_before = open("/proc/loadavg").read().split()[:3]
        for round_number in range(args.rounds):
            shift = round_number % len(tasks)
            for name, task in tasks[shift:] + tasks[:shift]:
                print(f"round {round_number + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
                task(round_number)
        load_after = open("/proc/loadavg").read().split()[:3]

    missing = []

    def spread(values, form="{:+.1%}", label=""):
        values = [v for v in values if v is not None]
        if len(values) < args.rounds:
            missing.append(label)
            return "MISSING"
        text = lambda v: form.format(v)
        return f"{text(statistics.median(values))} ({text(min(values))} to {text(max(values))})"

    print(f"{args.rounds} rounds; coz: 3 runs of {seconds} s per line (one per speedup), kairos: one run of "
          f"{kairos_seconds} s per line; real speedups from pairs of bare runs of {real_seconds} s; load average "
          f"{' '.join(load_before)} before, {' '.join(load_after)} after")
    print("medians over the rounds (lowest to highest); errors in points against the round's real speedup")
    header = (f"{'toy, line sped up':<30} {'real':<26} {'coz':<26} {'coz error':<26} {'kairos':<26} "
              f"{'kairos error':<26}")
    print(header)
    for toy, entries in lines.items():
        for function, line, _ in entries:
            for percent in REAL_FACTORS:
                real = results[(toy, "real", function, percent)]
                label = f"{toy} {function} (:{line}) {percent}%"
                row = [spread(real, label=f"{label} real")]
                for tool in ("coz", "kairos"):
                    predicted = [predictions(cells).get(percent) for cells in results[(toy, tool, function)]]
                    errors = [None if p is None else (p - r) * 100 for p, r in zip(predicted, real)]
                    row += [spread(predicted, label=f"{label} {tool}"),
                            spread(errors, "{:+.1f}", label=f"{label} {tool} error")]
                print(f"{label:<30} " + " ".join(f"{cell:<26}" for cell in row))
    print()
    print("experiments completed in equal wall time, per line, per round (coz: its 3 runs; kairos: its one run)")
    for toy, entries in lines.items():
        for function, line, _ in entries:
            counts = {tool: [sum(count for _, _, count in cells.values()) for cells in results[(toy, tool, function)]]
                      for tool in ("coz", "kairos")}
            print(f"  {toy} {function:<14} coz {spread(counts['coz'], '{:.0f}')}   "
                  f"kairos {spread(counts['kairos'], '{:.0f}')}")
    print()
    print(f"overhead at 0% speedup: the toy's rate under the tool over its build's bare rate in the round, "
          f"{seconds} s runs (coz --fixed-speedup 0 on the first line; kairos-causal --speedups 0 on it)")
    for toy, entries in lines.items():
        coz = [tool / bare for tool, bare in zip(results[(toy, "coz rate", entries[0][0])],
                                                  results[(toy, "bare rate", "coz")])]
        kairos = [tool / bare for tool, bare in zip(results[(toy, "kairos rate")], results[(toy, "bare rate", "kairos")])]
        print(f"  {toy:<12} bare rate {spread(results[(toy, 'bare rate', 'kairos')], '{:.1f}')} (kairos build), "
              f"{spread(results[(toy, 'bare rate', 'coz')], '{:.1f}')} (coz build)")
        print(f"  {'':<12} coz {spread(coz, '{:.3f}', f'{toy} coz overhead')}   "
              f"kairos {spread(kairos, '{:.3f}', f'{toy} kairos overhead')}")
    if missing:
        print(f"MISSING: {', '.join(missing)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
