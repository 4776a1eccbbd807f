#!/usr/bin/env python3
"""Time per MPI call (a Send/Recv ping-pong of 8 bytes between two ranks, and MPI_Allreduce of one
value), bare and under kairos-run with MPI calls recorded (KAIROS_MPI=auto) and not
(KAIROS_MPI=off, kairos's floor), configurations interleaved round by round; medians
[lowest-highest] and the ratios of medians from the same run.

Usage: mpi_call_overhead.py KAIROS_RUN BENCH_MPI_PINGPONG [rounds=7] [calls=20000]
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from interleaved import print_report, run_rounds  # noqa: E402


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
    results = run_rounds(kairos_run, [program, calls], configurations, ("pingpong_ns", "allreduce_ns"), rounds,
                         launcher=launcher, output_suffix="-%rank%")
    print_report(results, f"time per call, 2 ranks, {calls} calls, medians of {rounds} interleaved rounds "
                          "[lowest-highest]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
