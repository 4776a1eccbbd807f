#!/usr/bin/env python3
"""kairos-merge's command line (docs/merge.md): inputs as files, directories and globs, bad inputs
named and skipped, --keep-going, progress lines, and kairos-report on a merged database. Inputs
come from kairos_profile_generator (rank databases written by the database plugin's writer).

Run one test: merge_tests.py NAME (ctest does). Needs KAIROS_MERGE, KAIROS_REPORT and
KAIROS_PROFILE_GENERATOR in the environment.
"""
import os
import shutil
import sqlite3
import sys

from harness import check, run_named_test, run_process

KAIROS_MERGE = os.environ.get("KAIROS_MERGE", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
GENERATOR = os.environ.get("KAIROS_PROFILE_GENERATOR", "")
TIMEOUT = 30


def generate(directory, count, samples=200, launch_id=""):
    """count rank databases, directory/rank-00000.db ..."""
    result = run_process([GENERATOR, directory, str(count), str(samples), "4", *([launch_id] if launch_id else [])],
                         TIMEOUT)
    check(result.returncode == 0, f"the generator failed: {result.stderr.decode(errors='replace')}")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".db"))


def merge(*arguments):
    """kairos-merge's (exit status, stderr)."""
    result = run_process([KAIROS_MERGE, *arguments], TIMEOUT)
    return result.returncode, result.stderr.decode(errors="replace")


