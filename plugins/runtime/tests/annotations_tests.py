#!/usr/bin/env python3
"""OpenMP, NVTX and Kokkos annotations (docs/openmp.md): programs that know nothing of kairos,
run with and without kairos-run, checked through the profile database.

openmp_program.cpp is built here by g++ (libgomp, wrapped entry points) and in the test by clang++
(libomp, kairos as its OMPT tool); nvtx_program.cpp uses NVTX v3's headers only (no GPU);
kokkos_hooks_program.cpp calls the Kokkos Tools hooks as Kokkos's runtime does, and kokkos_program.cpp
is a real Kokkos program (Debian's Kokkos 3.4.1, in Trilinos); roctx_program.cpp calls ROCTx's
functions in a stand-in library (roctx_double.cpp).

Run one test: annotations_tests.py NAME (ctest does). Needs KAIROS_RUN, KAIROS_OPENMP_PROGRAM,
KAIROS_KOKKOS_HOOKS_PROGRAM, KAIROS_ROCTX_PROGRAM, KAIROS_SOURCE_DIR, and KAIROS_NVTX_PROGRAM where NVTX's headers were
found and KAIROS_KOKKOS_PROGRAM where Kokkos was, in the environment.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys

from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
OPENMP_PROGRAM = os.environ.get("KAIROS_OPENMP_PROGRAM", "")
NVTX_PROGRAM = os.environ.get("KAIROS_NVTX_PROGRAM", "")
KOKKOS_PROGRAM = os.environ.get("KAIROS_KOKKOS_HOOKS_PROGRAM", "")
REAL_KOKKOS_PROGRAM = os.environ.get("KAIROS_KOKKOS_PROGRAM", "")
ROCTX_PROGRAM = os.environ.get("KAIROS_ROCTX_PROGRAM", "")
SOURCE_DIR = os.environ.get("KAIROS_SOURCE_DIR", "")
TIMEOUT = 60
UNIT_MS = 20
INSTANCES = 5
TEAM = 4


def environment(**extra):
    return clean_environment({"KAIROS_OUTPUT_FORMATS": "db,text", "KAIROS_SAMPLING_CPUTIME": "false"}, **extra)


def plain(command, **extra):
    return run_process(command, TIMEOUT, env=environment(**extra))


def profiled(directory, command, **extra):
    """The command under kairos-run: its result, kairos's stderr lines and the database (None where
    nothing was recorded, so none was written)."""
    stem = os.path.join(directory, "out")
    result = run_process([KAIROS_RUN, "-o", stem, "--", *command], TIMEOUT, env=environment(**extra))
    err = result.stderr.decode(errors="replace")
    return result, err, sqlite3.connect(stem + ".db") if os.path.exists(stem + ".db") else None


def same_output(directory, command, **extra):
    """Runs the command plainly and under kairos: output and status must be the same."""
    expected = plain(command, **extra)
    check(expected.returncode == 0, f"{command} runs: {expected.stderr.decode(errors='replace')}")
    result, err, db = profiled(directory, command, **extra)
    check(result.stdout == expected.stdout, f"output unchanged: {result.stdout!r} vs {expected.stdout!r}")
    check(result.returncode == expected.returncode, f"status unchanged: {result.returncode}: {err}")
    return err, db


def recorded(err, db):
    check(db is not None, f"a database was written: {err}")
    return db


def clang_openmp_program(directory):
    """openmp_program.cpp built by clang++ -fopenmp (libomp); skips where clang or libomp is missing."""
    clang = shutil.which("clang++")
    if clang is None:
        skip("clang++ is not installed")
    program = os.path.join(directory, "openmp_clang")
    build = subprocess.run([clang, "-O2", "-g", "-fopenmp",
                            os.path.join(SOURCE_DIR, "plugins/runtime/tests/openmp_program.cpp"), "-o", program],
                           capture_output=True, timeout=TIMEOUT)
    if build.returncode != 0 and (b"omp.h" in build.stderr or b"-lomp" in build.stderr):
        skip(f"clang's OpenMP runtime is missing (libomp-14-dev): {build.stderr.decode()}")
    check(build.returncode == 0, f"clang++ -fopenmp builds: {build.stderr.decode()}")
    return program


def parallel_region(db):
    """The one parallel region of the program's run: (name, threads, instances, imbalance)."""
    rows = db.execute("SELECT region, threads, instances, imbalance FROM openmp_imbalance").fetchall()
    check(len(rows) == 1, f"one parallel region: {rows}")
    return rows[0]


def thread_times(db, region):
    return db.execute("SELECT thread, instances, work_ns, wait_ns FROM openmp_thread_times WHERE region = ? "
                      "ORDER BY thread", (region,)).fetchall()


