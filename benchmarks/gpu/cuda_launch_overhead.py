#!/usr/bin/env python3
"""Host time per CUDA kernel launch and per async copy, bare and under kairos-run (GPU observed
through CUPTI with and without call stacks, and KAIROS_GPU=off as kairos's floor), configurations
interleaved round by round;
medians [lowest-highest] and the ratios of medians from the same run. Needs a CUDA device.

Usage: cuda_launch_overhead.py KAIROS_RUN BENCH_CUDA_LAUNCH [rounds=7] [calls=20000]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from interleaved import print_report, run_rounds  # noqa: E402


def main():
    kairos_run, program = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    calls = sys.argv[4] if len(sys.argv) > 4 else "20000"
    configurations = {"bare": None, "kairos-run, KAIROS_GPU=off": {"KAIROS_GPU": "off"},
                      "kairos-run, GPU observed": {"KAIROS_GPU": "auto"},
                      "kairos-run, observed, no stacks": {"KAIROS_GPU": "auto", "KAIROS_GPU_STACKS": "false"}}
    results = run_rounds(kairos_run, [program, calls], configurations, ("launch_ns", "memcpy_ns"), rounds,
                         skip_status=3, skip_reason="no CUDA device")
    print_report(results, f"host time per call, {calls} calls, medians of {rounds} interleaved rounds [lowest-highest]",
                 width=28)
    return 0


if __name__ == "__main__":
    sys.exit(main())
