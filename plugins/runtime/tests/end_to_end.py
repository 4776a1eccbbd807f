#!/usr/bin/env python3
"""End-to-end tests of kairos-run, libkairos.so, the user API and kairos-avail: real processes.

Run one test: end_to_end.py NAME (ctest does, one entry per test). Needs KAIROS_RUN, KAIROS_AVAIL,
KAIROS_PROGRAM (tests/user_api_program.cpp) and KAIROS_BUILD_DIR in the environment.
A program run under kairos must behave exactly as without it: same stdout, same stderr apart from
the one "[kairos] ... report: ..." summary line, same exit status.
"""
import glob
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys

import html_page
from harness import Failure, check, clean_environment, communicate, read_line, run_named_test, run_process

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_AVAIL = os.environ.get("KAIROS_AVAIL", "")
PROGRAM = os.environ.get("KAIROS_PROGRAM", "")
BUILD_DIR = os.environ.get("KAIROS_BUILD_DIR", "")
TIMEOUT = 45
SUMMARY = re.compile(rb"^\[kairos\] \d+ samples?, \d+ regions? on \d+ threads?; outputs: .*$", re.M)


def run_environment(**extra):
    """The region report's JSON is asked for on top of the default outputs (db, text, trace)."""
    return clean_environment({"KAIROS_OUTPUT_FORMATS": "db,text,trace,json"}, **extra)


def run(command, cwd, environment=None, stdin=None):
    result = run_process(command, TIMEOUT, cwd=cwd, env=environment or run_environment(),
                         stdin=stdin)
    return result.stdout, result.stderr, result.returncode


def kairos(command, cwd, options=(), environment=None):
    return run([KAIROS_RUN, *options, "--", *command], cwd, environment)


def without_summary(stderr):
    return SUMMARY.sub(b"", stderr).replace(b"\n\n", b"\n").lstrip(b"\n")


def summaries(stderr):
    return SUMMARY.findall(stderr)


def kairos_lines(stderr):
    return [line for line in stderr.decode(errors="replace").splitlines()
            if line.startswith("[kairos]")]


def reports(directory, pattern="*.json"):
    return sorted(path for path in glob.glob(os.path.join(directory, "kairos-output", pattern))
                  if not path.endswith(".trace.json"))


def load_report(path):
    with open(path) as file:
        return json.load(file)


def process_nodes(report):
    return report["regions"]["process"]["nodes"]


def count_of(report, label, component="wall_clock"):
    total = 0
    for node in process_nodes(report):
        if node["label"] == label:
            for value in node["values"]:
                if value["component"] == component:
                    total += value["count"]
    return total


def same_as_without_kairos(command, cwd, attempts=1, ignore=None, environment=None):
    """Runs `command` plainly and under kairos-run; stdout, stderr and status must match.
    `ignore`: a pattern of stdout lines other processes may change between the two runs."""
    def stdout_of(result):
        return re.sub(ignore, b"", result[0], flags=re.M) if ignore else result[0]
    for attempt in range(attempts):
        plain = run(command, cwd, environment)
        profiled = kairos(command, cwd, environment=environment)
        if (stdout_of(plain), plain[1], plain[2]) == (stdout_of(profiled),
                                                      without_summary(profiled[1]), profiled[2]):
            check(len(summaries(profiled[1])) == 1,
                  f"expected one summary line, got stderr {profiled[1]!r}")
            return profiled
    raise Failure(f"{command}: plain {plain!r}\nunder kairos {profiled!r}")


# --- tests -----------------------------------------------------------------------------------

def test_help_and_usage_errors(directory):
    out, err, status = run([KAIROS_RUN, "--help"], directory)
    check(status == 0, f"--help exits 0, got {status}")
    for option in ["--output", "--freq", "--cputime", "--realtime", "--components", "--config",
                   "--verbose", "--follow-children", "--set"]:
        check(option.encode() in out, f"--help documents {option}")
    out, err, status = run([KAIROS_RUN, "ls"], directory)
    check(status == 2 and b"missing '--'" in err, f"missing -- is an error: {status} {err!r}")
    out, err, status = run([KAIROS_RUN, "--bogus", "--", "true"], directory)
    check(status == 2 and b"--bogus" in err, f"unknown option is an error: {status} {err!r}")
    out, err, status = run([KAIROS_RUN, "--set", "KAIROS_NO_SUCH_SETTING=1", "--", "true"], directory)
    check(status == 2 and b"unknown setting" in err, f"--set naming no setting is an error: {status} {err!r}")
    # An option without its value: which one, and what it takes.
    for options, said in ((["--freq"], "--freq needs a value: sampling frequency in Hz (KAIROS_SAMPLING_FREQ), "
                                       "a number in ["),
                          (["-o"], "--output needs a value: output file stem (KAIROS_OUTPUT_PATH)"),
                          (["--formats"], "--formats needs a value: outputs to write"),
                          (["--periods"], "--periods needs a value: collect only in time windows")):
        out, err, status = run([KAIROS_RUN, *options, "--", "true"], directory)
        lines = kairos_lines(err)
        check(status == 2 and len(lines) == 1 and lines[0].startswith("[kairos] " + said)
              and lines[0].endswith("; see kairos-run --help") and "required" not in lines[0],
              f"{options}: one line naming the option and what it accepts: {status} {lines}")


