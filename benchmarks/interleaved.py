"""Run configurations of one benchmark program interleaved round by round (bare, and under
kairos-run with settings), and print medians [lowest-highest] with the ratios of medians to the bare
run, all from the same run. The program prints its figures as "name value name value ...".
Shared by benchmarks/gpu/cuda_launch_overhead.py and benchmarks/mpi/mpi_call_overhead.py;
run_measured by benchmarks/instrumentation/overhead.py and benchmarks/peers/regions_vs_peers.py;
clean_environment by every benchmark script that runs a program."""
import os
import statistics
import subprocess
import sys
import tempfile
import time


# What reaches a program from an outer kairos or another tool: a measured run starts without it
# (plugins/runtime/tests/harness.py strips the same from the tests' runs).
TOOL_VARIABLES = ("LD_PRELOAD", "OMP_TOOL_LIBRARIES", "NVTX_INJECTION64_PATH", "KOKKOS_TOOLS_LIBS",
                  "KOKKOS_PROFILE_LIBRARY")


def clean_environment(**settings):
    """The caller's environment without any KAIROS_* setting or tool variable, in the C locale, with
    `settings` on top (as strings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_") and k not in TOOL_VARIABLES}
    env["LC_ALL"] = "C"
    env.update({k: str(v) for k, v in settings.items()})
    return env


def run_measured(command, env, cwd):
    """(wall seconds, the process's CPU seconds from wait4: user + system of every thread, its
    stdout, its stderr); ends the script, naming the command, when it fails. The benchmarks'
    programs print a line or two: their pipes never fill before wait4 returns."""
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


def run_rounds(kairos_run, command, configurations, metrics, rounds, launcher=(), output_suffix="",
               skip_status=None, skip_reason=""):
    """{configuration: {metric: [values]}}. `configurations` maps a name to the KAIROS_* settings of
    a kairos-run configuration, or None for the bare run. Ends the script when the program exits
    with skip_status (status 0, the skip marker printed) or fails (status 1, said on stderr)."""
    results = {name: {metric: [] for metric in metrics} for name in configurations}
    with tempfile.TemporaryDirectory() as directory:
        for round_number in range(rounds):
            for index, (name, settings) in enumerate(configurations.items()):
                env = clean_environment()
                run = list(command)
                if settings is not None:
                    env.update(settings)
                    stem = os.path.join(directory, f"r{round_number}-{index}{output_suffix}")
                    run = [kairos_run, "-o", stem, "--", *run]
                out = subprocess.run([*launcher, *run], env=env, capture_output=True, text=True, check=False)
                if skip_status is not None and out.returncode == skip_status:
                    print(f"KAIROS-TEST-SKIPPED: {skip_reason}")
                    sys.exit(0)
                if out.returncode != 0:
                    print(f"{name} failed ({out.returncode}): {out.stderr}", file=sys.stderr)
                    sys.exit(1)
                words = out.stdout.split()
                for position, metric in enumerate(metrics):
                    results[name][metric].append(float(words[2 * position + 1]))
    return results


def print_report(results, title, width=32):
    print(title)
    for name, values in results.items():
        cells = "  ".join(f"{what} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}]" for what, v in values.items())
        print(f"  {name:<{width}} {cells}")
    bare = next(iter(results))
    for what in results[bare]:
        baseline = statistics.median(results[bare][what])
        for name in list(results)[1:]:
            measured = statistics.median(results[name][what])
            print(f"ratio {what} {name} vs {bare}: {measured / baseline:.3f} (+{measured - baseline:.1f} ns)")
