#!/usr/bin/env python3
"""Time per MPI call (a Send/Recv ping-pong of 8 bytes between two ranks, and MPI_Allreduce of one
value), bare and under kairos-run with MPI calls recorded (KAIROS_MPI=auto) and not
(KAIROS_MPI=off, kairos's floor), configurations interleaved round by round; medians
[lowest-highest] and the ratios of medians from the same run.

Usage: mpi_call_overhead.py KAIROS_RUN BENCH_MPI_PINGPONG [rounds=7] [calls=20000]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def main():
    kairos_run, program = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    calls = sys.argv[4] if len(sys.argv) > 4 else "20000"
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("KAIROS-TEST-SKIPPED: mpirun not found")
        return 0
    launcher = [mpirun, "--oversubscribe", "-np", "2"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    configurations = {"bare": None, "kairos-run, KAIROS_MPI=off": {"KAIROS_MPI": "off"},
                      "kairos-run, MPI calls recorded": {"KAIROS_MPI": "auto"}}
    results = {name: {"pingpong_ns": [], "allreduce_ns": []} for name in configurations}
    with tempfile.TemporaryDirectory() as directory:
        for round_number in range(rounds):
            for index, (name, settings) in enumerate(configurations.items()):
                env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
                command = [program, calls]
                if settings is not None:
                    env.update(settings)
                    command = [kairos_run, "-o", os.path.join(directory, f"r{round_number}-{index}-%rank%"), "--",
                               *command]
                out = subprocess.run(launcher + command, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(f"{name} failed ({out.returncode}): {out.stderr}", file=sys.stderr)
                    return 1
                words = out.stdout.split()
                results[name]["pingpong_ns"].append(float(words[1]))
                results[name]["allreduce_ns"].append(float(words[3]))
    print(f"time per call, 2 ranks, {calls} calls, medians of {rounds} interleaved rounds [lowest-highest]")
    for name, values in results.items():
        cells = "  ".join(f"{what} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}]" for what, v in values.items())
        print(f"  {name:<32} {cells}")
    for what in ("pingpong_ns", "allreduce_ns"):
        baseline = statistics.median(results["bare"][what])
        for name in list(configurations)[1:]:
            measured = statistics.median(results[name][what])
            print(f"ratio {what} {name} vs bare: {measured / baseline:.3f} (+{measured - baseline:.1f} ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
