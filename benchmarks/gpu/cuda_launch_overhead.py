#!/usr/bin/env python3
"""Host time per CUDA kernel launch and per async copy, bare and under kairos-run (GPU observed
through CUPTI with and without call stacks, and KAIROS_GPU=off as kairos's floor), configurations
interleaved round by round;
medians [lowest-highest] and the ratios of medians from the same run. Needs a CUDA device.

Usage: cuda_launch_overhead.py KAIROS_RUN BENCH_CUDA_LAUNCH [rounds=7] [calls=20000]
"""
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    kairos_run, program = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    calls = sys.argv[4] if len(sys.argv) > 4 else "20000"
    configurations = {"bare": None, "kairos-run, KAIROS_GPU=off": {"KAIROS_GPU": "off"},
                      "kairos-run, GPU observed": {"KAIROS_GPU": "auto"},
                      "kairos-run, observed, no stacks": {"KAIROS_GPU": "auto", "KAIROS_GPU_STACKS": "false"}}
    results = {name: {"launch_ns": [], "memcpy_ns": []} for name in configurations}
    with tempfile.TemporaryDirectory() as directory:
        for round_number in range(rounds):
            for index, (name, settings) in enumerate(configurations.items()):
                env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
                command = [program, calls]
                if settings is not None:
                    env.update(settings)
                    command = [kairos_run, "-o", os.path.join(directory, f"r{round_number}-{index}"), "--", *command]
                out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if out.returncode == 3:
                    print("KAIROS-TEST-SKIPPED: no CUDA device")
                    return 0
                if out.returncode != 0:
                    print(f"{name} failed ({out.returncode}): {out.stderr}", file=sys.stderr)
                    return 1
                words = out.stdout.split()
                results[name]["launch_ns"].append(float(words[1]))
                results[name]["memcpy_ns"].append(float(words[3]))
    print(f"host time per call, {calls} calls, medians of {rounds} interleaved rounds [lowest-highest]")
    for name, values in results.items():
        cells = "  ".join(f"{what} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}]" for what, v in values.items())
        print(f"  {name:<28} {cells}")
    for what in ("launch_ns", "memcpy_ns"):
        baseline = statistics.median(results["bare"][what])
        for name in list(configurations)[1:]:
            measured = statistics.median(results[name][what])
            print(f"ratio {what} {name} vs bare: {measured / baseline:.3f} (+{measured - baseline:.1f} ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
