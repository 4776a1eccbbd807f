#!/usr/bin/env python3
"""Reliability: what real programs do to the descriptors, signals, processes and files around
them must not make kairos change what they do (docs/reliability.md). Each test runs a real
program (bash, xz, python3) or the tests' own sampled program, with and without kairos.

Run one test: reliability_tests.py NAME. Needs KAIROS_RUN and KAIROS_SAMPLED_PROGRAM."""
import glob
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys

from harness import Skipped, check, clean_environment, run_named_test

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
PROGRAM = os.environ.get("KAIROS_SAMPLED_PROGRAM", "")
TIMEOUT = 120


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0"}, **extra)


def run(command, directory, env=None, preexec=None):
    result = subprocess.run(command, cwd=directory, env=env or environment(), capture_output=True,
                            timeout=TIMEOUT, preexec_fn=preexec)
    return result.stdout, result.stderr.decode(errors="replace"), result.returncode


def kairos(command, directory, options=(), preexec=None, **extra):
    """`command` under kairos-run; python3 is the interpreter running these tests, not a shim."""
    return run([KAIROS_RUN, *options, "--", *command], directory, environment(**extra), preexec)


def kairos_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[kairos]")]


def databases(directory):
    return sorted(glob.glob(os.path.join(directory, "kairos-output", "*.db")))


