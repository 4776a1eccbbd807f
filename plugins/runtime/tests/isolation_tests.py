#!/usr/bin/env python3
"""Isolation: libkairos.so shares no library state with the program it profiles (docs/runtime.md,
"Private dependencies"). Its export list is its own entry points and the functions it wraps, it
needs no shared SQLite, libdw, libunwind or fmt, and programs that use SQLite themselves behave
exactly as without kairos.

Run one test: isolation_tests.py NAME. Needs KAIROS_RUN, KAIROS_LIBRARY (libkairos.so),
KAIROS_EXPORTS_MAP (src/preload/exports.map) and KAIROS_SQLITE_PROGRAM."""
import os
import re
import shutil
import sqlite3
import subprocess
import sys

from harness import Skipped, check, clean_environment, run_named_test

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
LIBRARY = os.environ.get("KAIROS_LIBRARY", "")
EXPORTS_MAP = os.environ.get("KAIROS_EXPORTS_MAP", "")
PROGRAM = os.environ.get("KAIROS_SQLITE_PROGRAM", "")
TIMEOUT = 60
PRIVATE_LIBRARIES = ("libsqlite3", "libdw", "libelf", "libunwind", "libfmt", "libdebuginfod", "libstdc++")


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0"}, **extra)


def run(command, directory, env=None):
    result = subprocess.run(command, cwd=directory, env=env or environment(), capture_output=True,
                            timeout=TIMEOUT)
    return result.stdout, result.stderr.decode(errors="replace"), result.returncode


def kairos(command, directory, **extra):
    return run([KAIROS_RUN, "--", *command], directory, environment(**extra))


def kairos_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[kairos]")]


def expected_exports():
    with open(EXPORTS_MAP) as file:
        text = file.read()
    global_part = text.split("global:")[1].split("local:")[0]
    return sorted(name for name in re.findall(r"[A-Za-z_]\w*", global_part))


def test_exports_only_its_entry_points(directory):
    needs("nm")
    out = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], capture_output=True, text=True,
                         check=True).stdout
    exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    check(exported == expected_exports(),
          f"libkairos.so exports {exported}, exports.map says {expected_exports()}")


def test_needs_no_shared_copy_of_its_dependencies(directory):
    needs("readelf")
    out = subprocess.run(["readelf", "-d", LIBRARY], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", out)
    shared = [name for name in needed if name.startswith(PRIVATE_LIBRARIES)]
    check(not shared, f"libkairos.so needs shared {shared} (all it needs: {needed})")


def needs(program):
    if shutil.which(program) is None:
        raise Skipped(f"{program} is not installed here")


def test_sqlite3_shell_output_unchanged(directory):
    # kairos once initialised the shared SQLite in its constructor: the shell's own
    # sqlite3_config() calls then failed and it printed "WARNING: attempt to configure SQLite
    # after initialization." three times on stdout.
    needs("sqlite3")
    sql = "create table t(a, b); insert into t values (1, 'x'), (2, 'y'); select * from t; select 1;"
    for arguments in ([":memory:", sql], [":memory:", "-json", "select 42 as answer;"]):
        plain = run(["sqlite3", *arguments], directory)
        profiled = kairos(["sqlite3", *arguments], directory)
        check(profiled[0] == plain[0] and profiled[2] == plain[2],
              f"sqlite3 {arguments}: {profiled[0]!r} vs {plain[0]!r}, status {profiled[2]} vs {plain[2]}")
        check("WARNING" not in profiled[1], f"{profiled[1]!r}")


def test_program_configures_sqlite_before_use(directory):
    plain = run([PROGRAM, "config"], directory)
    check(plain == (b"config=0\nopen=0\ncreate=0 sum=6\n", "", 0), f"without kairos: {plain!r}")
    out, err, status = kairos([PROGRAM, "config"], directory)
    check((out, status) == (plain[0], 0), f"under kairos: {out!r} {status} {err!r}")


def test_program_with_its_own_sqlite3_open_still_gets_a_profile(directory):
    busy_path = os.path.join(directory, "program.db")
    out, err, status = kairos([PROGRAM, "own-open", busy_path], directory,
                              KAIROS_OUTPUT_PATH="kairos-output/run")
    check(status == 0 and b"own_open_calls=1" in out, f"{out!r} {status} {err!r}")
    # kairos's own database never went through the program's sqlite3_open (the count is 1: the
    # program's own call). That run is too short to record anything; a program that records
    # and uses its own SQLite at the same time is python with its sqlite3 module:
    script = ("import sqlite3, time\n"
              "db = sqlite3.connect(':memory:')\n"
              "end = time.process_time() + 0.3\n"
              "while time.process_time() < end: pass\n"
              "print(db.execute('select sqlite_version()').fetchone()[0])\n")
    out, err, status = kairos([sys.executable, "-c", script], directory,
                              KAIROS_OUTPUT_PATH="kairos-output/python")
    check(status == 0, f"{status} {err!r}")
    with sqlite3.connect(os.path.join(directory, "kairos-output", "python.db")) as db:
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "a valid profile")
        check(db.execute("SELECT COUNT(*) FROM sample").fetchone()[0] > 0, "with samples")


def test_python_sqlite_module_round_trips(directory):
    script = ("import sqlite3\n"
              "db = sqlite3.connect('data.db')\n"
              "db.execute('create table t (k text primary key, v real)')\n"
              "db.executemany('insert into t values (?, ?)', [(str(i), i / 7) for i in range(1000)])\n"
              "db.commit()\n"
              "rows = db.execute('select count(*), round(sum(v), 6) from t').fetchone()\n"
              "print(rows, sqlite3.sqlite_version, sqlite3.threadsafety)\n")
    plain = run([sys.executable, "-c", script], directory)
    os.remove(os.path.join(directory, "data.db"))
    out, err, status = kairos([sys.executable, "-c", script], directory)
    check((out, status) == (plain[0], plain[2]) and status == 0,
          f"{out!r} vs {plain[0]!r} ({status}, {err!r})")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-isolation"))