def check_imbalance(directory, program, runtime):
    """Thread t sleeps t+1 units: work max/mean = 4/2.5 = 1.6, thread t waits 3-t units."""
    err, db = same_output(directory, [program, "imbalance", str(UNIT_MS), str(INSTANCES)])
    name, threads, instances, imbalance = parallel_region(recorded(err, db))
    check(name.startswith("omp parallel ") and "openmp_program.cpp:" in name, f"the region is named by its code: {name}")
    check(threads == TEAM and instances == INSTANCES, f"{TEAM} threads, {INSTANCES} instances: {threads}, {instances}")
    expected = TEAM / ((TEAM + 1) / 2)
    check(abs(imbalance - expected) <= 0.05 * expected, f"max/mean work {imbalance:.4f}, known {expected}")
    times = thread_times(db, name)
    # The program's own measure of each thread's sleeps, which a loaded machine lengthens (thread 0
    # once worked 105.1 ms for 100 asked).
    slept = re.search(r"slept ns: (\d+) (\d+) (\d+) (\d+)", err)
    check(slept is not None, f"the program says how long its threads slept: {err}")
    known_ns = [int(value) for value in slept.groups()]
    largest = max(work for _, _, work, _ in times)
    for thread, count, work, wait in times:
        check(count == INSTANCES, f"thread {thread} took part in every instance: {count}")
        check(abs(work - known_ns[thread]) <= 0.05 * known_ns[thread],
              f"thread {thread} worked {work / 1e6:.1f} ms, known {known_ns[thread] / 1e6:.1f}")
        check(abs(wait - (largest - work)) <= 0.05 * largest,
              f"thread {thread} waited {wait / 1e6:.1f} ms, the difference is {(largest - work) / 1e6:.1f}")
    check(db.execute("SELECT value FROM metadata WHERE key = 'openmp.runtime'").fetchone() == (runtime,),
          f"the runtime is named: {runtime}")
    regions = db.execute("SELECT kind, COUNT(*) FROM regions WHERE name = ? GROUP BY kind", (name,)).fetchall()
    check(regions == [("openmp", TEAM * INSTANCES)], f"each thread's part of each instance is a region: {regions}")
    text = open(os.path.join(directory, "out.txt")).read()
    check("OpenMP imbalance" in text and name in text, "the text report has the imbalance table")
    check_openmp_heading(text, name)
    return db


def check_openmp_heading(text, name):
    """The text report's region tables list OpenMP's regions under their own heading, not the user API's."""
    check("OpenMP regions, by component\n" in text, f"an OpenMP heading: {text[-3000:]}")
    check("user-API regions" not in text, f"no user-API heading where the program has no user-API region: "
          f"{text[-3000:]}")
    tables = text.split("OpenMP regions, by component\n", 1)[1]
    check(name in tables, f"{name} in the OpenMP tables")


def test_openmp_imbalance_gcc(directory):
    check_imbalance(directory, OPENMP_PROGRAM, "libgomp")


def test_openmp_imbalance_clang(directory):
    check_imbalance(directory, clang_openmp_program(directory), "libomp (OMPT)")


def check_barrier(directory, program):
    """Thread t sleeps t+1 units, meets the others at a barrier, then sleeps 4-t units: every
    thread works 5 units, and waits 3-t at the barrier and t at the close: 3 units in all."""
    err, db = same_output(directory, [program, "barrier", str(UNIT_MS), str(INSTANCES)])
    name, threads, instances, imbalance = parallel_region(recorded(err, db))
    check(abs(imbalance - 1.0) <= 0.05, f"balanced work: max/mean {imbalance:.4f}")
    unit_ns = UNIT_MS * 1e6 * INSTANCES
    for thread, count, work, wait in thread_times(db, name):
        check(abs(work - 5 * unit_ns) <= 0.05 * 5 * unit_ns, f"thread {thread} worked {work / 1e6:.1f} ms")
        check(abs(wait - 3 * unit_ns) <= 0.05 * 5 * unit_ns, f"thread {thread} waited {wait / 1e6:.1f} ms, 3 units")
    barriers = db.execute("SELECT COUNT(*), COUNT(DISTINCT thread) FROM regions WHERE name = 'omp barrier' "
                          "AND kind = 'openmp'").fetchone()
    check(barriers == (TEAM * INSTANCES, TEAM), f"each thread's explicit barrier is a region: {barriers}")


def test_explicit_barrier_is_wait_gcc(directory):
    check_barrier(directory, OPENMP_PROGRAM)


def test_explicit_barrier_is_wait_clang(directory):
    check_barrier(directory, clang_openmp_program(directory))