def sample_count(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM sample").fetchone()[0]


def needs(program):
    if shutil.which(program) is None:
        raise Skipped(f"{program} is not installed here")


# --- descriptors -------------------------------------------------------------------------------

def test_bash_pipelines_keep_their_descriptors(directory):
    # kairos's perf events and /proc files (real-time sampling opens both) must never sit on the
    # numbers bash picks for its pipes and redirections, nor be closed by kairos in a child after
    # bash reused the number.
    needs("bash")
    script = ("sleep 0.3 | cat; echo ok | cat; exec 9>nine.txt; echo nine >&9; exec 9>&-; "
              "for i in 1 2 3; do echo $i | tr 0-9 a-j; done; cat nine.txt")
    plain = run(["bash", "-c", script], directory)
    for attempt in range(3):
        out, err, status = kairos(["bash", "-c", script], directory,
                                  ["--realtime", "on", "--freq", "1000"])
        check((out, status) == (plain[0], plain[2]), f"bash's output: {out!r} {err!r} {status}")
        check(not any("duplicate fd" in line or "Bad file" in line for line in err.splitlines()),
              f"bash lost a descriptor: {err!r}")


def test_kairos_descriptors_sit_above_the_programs(directory):
    # Every descriptor kairos keeps while a program runs (perf events, the database and its
    # journal, spill files, its stderr copy, and the ELF and debug files libdw reads to symbolize)
    # sits at or above half the RLIMIT_NOFILE soft limit (at most 1000), never on a low number a
    # program picks for itself.
    import resource
    import time
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    floor = min(soft // 2, 1000) if soft != resource.RLIM_INFINITY else 1000
    process = subprocess.Popen([KAIROS_RUN, "--freq", "1000", "--", PROGRAM, "busy-until-signal"],
                               cwd=directory, env=environment(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
    try:
        check(process.stdout.readline() == b"ready\n", "the program started")
        time.sleep(1.5)  # samples taken, written and symbolized (libdw has opened its files)
        low = {}
        for fd in os.listdir(f"/proc/{process.pid}/fd"):
            if 2 < int(fd) < floor:
                low[int(fd)] = os.readlink(f"/proc/{process.pid}/fd/{fd}")
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)
    check(not low, f"descriptors below {floor} that the program did not open: {low}")


# A Python loop that spends its CPU time in user mode, where samples are taken (a loop on
# time.process_time() alone spends three quarters of it in the clock's system call).
def busy_script(before_close, close, after_close):
    return ("import ctypes, os, time\n"
            "def busy(seconds):\n"
            "    end = time.process_time() + seconds\n"
            "    while time.process_time() < end:\n"
            "        for _ in range(20000): pass\n"
            f"busy({before_close})\n"
            f"{close}\n"
            "fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(5)]\n"
            f"busy({after_close})\n"
            "print('fds', fds)\n")


def test_program_that_closes_every_descriptor_keeps_kairos_descriptors(directory):
    # close_range, closefrom or a close() of every number (Python's os.closerange, daemons,
    # shells) close everything but kairos's own descriptors: no sample is lost, and the program's
    # numbers are what they were. The close comes after 1.3 s of CPU, past the first delivery
    # (KAIROS_FLUSH_INTERVAL, 1 s): the database and libdw's files are open too.
    each_number = "for fd in range(3, 4096):\n    try: os.close(fd)\n    except OSError: pass"
    for close in ("os.closerange(3, 1 << 20)", "ctypes.CDLL(None).closefrom(3)", each_number):
        for stale in glob.glob(os.path.join(directory, "kairos-output", "*")):
            os.remove(stale)
        script = busy_script(1.3, close, 0.5)
        plain = run([sys.executable, "-c", script], directory)
        check(plain[0] == b"fds [3, 4, 5, 6, 7]\n", f"the plain run of {close}: {plain!r}")
        out, err, status = kairos([sys.executable, "-c", script], directory, ["--freq", "1000"])
        check((out, status) == (plain[0], 0), f"{close}: {out!r} vs {plain[0]!r}, {err!r}")
        check(len(kairos_lines(err)) == 1 and "samples" in kairos_lines(err)[0],
              f"{close}: the summary only, no problem: {err!r}")
        found = databases(directory)
        check(len(found) == 1, f"{close}: one database: {found} {err!r}")
        count = sample_count(found[0])
        # 1.8 s of CPU time at 1 kHz, some of it in the interpreter's start and in system calls.
        check(count > 1400, f"sampled through the program's {close}: {count} samples")


def test_raw_close_range_loses_only_what_kairos_reports(directory):
    # A raw close_range system call is not seen: the perf event is reopened at the next delivery
    # (100 ms), and a spill file's undelivered samples are lost, and counted in a problem line.
    # Nothing is delivered before the close, however loaded the machine (a 30 s flush interval):
    # the database is not open yet (the next test closes it).
    script = busy_script(0.4, "ctypes.CDLL(None).syscall(436, 3, 0xffffffff, 0)  # SYS_close_range",
                         0.8)
    plain = run([sys.executable, "-c", script], directory)
    out, err, status = kairos([sys.executable, "-c", script], directory, ["--freq", "1000"],
                              KAIROS_FLUSH_INTERVAL=30)
    check((out, status) == (plain[0], 0), f"{out!r} vs {plain[0]!r}, {err!r}")
    found = databases(directory)
    check(len(found) == 1, f"one database: {found} {err!r}")
    count = sample_count(found[0])
    lost = [line for line in kairos_lines(err) if "samples not yet in the database were lost" in line]
    check(len(lost) == 1, f"the lost samples are said: {err!r}")
    lost_count = int(lost[0].split(": ")[1].split()[0])
    check(count > 500, f"sampled after the close: {count} samples")
    check(count + lost_count > 900, f"stored {count} and reported lost {lost_count} of 1.2 s at 1 kHz")


def test_raw_close_range_keeps_the_open_database(directory):
    # With the database open (a 50 ms flush interval), a raw close_range closes SQLite's files
    # too. The file is opened again: what was committed stays, the samples after the close go on
    # into it, and the rows of the transaction that failed are counted and said.
    # Under kairos the close waits for the file (made with the first rows), however loaded the
    # machine.
    close = ("import glob, sys\n"
             "while sys.argv[1:] == ['profiled'] and not glob.glob('kairos-output/*.db'): busy(0.02)\n"
             "ctypes.CDLL(None).syscall(436, 3, 0xffffffff, 0)  # SYS_close_range\n"
             "open('closed_at', 'w').write(str(time.monotonic_ns()))")
    script = busy_script(0.5, close, 0.6)
    plain = run([sys.executable, "-c", script], directory)
    out, err, status = kairos([sys.executable, "-c", script, "profiled"], directory, ["--freq", "1000"],
                              KAIROS_FLUSH_INTERVAL="0.05")
    check((out, status) == (plain[0], 0), f"{out!r} vs {plain[0]!r}, {err!r}")
    found = databases(directory)
    check(len(found) == 1, f"one database: {found} {err!r}")
    said = [line for line in kairos_lines(err) if "closed the profile database's descriptors" in line]
    check(len(said) == 1 and found[0] in said[0], f"the reopening is said once, with the file: {err!r}")
    lost = int(re.search(r"(\d+) rows? since its last commit lost", said[0]).group(1))
    summary = [line for line in kairos_lines(err) if "outputs:" in line]
    check(len(summary) == 1, f"one summary line: {err!r}")
    closed_at = int(open(os.path.join(directory, "closed_at")).read())
    with sqlite3.connect(found[0]) as db:
        before, after = db.execute("SELECT SUM(time_ns < ?), SUM(time_ns >= ?) FROM sample",
                                   (closed_at, closed_at)).fetchone()
        check(before > 200 and after > 300, f"samples before the close {before}, after {after}")
        check(before + after + lost > 900, f"stored {before + after} and lost {lost} of 1.1 s at 1 kHz")
        dangling = db.execute("SELECT COUNT(*) FROM sample WHERE stack NOT IN (SELECT id FROM stack) "
                              "OR thread NOT IN (SELECT id FROM thread)").fetchone()[0]
        check(dangling == 0, f"{dangling} samples name a stack or thread that is not there")
        metadata = dict(db.execute("SELECT key, value FROM metadata WHERE key IN ('end_reason', 'rows_lost')"))
        check(metadata.get("end_reason") == "exit", f"the profile was finished: {metadata}")
        check(int(metadata.get("rows_lost", -1)) >= lost, f"rows lost recorded: {metadata}, said {lost}")
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity")
    check(os.path.exists(found[0][:-3] + ".txt"), f"the text report is written: {err!r}")


# --- signals -----------------------------------------------------------------------------------

def test_threads_that_block_signals_do_not_queue_them(directory):
    # liblzma's workers block every signal. Queued sampling signals would fill RLIMIT_SIGPENDING
    # and the kernel would fall back to SIGIO, killing xz ("I/O possible", status 157).
    needs("xz")
    data = os.path.join(directory, "data.txt")
    with open(data, "w") as file:
        for i in range(120000):
            file.write(f"{i} {i * 7919 % 1000003} {hashlib.md5(str(i).encode()).hexdigest()}\n")

    def low_pending_limit():
        import resource
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (200, 200))

    plain = run(["xz", "-T2", "-6", "-c", data], directory, preexec=low_pending_limit)
    out, err, status = kairos(["xz", "-T2", "-6", "-c", data], directory, ["--freq", "10000"],
                              preexec=low_pending_limit)
    check(status == plain[2] == 0, f"xz's status under kairos: {status}, {err!r}")
    check(hashlib.sha256(out).digest() == hashlib.sha256(plain[0]).digest(), "xz's output changed")
    summary = [line for line in kairos_lines(err) if "outputs:" in line]
    check(len(summary) == 1, f"one summary line: {err!r}")
    if "blocked the sampling signal" not in summary[0]:
        # xz ran its work on threads that block signals only if it made any: -T2 on this input does.
        with sqlite3.connect(databases(directory)[0]) as db:
            unsampled = int(db.execute("SELECT value FROM metadata WHERE key = 'unsampled_cpu_ns'")
                            .fetchone()[0])
        check(unsampled > 0, f"the workers' unsampled CPU time is recorded: {summary[0]}")


# --- processes ---------------------------------------------------------------------------------

def test_followed_fork_children_of_a_busy_program_never_hang(directory):
    # Threads fork while others malloc and dlopen; each child exits at once. A child may only run
    # async-signal-safe code until it returns to the program: it once hung in _exit on the
    # __exit_funcs_lock another thread held at the fork.
    for freq in ("300", "10000"):
        out, err, status = kairos([PROGRAM, "stress", "1.0"], directory, ["--freq", freq],
                                  KAIROS_FOLLOW_CHILDREN="true",
                                  KAIROS_OUTPUT_PATH=f"kairos-output/stress-{freq}-%pid%")
        check(status == 0 and b"stress done" in out, f"{freq} Hz: {status} {out!r} {err!r}")


def test_unfollowed_fork_child_loses_kairos_from_its_environment(directory):
    # The child of a fork that is not followed runs without kairos, and so do its descendants,
    # even those it starts without an exec wrapper (posix_spawn).
    # Read through libc (os.environ is python's copy, made at start-up).
    script = ("import ctypes, os\n"
              "getenv = ctypes.CDLL(None).getenv\n"
              "getenv.restype = ctypes.c_char_p\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    print('child', b'kairos' in (getenv(b'LD_PRELOAD') or b''), flush=True)\n"
              "    os._exit(0)\n"
              "os.waitpid(pid, 0)\n")
    out, err, status = kairos([sys.executable, "-c", script], directory)
    check((out, status) == (b"child False\n", 0), f"{out!r} {err!r} {status}")


def test_environment_is_the_programs_own(directory):
    # What a program sees of its environment (env, make -p, os.environ) is what it sees without
    # kairos: no KAIROS_* variable (kairos-run's settings, launch and exec bookkeeping), no
    # CUDA_INJECTION64_PATH in a program without CUDA, no LD_PRELOAD that was not there before.
    plain_environment = {k: v for k, v in environment().items() if not k.startswith("KAIROS_")}
    options = ["--freq", "200", "-o", os.path.join(directory, "out", "%exe%-%pid%")]
    dump = "import os; print('\\n'.join(sorted(f'{k}={v}' for k, v in os.environ.items())))"
    programs = [["env"], [sys.executable, "-c", dump]]
    if shutil.which("make"):
        programs.append(["make", "-p", "-f", "/dev/null"])
    for command in programs:
        plain, _, plain_status = run(command, directory, plain_environment)
        profiled, err, status = run([KAIROS_RUN, *options, "--", *command], directory, plain_environment)
        if command[0] == "make":  # its variable database, less what differs run to run
            plain, profiled = (b"\n".join(line for line in text.splitlines()
                                          if re.match(rb"^(# environment|[A-Za-z_]+ = )", line)
                                          and not line.startswith((b"MAKEFLAGS", b"MFLAGS")))
                               for text in (plain, profiled))
        leaked = sorted(set(profiled.splitlines()) - set(plain.splitlines()))
        check((sorted(plain.splitlines()), plain_status) == (sorted(profiled.splitlines()), status),
              f"{command[0]}: the environment under kairos differs by {leaked[:8]} "
              f"(and lacks {sorted(set(plain.splitlines()) - set(profiled.splitlines()))[:8]}); {err}")
    # The launched process's own exec is still followed: the image after it is profiled, and its
    # environment is clean too.
    busy = "import os, time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n" + dump
    stem = os.path.join(directory, "exec", "%exe%-%pid%")
    # Sampling from the start: 0.3 s of CPU may end before the default delay.
    out, err, status = run([KAIROS_RUN, "--set", "KAIROS_SAMPLING_DELAY=0", "-o", stem, "--", "sh", "-c",
                            'exec "$0" -c "$1"', sys.executable, busy], directory, plain_environment)
    check(status == 0 and b"KAIROS_" not in out and b"LD_PRELOAD" not in out, f"after exec: {out!r} {err}")
    profiles = glob.glob(os.path.join(directory, "exec", "*.db"))
    check(len(profiles) == 1 and sample_count(profiles[0]) > 0, f"the exec'd image profiled: {profiles} {err}")


def test_cuda_injection_only_where_cuda_can_be_reached(directory):
    # kairos asks CUDA to load it (CUDA_INJECTION64_PATH) in a program that carries device code, as
    # nvcc's programs do (their runtime, linked statically, loads libcuda only at the first call),
    # and in no other; an exec it follows does not inherit kairos's value.
    program = os.environ.get("KAIROS_DEVICE_CODE_PROGRAM", "")
    check(os.access(program, os.X_OK), f"KAIROS_DEVICE_CODE_PROGRAM={program!r} is not a program")
    out, _, _ = run([program], directory)
    check(out == b"(unset)\n", f"without kairos: {out!r}")
    out, err, status = kairos([program], directory)
    check(status == 0 and out.strip().endswith(b"libkairos.so"), f"under kairos: {out!r} {err}")
    out, err, status = kairos(["sh", "-c", "exec env"], directory)
    check(status == 0 and b"CUDA_INJECTION64_PATH" not in out, f"a program without device code: {out!r}")


# --- limits and faults ---------------------------------------------------------------------------

# A new profile's size: the schema's pages (39 of 8 KiB at schema version 13).
EMPTY_PROFILE_BYTES = 312 * 1024

BUSY_THREADS = ("import threading, time\n"
                "def work():\n"
                "    end = time.process_time() + 1.0\n"
                "    while time.process_time() < end: pass\n"
                "threads = [threading.Thread(target=work) for _ in range(3)]\n"
                "[t.start() for t in threads]; [t.join() for t in threads]\n"
                "print('done')\n")


def test_full_disk_costs_the_outputs_never_the_program(directory):
    # A file-size limit stands in for a full disk: kairos's writes fail (and SIGXFSZ, whose
    # default action ends the process, is never left for the program), the failure is said when it
    # happens, with what was lost, and the program's output and status are unchanged.
    import resource

    def small_quota():  # the empty profile (EMPTY_PROFILE_BYTES) fits, a second of samples does not
        limit = EMPTY_PROFILE_BYTES + 32 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out, err, status = kairos([sys.executable, "-c", BUSY_THREADS], directory, ["--freq", "10000"],
                              preexec=small_quota, TMPDIR=directory)
    check((out, status) == (b"done\n", 0), f"the program: {out!r} {status} {err!r}")
    lines = kairos_lines(err)
    check(any("failed" in line or "cannot write" in line for line in lines[:-1]),
          f"the failure is named: {lines}")
    check("could not be written" in lines[-1], f"the summary counts what was lost: {lines[-1]}")
    for path in databases(directory):
        with sqlite3.connect(path) as db:
            check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"{path} is valid")


def test_sigkill_keeps_everything_up_to_the_last_commit(directory):
    # Waits until commits have written samples into the file (it is locked while the program runs,
    # so the test watches it grow past the empty profile), then SIGKILLs: the file must be valid and
    # hold what was committed. No timing assumption: a loaded machine only makes the wait longer.
    import time
    process = subprocess.Popen([KAIROS_RUN, "--freq", "1000", "--", sys.executable, "-c",
                                "import time\nwhile True: pass\n"], cwd=directory,
                               env=environment(KAIROS_FLUSH_INTERVAL="0.2",
                                               KAIROS_OUTPUT_PATH="kairos-output/run"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = os.path.join(directory, "kairos-output", "run.db")
    grown, deadline = 0, time.monotonic() + 60
    try:
        while grown < 64 * 1024 and time.monotonic() < deadline:
            time.sleep(0.1)
            if os.path.exists(path):
                grown = os.path.getsize(path) - EMPTY_PROFILE_BYTES
    finally:
        process.kill()
        process.wait(timeout=TIMEOUT)
    check(grown >= 64 * 1024, f"commits wrote into the file while it ran: {grown} bytes past the empty profile")
    with sqlite3.connect(path) as db:  # read-write: rolls back a commit the kill interrupted
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "the database is valid")
        count = db.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
        totals = db.execute("SELECT thread, window, stack, samples, weight_ns FROM stack_total ORDER BY 1, 2, 3").fetchall()
        sums = db.execute("SELECT thread, window, COALESCE(stack, 0), COUNT(*), SUM(weight_ns) FROM sample "
                          "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3").fetchall()
        buckets = db.execute("SELECT thread, window, start_ns, samples, weight_ns FROM sample_timeline "
                             "ORDER BY 1, 2, 3").fetchall()
        width = db.execute("SELECT MAX(width_ns) FROM sample_timeline").fetchone()[0]
        bucket_sums = db.execute(f"SELECT thread, window, time_ns - time_ns % {width}, COUNT(*), SUM(weight_ns) "
                                 "FROM sample GROUP BY 1, 2, 3 ORDER BY 1, 2, 3").fetchall()
    check(count >= 100, f"the samples committed before the kill are kept: {count}")
    check(totals == sums, "the sums kept are those of the samples kept")
    check(buckets == bucket_sums, "the time buckets kept are those of the samples kept")


def test_program_near_its_descriptor_limit(directory):
    # The program opens files up to a few short of RLIMIT_NOFILE; kairos's own descriptors
    # (perf events, the database, spill files) must not make it run out.
    import resource

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    script = ("import os\n"
              "fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(52)]\n"
              "print('opened', len(fds))\n" + BUSY_THREADS)
    plain = run([sys.executable, "-c", script], directory, preexec=low_limit)
    out, err, status = kairos([sys.executable, "-c", script], directory, ["--freq", "1000"],
                              preexec=low_limit)
    check((out, status) == (plain[0], plain[2]) == (b"opened 52\ndone\n", 0),
          f"{out!r} {status} {err!r}")


def test_program_near_its_thread_limit(directory):
    # kairos must never take the last threads a program may start: near RLIMIT_NPROC it keeps to
    # one writer, and says so.
    import resource

    def few_threads():
        tasks = int(open("/proc/loadavg").read().split()[3].split("/")[1])
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks + 20, tasks + 20))

    out, err, status = kairos([sys.executable, "-c", BUSY_THREADS], directory, ["--freq", "1000"],
                              preexec=few_threads)
    check((out, status) == (b"done\n", 0), f"{out!r} {status} {err!r}")
    check(any("RLIMIT_NPROC" in line for line in kairos_lines(err)), f"said why: {err!r}")


