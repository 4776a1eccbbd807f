#!/usr/bin/env python3
"""Python programs under kairos-run: CPython's frames in the samples, in place of the eval loop
(docs/runtime.md, "Python frames"). Each test runs an interpreter found here (Debian's python3,
and python3.12 or python3.13 where installed); an interpreter missing is a skip, never a pass."""
import os
import shutil
import sqlite3
import sys

from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
TIMEOUT = 90
HERE = os.path.dirname(os.path.abspath(__file__))

# Three functions with known CPU shares, one of them calling numpy (python_shares_program.py).
SHARES_PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_shares_program.py")

POOL_SCRIPT = r"""
import concurrent.futures, time

def spin(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += sum(range(300))
    return x

def worker_red(seconds):
    return spin(seconds)

def worker_green(seconds):
    return spin(seconds)

def worker_blue(seconds):
    return spin(seconds)

with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
    futures = [pool.submit(work, 0.6) for work in (worker_red, worker_green, worker_blue)]
    print(sum(1 for f in futures if f.result() > 0))
"""


def interpreters():
    """Debian's python3 first (numpy is Debian's), then other CPython versions that kairos reads."""
    found = []
    for name in ("/usr/bin/python3", "python3.12", "python3.13"):
        path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if path and os.path.realpath(path) not in [os.path.realpath(p) for p in found]:
            found.append(path)
    return found


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0", "KAIROS_OUTPUT_FORMATS": "db,text,folded",
                              "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}, **extra)


def output(directory, extension):
    where = os.path.join(directory, "kairos-output")
    paths = [os.path.join(where, name) for name in os.listdir(where) if name.endswith(extension)]
    check(len(paths) == 1, f"one {extension} in {where}: {paths}")
    return paths[0]


def database(directory):
    return sqlite3.connect(output(directory, ".db"))