def scalar(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(sql).fetchone()[0]


def test_bad_arguments_name_the_input_and_what_is_accepted(directory):
    inputs = os.path.join(directory, "in")
    generate(inputs, 2)
    out = os.path.join(directory, "all.db")
    status, err = merge(os.path.join(inputs, "rank-00000.db"))
    check(status != 0 and "--output" in err, f"no -o: status {status}, {err!r}")
    status, err = merge("-o", out)
    check(status != 0 and "inputs" in err, f"no inputs: status {status}, {err!r}")
    accepted = "kairos-merge takes profile databases (.db files), directories holding them, or globs"
    missing = os.path.join(directory, "missing.db")
    status, err = merge("-o", out, missing)
    check(status == 2 and f"input '{missing}' does not exist" in err and accepted in err,
          f"a missing input: status {status}, {err!r}")
    empty = os.path.join(directory, "empty")
    os.mkdir(empty)
    status, err = merge("-o", out, empty)
    check(status == 2 and f"input '{empty}' is a directory with no .db files" in err, f"{status}, {err!r}")
    pattern = os.path.join(inputs, "nothing-*.db")
    status, err = merge("-o", out, pattern)
    check(status == 2 and f"input '{pattern}' is a glob that matches no file" in err, f"{status}, {err!r}")
    check(not os.path.exists(out), "no output is created when an argument is wrong")
    existing = os.path.join(inputs, "rank-00001.db")
    status, err = merge("-o", existing, os.path.join(inputs, "rank-00000.db"))
    check(status == 2 and f"'{existing}' already exists" in err and "give -o a new path" in err,
          f"an existing output: status {status}, {err!r}")


def test_directories_and_globs(directory):
    inputs = os.path.join(directory, "in")
    generate(inputs, 6)
    everything = os.path.join(directory, "everything.db")
    status, err = merge("-o", everything, inputs)
    check(status == 0, f"a directory: status {status}, {err!r}")
    check(scalar(everything, "SELECT COUNT(*) FROM process") == 6, "a directory's 6 databases are merged")
    check(scalar(everything, "SELECT COUNT(*) FROM sample") == 6 * 200, "with all their samples")
    check("[kairos] merged 6/6 inputs, 1,200 samples, " in err and "samples/s" in err and " M samples" not in err,
          f"the progress line counts samples as numbers a reader takes in: {err!r}")
    some = os.path.join(directory, "some.db")
    status, err = merge("-o", some, os.path.join(inputs, "rank-0000[0-2].db"))
    check(status == 0, f"a glob: status {status}, {err!r}")
    check(scalar(some, "SELECT group_concat(rank) FROM (SELECT rank FROM process ORDER BY rank)") == "0,1,2",
          "a glob's 3 matches are merged")
    check("[kairos] merged 3/3 inputs" in err and f"{some}: 3 of 3 inputs merged (3 processes, 600 samples)" in err,
          f"plain progress lines and a summary when stderr is not a terminal: {err!r}")


def test_bad_inputs_are_named_and_skipped_unless_keep_going(directory):
    inputs = os.path.join(directory, "in")
    good = generate(inputs, 3)
    garbage = os.path.join(inputs, "garbage.db")
    with open(garbage, "wb") as file:
        file.write(b"not a database" * 1000)
    old = os.path.join(inputs, "old.db")
    shutil.copy(good[0], old)
    with sqlite3.connect(old) as db:
        db.execute("UPDATE metadata SET value = '4' WHERE key = 'schema_version'")
    out = os.path.join(directory, "all.db")
    status, err = merge("-o", out, inputs)
    check(status == 1, f"skipped inputs make the exit status 1: {status}, {err!r}")
    check(f"'{garbage}' is not a kairos profile database (skipped)" in err, f"the corrupt input is named: {err!r}")
    check(f"'{old}' has schema version '4'" in err, f"the other version is named: {err!r}")
    check("3 of 5 inputs merged" in err and "2 skipped, named above" in err, f"the summary counts them: {err!r}")
    check(scalar(out, "SELECT COUNT(*) FROM process") == 3, "the good inputs are merged")
    kept = os.path.join(directory, "kept.db")
    status, err = merge("--keep-going", "-o", kept, inputs)
    check(status == 0 and "2 skipped" in err, f"--keep-going: status {status}, {err!r}")
    check(scalar(kept, "SELECT COUNT(*) FROM process") == 3, "--keep-going merges the same")


def test_same_input_twice_is_refused(directory):
    inputs = generate(os.path.join(directory, "in"), 2, launch_id="job-7")
    out = os.path.join(directory, "all.db")
    status, err = merge("-o", out, inputs[0], inputs[1], inputs[0])
    check(status == 1, f"status {status}, {err!r}")
    check(f"'{inputs[0]}': its process (pid 10000 on host 'node-0' of launch 'job-7') is already merged, "
          f"from '{inputs[0]}'" in err, f"the second copy is named with the first: {err!r}")
    check(scalar(out, "SELECT COUNT(*) FROM process") == 2, "each process once")


def test_two_launches_are_refused_unless_several_launches(directory):
    first = generate(os.path.join(directory, "first"), 2, launch_id="job-1")
    second = generate(os.path.join(directory, "second"), 2, launch_id="job-2")
    without_launch = generate(os.path.join(directory, "plain"), 1)
    out = os.path.join(directory, "all.db")
    status, err = merge("-o", out, *first, *second)
    check(status == 2 and f"the inputs hold two launches: 'job-1' (in '{first[0]}') and 'job-2' (in '{second[0]}')"
          in err and "--several-launches" in err, f"two launches refused, each named with an input: {status}, {err!r}")
    check(not os.path.exists(out), "nothing is written")
    status, err = merge("-o", out, *first, *without_launch)
    check(status == 0, f"a process without a launch id joins one launch: {status}, {err!r}")
    together = os.path.join(directory, "together.db")
    status, err = merge("--several-launches", "-o", together, *first, *second)
    check(status == 0 and scalar(together, "SELECT COUNT(DISTINCT launch_id) FROM process") == 2,
          f"--several-launches merges both: {status}, {err!r}")
    status, err = merge("-o", os.path.join(directory, "again.db"), together)
    check(status == 2 and "two launches" in err, f"a merge of two launches is two launches: {status}, {err!r}")


def test_merged_databases_merge_again(directory):
    inputs = generate(os.path.join(directory, "in"), 4)
    first, second, again = (os.path.join(directory, name) for name in ("first.db", "second.db", "again.db"))
    check(merge("-o", first, *inputs[:2])[0] == 0 and merge("-o", second, *inputs[2:])[0] == 0, "two merges")
    status, err = merge("-o", again, first, second)
    check(status == 0, f"a merge of merges: status {status}, {err!r}")
    check(scalar(again, "SELECT COUNT(*) FROM process") == 4, "every process")
    status, err = merge("-o", os.path.join(directory, "overlap.db"), again, inputs[3])
    check(status == 1 and "already merged" in err, f"a process in a merged input and again alone: {err!r}")


def test_input_left_in_the_middle_of_a_commit_is_read_to_its_last_commit(directory):
    inputs = generate(os.path.join(directory, "in"), 2)
    # What a program killed during a commit leaves: pages of the unfinished transaction written
    # into the file (a one-page cache spills them), the originals in a hot journal beside it.
    script = ("import os, sqlite3, sys\n"
              "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "db.execute('PRAGMA cache_size = 1')\n"
              "db.execute('BEGIN')\n"
              "for _ in range(6):  # 200 rows doubled six times\n"
              "    db.execute('INSERT INTO sample (thread, time_ns, weight_ns, stack) "
              "SELECT thread, time_ns, weight_ns, stack FROM sample')\n"
              "os._exit(0)\n")
    result = run_process([sys.executable, "-c", script, inputs[0]], TIMEOUT)
    journal = inputs[0] + "-journal"
    check(result.returncode == 0 and os.path.exists(journal) and os.path.getsize(journal) > 0,
          f"a hot journal is left: {result.stderr!r}")
    out = os.path.join(directory, "all.db")
    status, err = merge("-o", out, *inputs)
    check(status == 0, f"status {status}, {err!r}")
    check(scalar(out, "SELECT COUNT(*) FROM sample") == 2 * 200, "the committed rows are merged, the rest rolled back")
    check(scalar(inputs[0], "PRAGMA integrity_check") == "ok", "the input is whole again")


def test_kairos_report_reads_a_merged_database(directory):
    inputs = generate(os.path.join(directory, "in"), 3)
    out = os.path.join(directory, "all.db")
    check(merge("-o", out, *inputs)[0] == 0, "merged")
    for output_format in ("text", "json", "folded", "trace", "speedscope", "flamegraph", "html"):
        result = run_process([KAIROS_REPORT, "--format", output_format, out], TIMEOUT)
        check(result.returncode == 0 and result.stdout, f"kairos-report --format {output_format}: status "
              f"{result.returncode}, {result.stderr.decode(errors='replace')!r}")
    text = run_process([KAIROS_REPORT, out], TIMEOUT).stdout.decode()
    check(text.startswith("kairos profile: 600 samples") and "12 threads" in text,
          f"the text report covers every process: {text[:200]!r}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-merge"))
