#!/usr/bin/env python3
"""kairos-report's memory does not grow with samples (docs/outputs.md, "Memory stays bounded"):
every output of a profile of many samples peaks as high as that of a profile of few samples with
the same stacks. Profiles come from kairos_profile_generator (4 threads, 400 distinct stacks).

Run one test: report_memory_tests.py NAME (ctest does). Needs KAIROS_REPORT and
KAIROS_PROFILE_GENERATOR in the environment.
"""
import os
import sys

from harness import check, run_named_test, run_process, skip

KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
GENERATOR = os.environ.get("KAIROS_PROFILE_GENERATOR", "")
GNU_TIME = "/usr/bin/time"  # Debian's package time
FORMATS = ["text", "trace", "folded", "speedscope", "flamegraph", "html", "json"]
FEW_SAMPLES, MANY_SAMPLES = 30_000, 300_000
# What may differ between the two: SQLite's page cache (2 MiB by default) fills with a large file
# and not with a small one, and the allocator's arenas round. A sort or an index of the samples
# costs 47-68 bytes a sample: 12-18 MiB more here.
ALLOWED_GROWTH_KIB = 4 * 1024


def generate(directory, samples):
    result = run_process([GENERATOR, directory, "1", str(samples), "1"], 60)
    check(result.returncode == 0, f"the generator failed: {result.stderr.decode(errors='replace')}")
    return os.path.join(directory, "rank-00000.db")


def report_peak_kib(directory, database, output_format):
    """kairos-report's peak resident set, by GNU time: a child's rusage read by this script would
    also count this Python's own (Linux charges a process's memory before exec to its child)."""
    measured = os.path.join(directory, "peak-rss")
    command = [GNU_TIME, "-f", "%M", "-o", measured, KAIROS_REPORT, "-f", output_format, "-o", os.devnull,
               database]
    result = run_process(command, 60)
    check(result.returncode == 0, f"{command}: status {result.returncode}, {result.stderr.decode(errors='replace')}")
    with open(measured) as text:
        return int(text.read().split()[-1])


def test_peak_memory_of_every_output_does_not_grow_with_samples(directory):
    if not os.access(GNU_TIME, os.X_OK):
        skip(f"{GNU_TIME} (Debian's package time) is not installed")
    few = generate(os.path.join(directory, "few"), FEW_SAMPLES)
    many = generate(os.path.join(directory, "many"), MANY_SAMPLES)
    grown = []
    for output_format in FORMATS:
        small, large = (report_peak_kib(directory, profile, output_format) for profile in (few, many))
        print(f"{output_format}: {small} KiB at {FEW_SAMPLES} samples, {large} KiB at {MANY_SAMPLES}")
        if large - small > ALLOWED_GROWTH_KIB:
            grown.append(f"{output_format} {small} -> {large} KiB")
    check(not grown, f"peak memory grew with samples ({FEW_SAMPLES} -> {MANY_SAMPLES}): {', '.join(grown)}")


if __name__ == "__main__":
    if not KAIROS_REPORT or not GENERATOR:
        print("set KAIROS_REPORT and KAIROS_PROFILE_GENERATOR", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_named_test(globals(), "report-memory"))