def test_bad_option_value_runs_the_program_without_kairos(directory):
    # A value kairos cannot use stops kairos, not the program: it runs, with its own status.
    for options in (["--freq", "abc"], ["-o", "out/%nokey%"], ["--set", "KAIROS_MPI=maybe"]):
        out, err, status = run([KAIROS_RUN, *options, "--", "sh", "-c", "echo ran; exit 3"], directory)
        lines = kairos_lines(err)
        check((out, status) == (b"ran\n", 3), f"{options}: the program ran: {out!r} {status}")
        check(len(lines) == 1 and "is not valid" in lines[0] and "the program runs without it" in lines[0],
              f"{options}: one line naming the value: {lines}")
        check(not os.path.exists(os.path.join(directory, "kairos-output")), f"{options}: kairos was off")
    # An empty value is no value: the default output path.
    out, err, status = run([KAIROS_RUN, "-o", "", "--", "sh", "-c", "echo ran; exit 3"], directory,
                           run_environment(KAIROS_SAMPLING_DELAY="0"))
    check((out, status) == (b"ran\n", 3) and not [line for line in kairos_lines(err) if "not valid" in line],
          f"-o '': {out!r} {status} {err!r}")
    out, err, status = run([KAIROS_RUN, "--", "/nonexistent/program"], directory)
    check(status == 127 and b"cannot run '/nonexistent/program'" in err, f"{status} {err!r}")
    out, err, status = run([KAIROS_RUN, "--"], directory)
    check(status == 2 and b"no command" in err, f"{status} {err!r}")


def test_ls_unchanged(directory):
    # The link counts and time stamps of /tmp and /proc change as other processes (and the other
    # tests) come and go: those two lines are left out.
    same_as_without_kairos(["/bin/ls", "-la", "/"], directory, attempts=3,
                           ignore=rb"^.* (tmp|proc)$")


def test_exit_status_passed_through(directory):
    same_as_without_kairos(["sh", "-c", "echo out; echo err >&2; exit 3"], directory)
    out, err, status = kairos(["sh", "-c", "exit 0"], directory)
    check(status == 0, f"status 0 passes through, got {status}")


def test_gzip_unchanged(directory):
    data = os.path.join(directory, "data.txt")
    with open(data, "w") as file:
        file.write("".join(f"line {i} of some compressible text\n" for i in range(20000)))
    out, _, _ = same_as_without_kairos(["gzip", "-c", data], directory)
    check(len(out) > 1000, "gzip wrote its output")


def test_python_through_wrapper_script(directory):
    wrapper = os.path.join(directory, "python-wrapper")
    with open(wrapper, "w") as file:
        file.write('#!/bin/sh\n# a version-manager shim: the real interpreter replaces the shell\n'
                   'exec python3 "$@"\n')
    os.chmod(wrapper, 0o755)
    # Busy for a moment, sampled from the start: python has something to report.
    script = ("import sys, time; end = time.process_time() + 0.3\n"
              "while time.process_time() < end: pass\n"
              "print('hello from', sys.argv[1:]); sys.stderr.write('warn\\n'); sys.exit(5)")
    same_as_without_kairos([wrapper, "-c", script, "a", "b"], directory,
                           environment=run_environment(KAIROS_SAMPLING_DELAY="0"))
    # The program at the end of the exec chain is the one reported.
    written = reports(directory)
    check(len(written) == 1, f"one report for the chain, got {written}")
    check("python" in os.path.basename(written[0]), f"the report is python's: {written}")
    check("-c" in load_report(written[0])["command"], "the report names python's command line")