def metadata(db, key):
    row = db.execute("SELECT value FROM metadata WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def python_totals(db):
    """Each Python function's inclusive CPU time, by the name before its file."""
    totals = {}
    for name, total in db.execute("SELECT name, total FROM top_functions"):
        totals[name.split(" (")[0]] = totals.get(name.split(" (")[0], 0) + total
    return totals


def run_under_kairos(directory, command, **extra):
    bare = run_process(command, TIMEOUT, cwd=directory, env=environment())
    result = run_process([KAIROS_RUN, "--"] + command, TIMEOUT, cwd=directory, env=environment(**extra))
    check(result.returncode == bare.returncode == 0,
          f"status unchanged: {result.returncode} (bare {bare.returncode}): {result.stderr.decode()[-2000:]}")
    return bare, result


def test_python_functions_take_their_shares(directory):
    found = interpreters()
    if not found:
        skip("no CPython 3.11+ here (Debian's python3)")
    for python in found:
        version = run_process([python, "-c", "import sys; print(sys.version_info[:2] >= (3, 11))"], TIMEOUT)
        if version.stdout.strip() != b"True":
            continue
        os.makedirs(os.path.join(directory, os.path.basename(python)), exist_ok=True)
        where = os.path.join(directory, os.path.basename(python))
        bare, result = run_under_kairos(where, [python, SHARES_PROGRAM, "3.0"], KAIROS_SAMPLING_FREQ=1000)
        check(result.stdout.splitlines()[1] == bare.stdout.splitlines()[1], "the program's output unchanged")
        own = dict(field.split("=") for field in result.stdout.decode().split()[:4])
        db = database(where)
        check(metadata(db, "python.version") and metadata(db, "python.note") is None,
              f"{python}: frames read ({metadata(db, 'python.version')}, {metadata(db, 'python.note')})")
        whole = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0] / 1e9
        totals = python_totals(db)
        report = []
        for name in ("pure_loop", "matrix_work", "nested_outer", "nested_inner"):
            truth = float(own["nested_outer" if name == "nested_inner" else name]) / float(own["process"])
            measured = totals.get(name, 0) / 1e9 / whole
            report.append(f"{name} {measured:.1%} (truth {truth:.1%})")
            check(abs(measured - truth) <= 0.03, f"{python}: {name} within 3 points: {', '.join(report)}")
        print(f"{python}: {', '.join(report)}")
        # The stack reads module → main → the function, and numpy's C code under matrix_work.
        with open(output(where, ".folded")) as folded:
            stacks = folded.read().splitlines()
        nested = [s for s in stacks if "nested_outer (" in s and "nested_inner (" in s]
        check(nested and all(s.index("<module> (") < s.index("main (") < s.index("nested_outer (")
                             < s.index("nested_inner (") for s in nested),
              f"{python}: <module>, main, nested_outer, nested_inner in that order: {nested[:2]}")
        eval_share = sum(int(s.rsplit(" ", 1)[1]) for s in stacks if "_PyEval_EvalFrameDefault" in s) / \
            max(sum(int(s.rsplit(" ", 1)[1]) for s in stacks), 1)
        check(eval_share < 0.02, f"{python}: the eval loop is replaced by Python frames ({eval_share:.1%} left)")
        if b"numpy" in result.stdout.splitlines()[1]:
            under_matrix = [s for s in stacks if "matrix_work (" in s]
            native_below = [s for s in under_matrix if s.split(";")[-1].split(" ")[0].find(" (") < 0
                            and not s.split(";")[-1].startswith("matrix_work")]
            check(native_below, f"{python}: numpy's native frames under matrix_work: {under_matrix[:3]}")
        lines = db.execute("SELECT COUNT(*) FROM frame WHERE language = 'python' AND line > 0").fetchone()[0]
        check(lines > 0, f"{python}: Python frames carry lines")
        with open(SHARES_PROGRAM) as program:
            loop_line = program.read().splitlines().index("            x += i * i") + 1
        hot = db.execute("""SELECT frame.line, SUM(sample.weight_ns) FROM sample JOIN stack ON stack.id = sample.stack
                            JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function
                            WHERE string.value LIKE 'pure_loop (%' GROUP BY frame.line
                            ORDER BY 2 DESC LIMIT 1""").fetchone()
        check(hot and hot[0] in (loop_line, loop_line - 1, loop_line + 1),
              f"{python}: pure_loop's hottest line is its loop ({loop_line}): {hot}")
        unmatched = int(metadata(db, "python.unmatched_samples"))
        samples = int(metadata(db, "python.samples"))
        check(samples > 0 and unmatched <= 0.05 * samples,
              f"{python}: {unmatched} of {samples} samples did not pair the two stacks")


def test_python_thread_pool_workers_named(directory):
    found = interpreters()
    if not found:
        skip("no CPython 3.11+ here (Debian's python3)")
    python = found[0]
    bare, result = run_under_kairos(directory, [python, "-c", POOL_SCRIPT], KAIROS_SAMPLING_FREQ=1000)
    check(result.stdout == bare.stdout == b"3\n", f"output unchanged: {result.stdout!r}")
    db = database(directory)
    by_thread = {}
    for thread, name in db.execute(
            """WITH RECURSIVE chain(thread, node) AS (
                 SELECT DISTINCT thread, stack FROM sample
                 UNION SELECT chain.thread, stack.parent FROM chain JOIN stack ON stack.id = chain.node
                       WHERE stack.parent IS NOT NULL)
               SELECT DISTINCT chain.thread, string.value FROM chain JOIN stack ON stack.id = chain.node
               JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function
               WHERE frame.language = 'python' AND string.value LIKE 'worker%'"""):
        by_thread.setdefault(thread, set()).add(name.split(" (")[0])
    workers = sorted(next(iter(names)) for names in by_thread.values() if len(names) == 1)
    check(workers == ["worker_blue", "worker_green", "worker_red"] and len(by_thread) == 3,
          f"each worker thread shows its own function: {by_thread}")
    totals = python_totals(db)
    for worker in ("worker_red", "worker_green", "worker_blue"):
        check(abs(totals.get(worker, 0) / 1e9 - 0.6) < 0.12, f"{worker}: {totals.get(worker, 0) / 1e9:.3f} s of 0.6")