def test_openmp_off_records_no_openmp(directory):
    err, db = same_output(directory, [OPENMP_PROGRAM, "imbalance", "1", "2"], KAIROS_OPENMP="off")
    check(db is None and "0 regions" in err, f"nothing recorded, so no database: {err}")


def test_openmp_region_in_stripped_library_named_by_its_caller(directory):
    program = os.environ.get("KAIROS_OPENMP_STRIPPED_PROGRAM", "")
    library = os.path.join(os.path.dirname(program), "libkairos_openmp_stripped.so")
    symbols = subprocess.run(["nm", library], capture_output=True, timeout=TIMEOUT)
    check(b"no symbols" in symbols.stderr, f"the library is stripped: {symbols.stdout[:200]!r} {symbols.stderr!r}")
    err, db = same_output(directory, [program])
    name, threads, instances, _ = parallel_region(recorded(err, db))
    check(name.startswith("omp parallel in stripped_parallel_sum (libkairos_openmp_stripped.so+0x"),
          f"the body, which has no symbol, is named by the function whose construct it is: {name}")
    check(threads == 4 and instances == 5, f"4 threads, 5 instances: {threads}, {instances}")
    check_openmp_heading(open(os.path.join(directory, "out.txt")).read(), name)


def test_another_ompt_tool_keeps_working(directory):
    """A tool named by OMP_TOOL_LIBRARIES still gets libomp; kairos says it steps aside."""
    program = clang_openmp_program(directory)
    tool = os.path.join(directory, "tool.so")
    source = os.path.join(directory, "tool.c")
    with open(source, "w") as out:
        out.write('#include <stdio.h>\n'
                  'typedef struct { int (*initialize)(void*, int, void*); void (*finalize)(void*); long data; } r;\n'
                  'static int initialize(void* l, int d, void* t) { puts("other tool"); return 1; }\n'
                  'static void finalize(void* t) {}\n'
                  'r* ompt_start_tool(unsigned v, const char* s) { static r result = {initialize, finalize, 0};'
                  ' return &result; }\n')
    build = subprocess.run(["clang", "-shared", "-fPIC", source, "-o", tool], capture_output=True, timeout=TIMEOUT)
    check(build.returncode == 0, f"the tool builds: {build.stderr.decode()}")
    err, db = same_output(directory, [program, "imbalance", "1", "2"], OMP_TOOL_LIBRARIES=tool)
    check("OMP_TOOL_LIBRARIES" in err and tool in err, f"kairos names the other tool: {err}")
    check(db is None and "0 regions" in err, f"kairos records no OpenMP: {err}")


def nvtx_program():
    if not NVTX_PROGRAM:
        skip("NVTX's headers (nvtx3/nvToolsExt.h, the CUDA toolkit's) were not found at configure time")
    return NVTX_PROGRAM


def test_nvtx_nested_ranges_exact_counts(directory):
    outer, inner = 10, 3
    db = recorded(*same_output(directory, [nvtx_program(), "nested", str(outer), str(inner)]))
    counts = dict(((name, kind), count) for name, kind, count in db.execute(
        "SELECT name, kind, COUNT(*) FROM regions GROUP BY name, kind"))
    check(counts.get(("outer", "nvtx")) == outer and counts.get(("solver: inner", "nvtx")) == outer * inner
          and counts.get(("tick", "nvtx")) == outer, f"exact counts by kind: {counts}")
    depths = db.execute("SELECT name, MIN(depth), MAX(depth) FROM regions WHERE kind = 'nvtx' GROUP BY name").fetchall()
    by_name = {name: (low, high) for name, low, high in depths}
    check(by_name["solver: inner"][0] == by_name["outer"][0] + 1, f"inner ranges nest in outer ones: {by_name}")
    check(db.execute("SELECT MAX(duration_ns) FROM regions WHERE name = 'tick'").fetchone()[0] < 1_000_000,
          "a mark is a region around nothing")
    phases = db.execute("SELECT kind, thread = end_thread FROM annotation_ranges WHERE name = 'phase' "
                        "ORDER BY start_ns").fetchall()
    check(phases == [("nvtx", 1), ("nvtx", 0)], f"start/end ranges, one ended on another thread: {phases}")
    check(db.execute("SELECT value FROM metadata WHERE key = 'annotations.attached'").fetchone() == ("nvtx",),
          "NVTX is named as attached")


def test_nvtx_off_leaves_nvtx_untooled(directory):
    err, db = same_output(directory, [nvtx_program(), "nested", "2", "2"], KAIROS_ANNOTATIONS="kokkos")
    check(db is None and "0 regions" in err, f"no NVTX regions: {err}")