# --- files -------------------------------------------------------------------------------------

def test_outputs_never_follow_links_nor_overwrite(directory):
    # A symlink planted at an output's name is never followed and an existing file is never
    # overwritten: kairos writes under the next free stem instead.
    output = os.path.join(directory, "kairos-output")
    os.mkdir(output)
    victim = os.path.join(directory, "victim.txt")
    with open(victim, "w") as file:
        file.write("precious\n")
    os.symlink(victim, os.path.join(output, "run.txt"))
    with open(os.path.join(output, "run.db"), "w") as file:
        file.write("the user's own file\n")
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    out, err, status = kairos([sys.executable, "-c", busy], directory,
                              KAIROS_OUTPUT_PATH="kairos-output/run")
    check(status == 0, f"{status} {err!r}")
    with open(victim) as file:
        check(file.read() == "precious\n", "the symlink's target was overwritten")
    with open(os.path.join(output, "run.db")) as file:
        check(file.read() == "the user's own file\n", "an existing file was overwritten")
    check(os.path.islink(os.path.join(output, "run.txt")), "the planted link was replaced")
    for name in ("run-1.db", "run-1.txt", "run-1.trace.json"):
        check(os.path.isfile(os.path.join(output, name)), f"{name} written instead: {os.listdir(output)}")
    check(not [n for n in os.listdir(output) if ".kairos-" in n], "no temporary file left behind")