def test_python_frames_off_leaves_the_eval_loop(directory):
    found = interpreters()
    if not found:
        skip("no CPython 3.11+ here (Debian's python3)")
    run_under_kairos(directory, [found[0], SHARES_PROGRAM, "0.5"], KAIROS_SAMPLING_PYTHON="off")
    db = database(directory)
    check(db.execute("SELECT COUNT(*) FROM frame WHERE language = 'python'").fetchone()[0] == 0,
          "no Python frames when KAIROS_SAMPLING_PYTHON=off")
    check(metadata(db, "sampling_cpu_source") == "perf ring buffer", "the ring, as for any program")


def test_program_embedding_python_shows_its_functions(directory):
    run_embedded_python(directory)
    db = database(directory)
    totals = python_totals(db)
    whole = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0]
    check(totals.get("embedded_spin", 0) > 0.8 * whole and totals.get("embedded_entry", 0) >= totals["embedded_spin"],
          f"embedded_entry and embedded_spin hold the run: {sorted(totals.items(), key=lambda kv: -kv[1])[:6]}")


def run_embedded_python(directory, *mode):
    """tests/embedded_python_program.cpp MODE under kairos-run at 1 kHz: its output as without kairos."""
    program = os.environ.get("KAIROS_EMBEDDED_PYTHON_PROGRAM", "")
    if not program:
        skip("no libpython to link a program with at configure time (python3-dev)")
    bare, result = run_under_kairos(directory, [program, *mode], KAIROS_SAMPLING_FREQ=1000)
    check(result.stdout == bare.stdout == b"embedded ok\n", f"output unchanged: {result.stdout!r}")


def native_and_python_shares(db):
    """The whole run's weight, native_spin's and embedded_spin's (inclusive), in seconds."""
    whole = db.execute("SELECT SUM(weight_ns) FROM sample").fetchone()[0] / 1e9
    totals = python_totals(db)
    native = sum(total for name, total in totals.items() if "native_spin" in name) / 1e9
    return whole, native, totals.get("embedded_spin", 0) / 1e9


def test_program_linking_python_without_starting_it_keeps_the_ring(directory):
    run_embedded_python(directory, "never")
    db = database(directory)
    check(metadata(db, "sampling_cpu_source") == "perf ring buffer",
          f"libpython linked but no interpreter started: the default ring ({metadata(db, 'sampling_cpu_source')})")
    check(int(metadata(db, "python.samples") or 0) == 0, "no sample holds Python frames")
    whole, native, _ = native_and_python_shares(db)
    check(native > 0.9 * whole, f"native_spin holds the run: {native:.3f} s of {whole:.3f} s")


def test_program_starting_python_late_shows_its_functions(directory):
    run_embedded_python(directory, "late")
    db = database(directory)
    check(metadata(db, "sampling_cpu_source") == "perf task-clock",
          f"the ring left for the perf signal once the interpreter started ({metadata(db, 'sampling_cpu_source')})")
    whole, native, python = native_and_python_shares(db)
    # 0.4 s in C++ on the ring, then 0.8 s of Python read in the thread; the interpreter's start
    # and the ring's last samples (unnamed eval loops) are the rest.
    check(native > 0.25 * whole and python > 0.5 * whole and python > 0.85 * (whole - native),
          f"native_spin {native:.3f} s and embedded_spin {python:.3f} s of {whole:.3f} s")
    threads = db.execute("SELECT COUNT(DISTINCT thread) FROM sample").fetchone()[0]
    check(threads == 1, f"the main thread alone, its samples from the ring and the signal both: {threads}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-python-frames"))