def test_kokkos_hooks_exact_counts(directory):
    steps = 10
    db = recorded(*same_output(directory, [KOKKOS_PROGRAM, str(steps)]))
    counts = dict(db.execute("SELECT name, COUNT(*) FROM regions WHERE kind = 'kokkos' GROUP BY name"))
    check(counts == {"solve": 1, "axpy": steps, "dot": steps, "step fence": steps, "prefix": 1, "checkpoint": 1},
          f"exact counts: {counts}")
    solve_depth = db.execute("SELECT depth FROM regions WHERE name = 'solve'").fetchone()[0]
    check(db.execute("SELECT MIN(depth), MAX(depth) FROM regions WHERE name = 'axpy'").fetchone()
          == (solve_depth + 1, solve_depth + 1), "kernels nest in the profile region")
    sections = db.execute("SELECT kind, COUNT(*) FROM annotation_ranges WHERE name = 'io' GROUP BY kind").fetchall()
    check(sections == [("kokkos", 2)], f"a profile section started twice: {sections}")


def real_kokkos_program():
    if not REAL_KOKKOS_PROGRAM:
        skip("Kokkos was not found at configure time (libtrilinos-kokkos-dev)")
    return REAL_KOKKOS_PROGRAM


def test_kokkos_program_exact_counts(directory):
    # Debian's Kokkos 3.4.1 reads KOKKOS_PROFILE_LIBRARY only, from libtrilinos_kokkoscore: kairos-run
    # finds that library as the loader does and sets the variable it reads.
    steps = 10
    err, db = same_output(directory, [real_kokkos_program(), str(steps)])
    db = recorded(err, db)
    counts = dict(db.execute("SELECT name, COUNT(*) FROM regions WHERE kind = 'kokkos' GROUP BY name"))
    ours = {name: counts.pop(name, 0) for name in ("solve", "step", "axpy", "dot", "prefix", "Kokkos::deep_copy")}
    check(ours == {"solve": 1, "step": steps, "axpy": steps, "dot": steps, "prefix": 1, "Kokkos::deep_copy": 1},
          f"exact counts: {ours}")
    check(all(name.startswith("Kokkos::") for name in counts), f"the rest are Kokkos's own kernels: {counts}")
    depth = dict(db.execute("SELECT name, MIN(depth) FROM regions WHERE name IN ('solve', 'step', 'axpy', 'dot') "
                            "GROUP BY name HAVING MIN(depth) = MAX(depth)"))
    check(depth.get("step") == depth.get("solve", -9) + 1 and depth.get("axpy") == depth.get("dot") == depth["step"] + 1,
          f"kernels nest in the step region, steps in solve: {depth}")
    sections = db.execute("SELECT kind, COUNT(*) FROM annotation_ranges WHERE name = 'io' GROUP BY kind").fetchall()
    check(sections == [("kokkos", 2)], f"a profile section started twice: {sections}")
    check(db.execute("SELECT value FROM metadata WHERE key = 'annotations.attached'").fetchone() == ("kokkos",),
          "Kokkos is named as attached")


def test_kokkos_another_tool_is_said(directory):
    # A Kokkos tool the user named stays theirs (here libm, a library with no hooks, as a tool that
    # records nothing), and one [kairos] line says why there are no kokkos regions.
    err, db = same_output(directory, [real_kokkos_program(), "2"], KOKKOS_PROFILE_LIBRARY="libm.so.6")
    said = [line for line in err.splitlines() if "Kokkos tool" in line]
    check(said == ["[kairos] KOKKOS_PROFILE_LIBRARY=libm.so.6 names another Kokkos tool: kairos leaves Kokkos "
                   "Tools to it and records no kokkos regions; unset it to have them"], f"one line says so: {err}")
    check(db is None or db.execute("SELECT COUNT(*) FROM regions WHERE kind = 'kokkos'").fetchone() == (0,),
          "no kokkos regions")


def test_roctx_ranges_exact_counts(directory):
    steps = 5
    db = recorded(*same_output(directory, [ROCTX_PROGRAM, str(steps)]))
    counts = dict(db.execute("SELECT name, COUNT(*) FROM regions WHERE kind = 'roctx' GROUP BY name"))
    check(counts == {"step": 2 * steps, "substep": 4 * steps, "event": 2 * steps}, f"exact counts: {counts}")
    step_depth = db.execute("SELECT MIN(depth) FROM regions WHERE name = 'step'").fetchone()[0]
    check(db.execute("SELECT MIN(depth), MAX(depth) FROM regions WHERE name = 'substep'").fetchone()
          == (step_depth + 1, step_depth + 1), "substeps nest in steps")
    loads = db.execute("SELECT kind, COUNT(*) FROM annotation_ranges WHERE name = 'load' GROUP BY kind").fetchall()
    check(loads == [("roctx", 2)], f"start/stop ranges: {loads}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-annotations"))
