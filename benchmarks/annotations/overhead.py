#!/usr/bin/env python3
"""Time per OpenMP parallel region (2 threads; libgomp built by g++, libomp built by clang++) and
per NVTX range, bare and under kairos-run with the annotations recorded and without them
(KAIROS_OPENMP=off, KAIROS_ANNOTATIONS= : kairos's floor), configurations interleaved round by
round; medians [lowest-highest] and the ratios of medians from the same run.

Usage: overhead.py KAIROS_RUN BUILD_DIR [rounds=7] [regions=20000] [ranges=1000000]
(BUILD_DIR/benchmarks/annotations holds bench_openmp_regions and bench_nvtx_ranges.)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from interleaved import print_report, run_rounds  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
QUIET = {"KAIROS_OUTPUT_FORMATS": "db", "KAIROS_SAMPLING_CPUTIME": "false"}


def main():
    kairos_run, build = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    regions = sys.argv[4] if len(sys.argv) > 4 else "20000"
    ranges = sys.argv[5] if len(sys.argv) > 5 else "1000000"
    programs = os.path.join(build, "benchmarks", "annotations")
    with tempfile.TemporaryDirectory() as directory:
        openmp = [("g++, libgomp", os.path.join(programs, "bench_openmp_regions"))]
        clang = shutil.which("clang++")
        if clang:
            built = os.path.join(directory, "bench_openmp_regions_clang")
            subprocess.run([clang, "-O2", "-fopenmp", os.path.join(HERE, "bench_openmp_regions.cpp"), "-o", built],
                           check=True)
            openmp.append(("clang++, libomp (OMPT)", built))
        for label, program in openmp:
            configurations = {"bare": None, "kairos-run, KAIROS_OPENMP=off": {**QUIET, "KAIROS_OPENMP": "off"},
                              "kairos-run, OpenMP recorded": QUIET}
            results = run_rounds(kairos_run, [program, regions, "2"], configurations, ("region_ns",), rounds)
            print_report(results, f"time per parallel region of 2 threads ({label}), {regions} regions, medians of "
                                  f"{rounds} interleaved rounds [lowest-highest]")
        nvtx = os.path.join(programs, "bench_nvtx_ranges")
        if os.path.exists(nvtx):
            configurations = {"bare": None, "kairos-run, KAIROS_ANNOTATIONS=kokkos": {**QUIET,
                                                                                       "KAIROS_ANNOTATIONS": "kokkos"},
                              "kairos-run, NVTX recorded": QUIET}
            results = run_rounds(kairos_run, [nvtx, ranges], configurations, ("range_ns",), rounds)
            print_report(results, f"time per NVTX range (push and pop), {ranges} ranges, medians of {rounds} "
                                  "interleaved rounds [lowest-highest]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