def test_nothing_recorded_writes_nothing(directory):
    # A program that ends before there is anything to record gets one summary line and no files.
    out, err, status = kairos(["true"], directory, KAIROS_SAMPLING_DELAY="0.5")
    lines = kairos_lines(err)
    check(status == 0 and len(lines) == 1 and "outputs: none" in lines[0], f"{lines}")
    check(not os.path.exists(os.path.join(directory, "kairos-output")), "no output directory")


def test_nothing_recorded_gives_the_real_reason(directory):
    # Each reason once: a bad sampling value, an end before the delay, a program too idle for a
    # CPU-time sample. The reason the line gave for all three was the delay. A refused value is
    # said by its own line at the start, and no second line at the end repeats it.
    busy = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"
    _, err, status = kairos(["sh", "-c", busy], directory, KAIROS_SAMPLING_FREQ="abc", KAIROS_SAMPLING_DELAY="0")
    lines = kairos_lines(err)
    check(status == 0 and len(lines) == 1 and 'KAIROS_SAMPLING_FREQ="abc"' in lines[0]
          and "sampling is disabled" in lines[0], f"one line names the refused value and its effect: {lines}")
    cases = [
        ((["true"], {"KAIROS_SAMPLING_DELAY": "0.5"}),
         "before sampling began (KAIROS_SAMPLING_DELAY=0.5 s)"),
        ((["sleep", "0.3"], {"KAIROS_SAMPLING_DELAY": "0", "KAIROS_SAMPLING_CPUTIME_FREQ": "2"}),
         "one sample per 500 ms of CPU time, KAIROS_SAMPLING_CPUTIME_FREQ=2;"),
    ]
    for (command, settings), reason in cases:
        out, err, status = kairos(command, directory, **settings)
        summary = [line for line in kairos_lines(err) if "outputs: none" in line]
        check(status == 0 and len(summary) == 1 and reason in summary[0],
              f"{command} with {settings}: expected {reason!r} in {kairos_lines(err)}")
    _, err, _ = kairos(["sh", "-c", busy], directory, KAIROS_SAMPLING_FREQ="abc", KAIROS_SAMPLING_DELAY="0")
    check("KAIROS_SAMPLING_DELAY" not in err, f"the delay is no reason when sampling was off: {err!r}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-reliability"))