def test_exec_chain_gives_one_profile(directory):
    # A version manager's shim: sh execs bash, which execs python3. Each shell works a moment
    # first, so at 999 Hz from the start each image has samples of its own.
    busy = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done\n"
    inner = os.path.join(directory, "inner-shim")
    with open(inner, "w") as file:
        file.write("#!/bin/bash\n" + busy + f'exec {sys.executable} "$@"\n')
    outer = os.path.join(directory, "outer-shim")
    with open(outer, "w") as file:
        file.write("#!/bin/sh\n" + busy + f'exec {inner} "$@"\n')
    for shim in (inner, outer):
        os.chmod(shim, 0o755)
    script = ("import time; end = time.process_time() + 0.3\n"
              "while time.process_time() < end: pass\nprint('done')")
    out, err, status = kairos([outer, "-c", script], directory, ["--freq", "999"],
                              run_environment(KAIROS_SAMPLING_DELAY="0"))
    check((out, status) == (b"done\n", 0), f"the program ran: {out!r} {status} {err!r}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and len(summaries(err)) == 1, f"one [kairos] line, the summary: {lines}")
    check("with the 2 images before the last exec (threads marked [image N])" in lines[0],
          f"the summary says so: {lines}")
    databases = glob.glob(os.path.join(directory, "kairos-output", "*.db"))
    check(len(databases) == 1 and os.path.basename(databases[0]).startswith("python3"),
          f"one profile, named by the program at the chain's end: {databases}")
    check(len(reports(directory)) == 1 and len(reports(directory, "*.txt")) == 1, "one set of reports")
    with sqlite3.connect(databases[0]) as db:
        metadata = dict(db.execute("SELECT key, value FROM metadata"))
        by_thread = dict(db.execute(
            "SELECT threads.name, COUNT(*) FROM samples JOIN threads ON threads.id = samples.thread "
            "GROUP BY threads.name"))
        command = db.execute("SELECT command FROM processes").fetchone()[0]
        processes = db.execute("SELECT COUNT(*) FROM process").fetchone()[0]
    images = metadata.get("exec_chain.images", "").splitlines()
    check(len(images) == 2 and images[0].startswith("1\t") and "outer-shim" in images[0]
          and images[1].startswith("2\t") and "inner-shim" in images[1], f"the chain's commands: {images}")
    check(processes == 1 and command.startswith(sys.executable), f"one process, python's: {processes} {command!r}")
    check(metadata.get("end_reason") == "exit" and "exec_chain.pending" not in metadata, f"ended: {metadata}")
    marked = {name: count for name, count in by_thread.items() if "[image" in name}
    check(any(name.endswith("[image 1]") for name in marked) and any(name.endswith("[image 2]") for name in marked),
          f"the shells' samples are in the profile, their threads marked: {by_thread}")
    check(any("[image" not in name and count > 30 for name, count in by_thread.items()),
          f"python's own thread is not marked and has its samples: {by_thread}")
    text = open(reports(directory, "*.txt")[0]).read()
    check("[image 1]" in text, "the text report shows the marked threads")


def test_failed_exec_keeps_the_image_profile(directory):
    # Python's os.execvp tries each PATH entry with execve: the first fails, the image goes on; the
    # second succeeds and the chain continues. Then an exec that fails for good: the image ends
    # with its own profile.
    script = ("import os, sys, time\n"
              "end = time.process_time() + 0.2\n"
              "while time.process_time() < end: pass\n"
              "if sys.argv[1] == 'search':\n"
              "    os.environ['PATH'] = '/nonexistent-dir:' + os.environ['PATH']\n"
              "    os.execvp('sh', ['sh', '-c', 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo $i'])\n"
              "try:\n"
              "    os.execv('/nonexistent-program', ['x'])\n"
              "except OSError:\n"
              "    print('exec failed')\n")
    out, err, status = kairos([sys.executable, "-c", script, "search"], directory, ["--freq", "999"],
                              run_environment(KAIROS_SAMPLING_DELAY="0"))
    check((out, status) == (b"20000\n", 0), f"the exec after a failed one ran: {out!r} {status} {err!r}")
    check(len(kairos_lines(err)) == 1 and "with the image before the last exec" in err.decode(),
          f"one summary, with the first image: {err!r}")
    databases = glob.glob(os.path.join(directory, "kairos-output", "*.db"))
    check(len(databases) == 1, f"one profile: {databases}")
    with sqlite3.connect(databases[0]) as db:
        images = dict(db.execute("SELECT key, value FROM metadata")).get("exec_chain.images", "")
    check(images.count("\n") == 1 and images.startswith("1\t"), f"the first image, once: {images!r}")
    for path in glob.glob(os.path.join(directory, "kairos-output", "*")):
        os.remove(path)

    out, err, status = kairos([sys.executable, "-c", script, "fail"], directory, ["--freq", "999"],
                              run_environment(KAIROS_SAMPLING_DELAY="0"))
    check((out, status) == (b"exec failed\n", 0), f"the program went on: {out!r} {status} {err!r}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "not sampled after an exec that failed (No such file or directory)" in lines[0],
          f"one summary saying so: {lines}")
    databases = glob.glob(os.path.join(directory, "kairos-output", "*.db"))
    check(len(databases) == 1, f"one profile: {databases}")
    with sqlite3.connect(databases[0]) as db:
        metadata = dict(db.execute("SELECT key, value FROM metadata"))
        samples = db.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
        marked = db.execute("SELECT COUNT(*) FROM threads WHERE name LIKE '%[image%'").fetchone()[0]
    check(samples > 50 and marked == 0, f"the image's samples, its threads unmarked: {samples} {marked}")
    check(metadata.get("end_reason") == "exit" and "exec_chain.images" not in metadata
          and metadata.get("exec_chain.failed_exec") == "No such file or directory", f"{metadata}")


def test_unprofiled_children_named_with_their_cpu_time(directory):
    # tar czf: tar itself does little, its gzip child the compressing.
    tree = os.path.join(directory, "tree")
    os.mkdir(tree)
    random = __import__("random").Random(7)
    words = [f"w{random.randrange(100000)}" for _ in range(4000)]
    with open(os.path.join(tree, "data.txt"), "w") as file:
        for _ in range(60):
            file.write(" ".join(random.choice(words) for _ in range(20000)) + "\n")
    out, err, status = kairos(["tar", "czf", "x.tgz", "tree"], directory,
                              environment=run_environment(KAIROS_OUTPUT_FORMATS="db,text,json,html",
                                                          KAIROS_SAMPLING_DELAY="0"))
    check(status == 0 and os.path.getsize(os.path.join(directory, "x.tgz")) > 1000, f"tar ran: {status} {err!r}")
    lines = kairos_lines(err)
    # tar runs its compressor as `sh -c gzip`: its child is a shell, named with the gzip it runs.
    match = re.search(r"1 child process not profiled used (\d+\.\d+) s of CPU time, (\d+)% of the CPU time "
                      r"of the program and its children \((sh \(gzip\)|gzip) \d+\.\d+ s\): "
                      r"kairos-run --follow-children profiles them", lines[-1] if lines else "")
    check(len(lines) == 1 and match, f"the summary names gzip and its CPU time: {lines}")
    check(float(match.group(1)) > 0.1 and int(match.group(2)) > 50, f"gzip did most of the work: {lines}")
    text = open(reports(directory, "*.txt")[0]).read()
    check(re.search(r"^children: 1 child process not profiled used \d+\.\d+ s of CPU time, .*gzip\)? \d+\.\d+ s "
                    r"\(1 process\); kairos-run --follow-children profiles them$", text, re.M),
          f"the text report says it: {text[:600]}")
    children = load_report(reports(directory)[0])["profile"]["unprofiled_children"]
    check(children["processes"] == 1 and children["by_name"][0]["name"] in ("gzip", "sh (gzip)")
          and children["cpu_ns"] > 100_000_000, f"the JSON report: {children}")
    summary = html_page.read(reports(directory, "*.html")[0]).tables["summary-table"]
    check(any("gzip" in str(cell) for row in summary for cell in row), f"the HTML summary names gzip: {summary}")
    # Followed, the child is profiled: nothing is said of it.
    out, err, status = kairos(["tar", "czf", "y.tgz", "tree"], directory, ["--follow-children"],
                              run_environment(KAIROS_SAMPLING_DELAY="0"))
    check(status == 0 and "not profiled" not in err.decode(), f"followed children are not called unprofiled: {err!r}")


def region_rows(directory):
    """(name, depth, start_ns, end_ns) of every region row in the run's profile database."""
    databases = glob.glob(os.path.join(directory, "kairos-output", "*.db"))
    check(len(databases) == 1, f"one profile database, found {databases}")
    with sqlite3.connect(databases[0]) as connection:
        return connection.execute("SELECT name, depth, start_ns, end_ns FROM regions").fetchall()


def test_user_api_regions_report(directory):
    out, err, status = kairos([PROGRAM, "nested"], directory,
                              environment=run_environment(KAIROS_OUTPUT_FORMATS="db,text,trace,json,html"))
    check(status == 0 and b"active=1" in out, f"{status} {out!r} {err!r}")
    check(len(summaries(err)) == 1, f"one summary line: {err!r}")
    report = load_report(reports(directory)[0])
    nodes = {node["label"]: node for node in process_nodes(report)}
    check(count_of(report, "outer") == 3, f"outer counted 3 times: {nodes}")
    check(count_of(report, "inner") == 6, "inner counted 6 times")
    check(nodes["inner"]["depth"] == 1 and nodes["outer"]["depth"] == 0, "inner nests in outer")
    text = open(reports(directory, "*.txt")[0]).read()
    check("outer" in text and "  inner" in text, "the text report shows the tree")
    check(report["regions_recorded"] == 9, f"9 regions pushed, got {report['regions_recorded']}")
    # Each region instance is also a row of the profile database, inside its parent's span.
    rows = region_rows(directory)
    check(sorted((name, depth) for name, depth, _, _ in rows) ==
          [("inner", 1)] * 6 + [("outer", 0)] * 3, f"9 region rows with their depths: {rows}")
    outers = [(start, end) for name, _, start, end in rows if name == "outer"]
    # The HTML report's call graph of the regions: inner under outer, with its counts.
    table = html_page.read(reports(directory, "*.html")[0]).tables["region-table"]
    check([(row[0][0], row[1][0]) for row in table[1:]] == [("outer", "3"), ("inner", "6")],
          f"the HTML report's region table: {table}")
    for name, _, start, end in rows:
        check(start <= end, f"{name} ends after it starts")
        if name == "inner":
            check(any(s <= start and end <= e for s, e in outers), "each inner lies within an outer")


def test_user_api_without_kairos(directory):
    out, err, status = run([PROGRAM, "nested"], directory)
    check((out, err, status) == (b"nested done, active=0\n", b"", 0), f"{out!r} {err!r} {status}")
    check(not os.path.exists(os.path.join(directory, "kairos-output")), "no output without kairos")


def test_ten_thousand_threads(directory):
    out, err, status = kairos([PROGRAM, "threads", "10000"], directory)
    check(status == 0 and out == b"10000 threads done\n", f"{status} {out!r} {err!r}")
    report = load_report(reports(directory)[0])
    check(count_of(report, "thread_work") == 20000, f"exact count: {count_of(report, 'thread_work')}")
    rows = region_rows(directory)
    check(sum(1 for name, *_ in rows if name == "thread_work") == 20000,
          "every region of every short-lived thread is a database row")
    program_threads = [t for t in report["threads"] if not t["kairos_owned"]]
    own_threads = [t for t in report["threads"] if t["kairos_owned"]]
    check(len(program_threads) == 10001, f"main + 10000 threads, got {len(program_threads)}")
    check(sorted(t["sequent_id"] for t in program_threads) == list(range(10001)),
          "program threads' sequent ids are dense")
    check(all(t["sequent_id"] >= 1_000_000 for t in own_threads), "kairos's threads are offset")
    internal = [t["internal_id"] for t in report["threads"]]
    check(len(set(internal)) == len(internal), "internal ids are unique")
    check(sum(not t["running"] for t in program_threads) == 10000, "ended threads are marked")


def test_exit_from_non_main_thread(directory):
    plain = run([PROGRAM, "exit-from-thread"], directory)
    out, err, status = kairos([PROGRAM, "exit-from-thread"], directory)
    check(status == 7 == plain[2], f"exit(7) from a thread: {status}, plain {plain[2]}")
    check(len(summaries(err)) == 1, f"finalized once: {err!r}")
    report = load_report(reports(directory)[0])
    check(report["end_reason"] == "exit", report["end_reason"])
    check(count_of(report, "before_exit") == 1, "the region before exit is kept")


def signal_mid_run(directory, signal_number, name):
    def start(command):
        process = subprocess.Popen(command, cwd=directory, env=run_environment(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(read_line(process, TIMEOUT) == b"ready\n", "the program started")
        process.send_signal(signal_number)
        out, err = communicate(process, TIMEOUT)
        return out, err, process.returncode
    plain = start([PROGRAM, "wait-for-signal"])
    profiled = start([KAIROS_RUN, "--", PROGRAM, "wait-for-signal"])
    check(plain[2] == -signal_number, f"plain run dies by the signal: {plain[2]}")
    check(profiled[2] == -signal_number, f"under kairos too: {profiled[2]} {profiled[1]!r}")
    check(without_summary(profiled[1]) == plain[1], f"stderr: {profiled[1]!r}")
    check(len(summaries(profiled[1])) == 1, "the report was written")
    report = load_report(reports(directory)[0])
    check(report["end_reason"] == f"signal {name}", report["end_reason"])


def test_sigterm_mid_run(directory):
    signal_mid_run(directory, signal.SIGTERM, "SIGTERM")


def test_sigint_mid_run(directory):
    signal_mid_run(directory, signal.SIGINT, "SIGINT")


def test_bad_setting_in_environment(top_directory):
    command = ["sh", "-c", "echo out; exit 3"]
    directory = os.path.join(top_directory, "sampling")
    os.mkdir(directory)
    # Sampling depends on it, not the regions: one line, which says why nothing is recorded
    # (the exit line does not say it again), and kairos still reports the regions it recorded.
    out, err, status = run([KAIROS_RUN, "--", *command], directory,
                           run_environment(KAIROS_SAMPLING_FREQ="abc"))
    check((out, status) == (b"out\n", 3), f"{out!r} {status}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "KAIROS_SAMPLING_FREQ=\"abc\" (from the environment)" in lines[0]
          and "a number in" in lines[0] and lines[0].endswith("sampling is disabled"), f"{lines}")
    out, err, status = run([KAIROS_RUN, "--", PROGRAM, "nested"], directory,
                           run_environment(KAIROS_SAMPLING_FREQ="abc"))
    lines = kairos_lines(err)
    check(status == 0 and len(lines) == 2 and "KAIROS_SAMPLING_FREQ" in lines[0] and len(summaries(err)) == 1
          and "0 samples" in lines[1], f"the regions are still recorded and reported: {lines}")
    # An unknown component: one line naming it and the accepted ones; kairos is off.
    directory = os.path.join(top_directory, "components")
    os.mkdir(directory)
    out, err, status = run([KAIROS_RUN, "--", *command], directory,
                           run_environment(KAIROS_COMPONENTS="wall_clock,bogus_clock"))
    check((out, status) == (b"out\n", 3), f"{out!r} {status}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "bogus_clock" in lines[0] and "peak_rss" in lines[0], f"{lines}")
    check(not os.path.exists(os.path.join(directory, "kairos-output")), "nothing written")
    # An unknown KAIROS_ variable (a typo?) is pointed out; nothing depends on it.
    out, err, status = run([KAIROS_RUN, "--", *command], directory,
                           run_environment(KAIROS_SAMPLNG_FREQ="10"))
    lines = kairos_lines(err)
    check(status == 3 and len(lines) == 2 and "KAIROS_SAMPLNG_FREQ" in lines[0], f"{lines}")
    # KAIROS_ENABLED=false: silent.
    out, err, status = run([KAIROS_RUN, "--", *command], directory,
                           run_environment(KAIROS_ENABLED="false"))
    check((out, err, status) == (b"out\n", b"", 3), f"{out!r} {err!r} {status}")


def test_bad_config_file(directory):
    config = os.path.join(directory, "kairos.json")
    with open(config, "w") as file:
        json.dump({"sampling_freq": 100, "no_such_key": 1}, file)
    out, err, status = kairos(["sh", "-c", "echo out; exit 4"], directory, ["--config", config])
    check((out, status) == (b"out\n", 4), f"{out!r} {status}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "no_such_key" in lines[0] and config in lines[0], f"{lines}")


def test_unwritable_output_path(directory):
    # Said before the program runs, whether the run would record something (busy) or not (short),
    # in one line naming the path and the directory that cannot be made; the program runs as ever.
    busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo out; exit 5"
    for script in (busy, "echo out; exit 5"):
        out, err, status = run([KAIROS_RUN, "-o", "/proc/kairos-cannot-write-here/%pid%", "--", "sh",
                                "-c", script], directory, run_environment(KAIROS_SAMPLING_DELAY="0"))
        check((out, status) == (b"out\n", 5), f"{out!r} {status}")
        lines = kairos_lines(err)
        check(lines == ['[kairos] KAIROS_OUTPUT_PATH="/proc/kairos-cannot-write-here/%pid%" cannot be written: '
                        'cannot create directories in /proc: No such file or directory; kairos is disabled for '
                        'this run, the program runs without it'], f"the failure, said once, up front: {lines}")
    # A file where a directory should be.
    blocker = os.path.join(directory, "a-file")
    open(blocker, "w").close()
    out, err, status = run([KAIROS_RUN, "-o", os.path.join(blocker, "out"), "--", "sh", "-c", "echo out"], directory)
    lines = kairos_lines(err)
    check((out, status) == (b"out\n", 0) and len(lines) == 1 and f"{blocker} is not a directory" in lines[0],
          f"{out!r} {status} {lines}")
    check(not [name for name in os.listdir(directory) if name.startswith(".kairos-probe")], "no probe left behind")
    # LD_PRELOAD alone (no kairos-run): the runtime says the same at the start of a short run.
    library = os.path.join(os.path.dirname(KAIROS_RUN), "libkairos.so")
    out, err, status = run(["sh", "-c", "echo out; exit 5"], directory,
                           run_environment(LD_PRELOAD=library, KAIROS_OUTPUT_PATH="/proc/kairos-cannot-write-here/x"))
    lines = kairos_lines(err)
    check((out, status) == (b"out\n", 5) and len(lines) == 1 and "cannot be written: cannot create directories in "
          "/proc" in lines[0] and lines[0].endswith("kairos is disabled for this run"), f"{out!r} {status} {lines}")


def test_mismatched_pop_reported(directory):
    out, err, status = kairos([PROGRAM, "mismatch"], directory)
    check((out, status) == (b"mismatch survived\n", 0), f"{out!r} {status}")
    lines = kairos_lines(err)
    check(len(lines) == 3, f"two mismatch lines and the summary: {lines}")
    check('kairos_pop_region("b")' in lines[0] and '"a"' in lines[0], lines[0])
    check("no region is open" in lines[1], lines[1])
    report = load_report(reports(directory)[0])
    check(report["mismatched_pops"] == 2 and count_of(report, "a") == 1, "the tree is intact")


def test_fork_child_not_profiled(directory):
    plain = run([PROGRAM, "fork"], directory)
    out, err, status = kairos([PROGRAM, "fork"], directory)
    check((out, status) == (plain[0], plain[2]), f"{out!r} vs {plain[0]!r}")
    check(b"child active=0" in out, "the child runs without kairos")
    check(len(summaries(err)) == 1, f"only the parent reports: {err!r}")
    written = reports(directory)
    check(len(written) == 1, f"{written}")
    report = load_report(written[0])
    check(count_of(report, "parent_region") == 1 and count_of(report, "child_region") == 0,
          "the parent's report has only its own regions")


def test_fork_child_followed(directory):
    out, err, status = kairos([PROGRAM, "fork"], directory, ["--follow-children"])
    check(status == 0 and b"child active=1" in out, f"{out!r} {err!r}")
    check(len(summaries(err)) == 2, f"parent and child report: {err!r}")
    written = [load_report(path) for path in reports(directory)]
    check(len(written) == 2, "two reports")
    child = [r for r in written if count_of(r, "child_region") == 1]
    check(len(child) == 1 and count_of(child[0], "parent_region") == 0,
          "the child's report has its own region, not the parent's")
    program_threads = [t for t in child[0]["threads"] if not t["kairos_owned"]]
    check(len(program_threads) == 1 and program_threads[0]["tid"] == child[0]["pid"],
          f"the child lists only its own thread, not its parent's: {program_threads}")


def test_odd_region_names_keep_every_output_whole(directory):
    # Names are bytes from the user: a non-UTF-8 name once emptied the JSON report, a newline broke
    # the text tables' rows and a 1 MiB name made a 42 MB .txt. Stored exactly, shown escaped
    # and capped (kairos::printable), in every output.
    out, err, status = kairos([PROGRAM, "odd-names"], directory,
                              environment=run_environment(KAIROS_OUTPUT_FORMATS="db,text,trace,json,html"))
    check((out, status) == (b"odd names done\n", 0), f"{out!r} {status} {err!r}")
    check(len(summaries(err)) == 1, f"the summary line: {err!r}")
    report = load_report(reports(directory)[0])  # parses: valid JSON
    labels = {node["label"] for node in process_nodes(report)}
    check("\\xff\\xfe not utf-8" in labels and "line\\x0abreak\\x09tab" in labels
          and "caf\u00e9 \u2211" in labels, f"escaped labels: {labels}")
    check(any(label.endswith("bytes)") and len(label) < 1100 for label in labels), "capped")
    text_path = reports(directory, "*.txt")[0]
    check(os.path.getsize(text_path) < 64 * 1024, f"the .txt stays small: {os.path.getsize(text_path)}")
    with open(text_path, "rb") as file:
        lines = file.read().split(b"\n")
    rows = [line for line in lines if b"line\\x0abreak" in line]
    # One row in the database's call graph (the name last), one in each by-component table (the
    # process's, the thread's, statistics last): each whole.
    check(len(rows) == 3 and rows[0].rstrip().endswith(b"line\\x0abreak\\x09tab")
          and all(row.rstrip().endswith(b"100.0") for row in rows[1:]),
          f"the newline does not break the region's rows: {rows}")
    check(not any(line.startswith(b"break") for line in lines), "no row was split")
    with sqlite3.connect(glob.glob(os.path.join(directory, "kairos-output", "*.db"))[0]) as db:
        stored = {row[0] for row in db.execute("SELECT CAST(name AS BLOB) FROM regions")}
    check(b"\xff\xfe not utf-8" in stored and b"n" * (1 << 20) in stored,
          "the database stores the names exactly")
    html_path = reports(directory, "*.html")[0]
    check(os.path.getsize(html_path) < 64 * 1024, f"the .html stays small: {os.path.getsize(html_path)}")
    page = html_page.read(html_path)
    names = [row[0][0] for row in page.tables["region-table"][1:]]
    check("</script><b>\"markup\" & 'quotes'</b>" in names and "line\\x0abreak\\x09tab" in names,
          f"markup in a name is text, escapes kept: {names}")
    check(page.scripts == 1 and not page.fetches, "a name adds no script and fetches nothing")


def test_per_thread_disable_and_stop(directory):
    out, err, status = kairos([PROGRAM, "disabled-thread"], directory)
    check(status == 0, f"{status} {err!r}")
    report = load_report(reports(directory)[0])
    check(count_of(report, "visible") == 1, "collected after kairos_start")
    check(count_of(report, "hidden") == 0, "a disabled thread records nothing")
    check(count_of(report, "stopped") == 0, "nothing recorded between kairos_stop and start")


def test_kairos_avail_json(directory):
    out, err, status = run([KAIROS_AVAIL, "--json"], directory)
    check(status == 0, f"{status} {err!r}")
    document = json.loads(out)
    components = {c["name"]: c for c in document["components"]}
    check(components["wall_clock"]["available"] is True, "wall_clock is available")
    settings = {s["variable"]: s for s in document["settings"]}
    check(settings["KAIROS_SAMPLING_FREQ"]["default"] == "300", "defaults are listed")
    check(len(document["hw_counters"]) > 0, "hardware counters are listed")
    for counter in document["hw_counters"]:
        check(isinstance(counter["available"], bool), f"{counter}")
        check(counter["available"] or counter["reason"], f"unavailable needs a reason: {counter}")
    out, _, _ = run([KAIROS_AVAIL, "--settings", "--json", "--category", "sampling"], directory)
    check(all(s["category"] == "sampling" for s in json.loads(out)["settings"]), "category filter")
    out, _, _ = run([KAIROS_AVAIL, "-S", "--json", "-r", "OUTPUT"], directory,
                    run_environment(KAIROS_OUTPUT_PATH="x/%pid%"))
    variables = {s["variable"]: s for s in json.loads(out)["settings"]}
    check(set(variables) == {"KAIROS_OUTPUT_PATH", "KAIROS_OUTPUT_FORMATS"}, f"{variables}")
    check(variables["KAIROS_OUTPUT_PATH"]["value"] == "x/%pid%", "current values are shown")
    out, _, status = run([KAIROS_AVAIL, "--components"], directory)
    check(status == 0 and b"wall_clock" in out and b"AVAILABLE" in out, "a table by default")


def test_output_path_keys(directory):
    out, err, status = kairos([PROGRAM, "nested"], directory,
                              ["-o", "out/%exe%-%env{TEST_TAG}%-r%rank%-%launch_id%-%pid%"],
                              run_environment(TEST_TAG="tag7"))
    check(status == 0, f"{err!r}")
    written = glob.glob(os.path.join(directory, "out", "kairos_user_api_program-tag7-r0-none-*[0-9].json"))
    check(len(written) == 1, f"{os.listdir(os.path.join(directory, 'out'))}")
    check(len(glob.glob(os.path.join(directory, "out", "kairos_user_api_program-tag7-r0-none-*.db"))) == 1,
          "the database follows the same stem")


def test_process_is_named_by_its_command(directory):
    out, err, status = kairos([PROGRAM, "nested"], directory)
    check(status == 0, f"{err!r}")
    databases = glob.glob(os.path.join(directory, "kairos-output", "*.db"))
    check(len(databases) == 1, f"one profile database, found {databases}")
    with sqlite3.connect(databases[0]) as connection:
        command = connection.execute("SELECT command FROM processes").fetchone()[0]
    check(command == f"{PROGRAM} nested", f"the process row's command: {command!r}")
    with open(databases[0][:-3] + ".trace.json") as file:
        names = [event["args"]["name"] for event in json.load(file)["traceEvents"] if event["name"] == "process_name"]
    check(names == [f"{PROGRAM} nested"], f"the trace's process is named by its command: {names}")


def test_install_tree_works(directory):
    prefix = os.path.join(directory, "prefix")
    result = run_process(["cmake", "--install", BUILD_DIR, "--component", "runtime",
                          "--prefix", prefix], TIMEOUT)
    check(result.returncode == 0, result.stderr.decode())
    moved = os.path.join(directory, "moved")
    os.rename(prefix, moved)  # an install tree works wherever it is
    out, err, status = run([os.path.join(moved, "bin", "kairos-run"), "--", "sh", "-c",
                            "echo installed; exit 4"], directory)
    check((out, status) == (b"installed\n", 4), f"{out!r} {err!r} {status}")
    check(len(summaries(err)) == 1, f"the installed libkairos.so was loaded: {err!r}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-e2e"))
