#!/usr/bin/env python3
"""kairos's shares beside perf's, on programs no one here wrote, and how much CPU its samples cover.

For each program, run bare (its output, exit status and CPU time), under kairos-run and under
`perf record -e task-clock -g` at the same frequency; then print the functions with the largest
self shares by perf, each with kairos's share beside it, every kernel frame folded into the user
frame that made the system call (perf's samples in the kernel are charged to their first user
frame, as kairos charges them). A function is matched by name (parameters, `(anonymous
namespace)::` and symbol versions dropped) or, unnamed, by module (kairos names a frame no symbol
covers `<module> (no symbols)`, one row a module: perf's unknown frames are summed alike).

Programs:
  syscalls   kairos_sampled_program syscalls: read(/dev/urandom, 64 KiB) x4 and a multiply loop
             (its read_random's inclusive share is also given, and the program's own measure)
  xz         xz -T2 -6 -c over a compressible text of --xz-megabytes (liblzma's workers block
             every signal), at 1 kHz and 10 kHz
  sqlite3    sqlite3 inserting rows in many small transactions into a file database

Printed per program and frequency: kairos's sampled CPU (the sum of its weights) against the
program threads' CPU time (each thread's last thread_cpu_time_ns counter), beside the run's
process CPU (kairos's threads included) and the bare run's; the largest difference in share
against perf's; whether output and exit status matched the bare run's. Skips perf with a line
where it cannot record (no perf, perf_event_paranoid).

Usage: benchmarks/sampling/accuracy.py [build directory (default build)] [--xz-megabytes N]
           [--seconds S] [--top N] [--programs syscalls,xz,sqlite3]
"""
import argparse
import glob
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from interleaved import clean_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fail(message):
    sys.exit(f"[kairos] accuracy.py: {message}")


def run(command, directory, stdin=None, env=None):
    """(stdout bytes, exit status, user+system CPU s of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as source:
        result = subprocess.run(command, cwd=directory, stdin=source, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result.stdout, result.returncode, cpu, result.stderr.decode(errors="replace")


def normalized(name):
    """A name both tools agree on: no parameters, no `(anonymous namespace)::`, no symbol version,
    and glibc's aliases of one function folded (`__GI___libc_open`, `__libc_open64` and `open64`
    are `open`), since perf and kairos each pick one of them."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"@+GLIBC[\w.]*", "", name)
    if "(" in name:
        name = name[:name.index("(")]
    name = re.sub(r"^(__GI_)?_*(libc_)?", "", name.strip())
    return re.sub(r"64$", "", name) or name


def unnamed_key(path):
    """A module's frames that no symbol names, as one function (kairos's own naming of them)."""
    base = re.sub(r"\.so(\.\d+)*$", ".so", os.path.basename(path))
    return f"{base} (no symbols)"


UNNAMED = re.compile(r"^(.*) \(no symbols\)$")


def kairos_shares(database):
    """{function: self share %}, total weight in s, {function: inclusive share %}, and the program
    threads' CPU time in s (each thread's last thread_cpu_time_ns counter, summed)."""
    db = sqlite3.connect(database)
    (threads_cpu,) = db.execute(
        "SELECT COALESCE(SUM(last), 0) FROM (SELECT MAX(c.value) AS last FROM counter c JOIN string s "
        "ON c.name = s.id WHERE s.value = 'thread_cpu_time_ns' GROUP BY c.thread)").fetchone()
    rows = db.execute("SELECT name, self, total FROM top_functions").fetchall()
    (weight,) = db.execute("SELECT COALESCE(SUM(weight_ns), 0) FROM sample").fetchone()
    selfs, totals = {}, {}
    for name, self_ns, total_ns in rows:
        match = UNNAMED.match(name)
        key = unnamed_key(match.group(1)) if match else normalized(name)
        selfs[key] = selfs.get(key, 0) + 100.0 * self_ns / weight if weight else 0
        totals[key] = max(totals.get(key, 0), 100.0 * total_ns / weight if weight else 0)
    return selfs, weight / 1e9, totals, threads_cpu / 1e9


def perf_shares(perf, data, directory):
    """Self shares from `perf script`, kernel frames folded into their user caller (the first user
    frame of each sample, whose address perf gives relative to its module)."""
    script = subprocess.run([perf, "script", "-i", data, "-F", "period,ip,sym,dso"],
                            cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=1800)
    selfs, grand = {}, 0
    period, leaf = 0, None
    for line in script.stdout.decode(errors="replace").splitlines() + [""]:
        text = line.strip()
        if text.isdigit() or not text:  # a sample's period, or the blank line after its frames
            if leaf is not None and period:
                selfs[leaf] = selfs.get(leaf, 0) + period
                grand += period
            period, leaf = (int(text) if text else 0), None
            continue
        if leaf is not None or " (" not in text:
            continue
        address, rest = text.split(None, 1)
        symbol, dso = rest[:rest.rfind(" (")].strip(), rest[rest.rfind(" (") + 2:-1]
        if "kernel" in dso or dso.startswith("["):
            continue  # folded into the user frame below it
        if symbol != "[unknown]":
            leaf = normalized(re.sub(r"\+0x[0-9a-f]+$", "", symbol))
        else:
            leaf = unnamed_key(dso)
    return {k: 100.0 * v / grand for k, v in selfs.items()} if grand else {}


def compare(label, kairos, perf, top):
    if not perf:
        print(f"    (no perf figures) kairos's top: " +
              ", ".join(f"{k} {v:.1f}%" for k, v in sorted(kairos.items(), key=lambda kv: -kv[1])[:top]))
        return None
    worst = 0.0
    print(f"    {'function (by perf self share)':<56} {'perf':>7} {'kairos':>7} {'diff':>6}")
    for key, share in sorted(perf.items(), key=lambda kv: -kv[1])[:top]:
        mine = kairos.get(key, 0.0)
        worst = max(worst, abs(mine - share))
        print(f"    {key[:56]:<56} {share:6.1f}% {mine:6.1f}% {mine - share:+6.1f}")
    print(f"    largest difference among perf's top {top}: {worst:.1f} points ({label})")
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--xz-megabytes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0, help="CPU seconds of the syscalls program")
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--programs", default="syscalls,xz,sqlite3")
    arguments = parser.parse_args()
    build = Path(arguments.build).resolve()
    kairos_run = build / "plugins/runtime/kairos-run"
    sampled = build / "plugins/runtime/tests/kairos_sampled_program"
    for needed in (kairos_run, sampled):
        if not needed.exists():
            fail(f"{needed} is not built (cmake --build {build} --target kairos_run kairos_preload kairos_sampled_program)")
    perf = shutil.which("perf")
    work = Path(tempfile.mkdtemp(prefix="kairos-accuracy-"))
    env = clean_environment()
    programs = []
    wanted = arguments.programs.split(",")
    if "syscalls" in wanted:
        programs.append(("syscalls", [str(sampled), "syscalls", str(arguments.seconds)], None, (1000,)))
    if "xz" in wanted:
        if not shutil.which("xz"):
            print("xz: skipped (xz not installed)")
        else:
            text = work / "big.txt"
            with open(text, "w") as out:  # words from a fixed vocabulary: compressible, not trivially
                words = [f"w{(i * 7919) % 5003:x}{'abcdefghij'[i % 10] * (i % 7)}" for i in range(5003)]
                size, i = 0, 0
                while size < arguments.xz_megabytes * 1_000_000:
                    line = " ".join(words[(i * 31 + j * 17 + (i >> 3)) % 5003] for j in range(12)) + "\n"
                    out.write(line)
                    size += len(line)
                    i += 1
            programs.append(("xz -T2 -6", ["xz", "-T2", "-6", "-c", str(text)], None, (1000, 10000)))
    if "sqlite3" in wanted:
        if not shutil.which("sqlite3"):
            print("sqlite3: skipped (sqlite3 not installed)")
        else:
            script = work / "inserts.sql"
            with open(script, "w") as out:
                out.write("CREATE TABLE t(a INTEGER, b TEXT, c BLOB);\nCREATE INDEX ta ON t(a);\n")
                for transaction in range(3000):
                    out.write("BEGIN;\n")
                    for row in range(40):
                        out.write(f"INSERT INTO t VALUES({(transaction * 40 + row) * 2654435761 % 1000003},"
                                  f" 'row {transaction} {row}', randomblob(200));\n")
                    out.write("COMMIT;\n")
            programs.append(("sqlite3 inserts", ["sqlite3", str(work / "inserts.db")], script, (1000,)))
    for name, command, stdin, frequencies in programs:
        if "inserts.db" in " ".join(command):
            Path(work / "inserts.db").unlink(missing_ok=True)
        bare_out, bare_status, bare_cpu, _ = run(command, work, stdin, env)
        print(f"{name}: bare run {bare_cpu:.2f} s of CPU, exit status {bare_status}")
        for hz in frequencies:
            print(f"  {hz} Hz")
            output = work / f"kairos-{name.split()[0]}-{hz}"
            shutil.rmtree(output, ignore_errors=True)
            if "inserts.db" in " ".join(command):
                Path(work / "inserts.db").unlink(missing_ok=True)
            out, status, cpu, err = run([str(kairos_run), "--freq", str(hz), "-o", str(output / "kairos-%pid%"),
                                         "--formats", "db", "-s", "KAIROS_SAMPLING_DELAY=0", "--", *command],
                                        work, stdin, env)
            databases = glob.glob(str(output) + "/*.db")
            if not databases:
                fail(f"{name}: kairos wrote no database: {err}")
            selfs, weight, totals, threads_cpu = kairos_shares(databases[0])
            # The syscalls program prints its CPU times, which differ from run to run.
            same = (out == bare_out or name == "syscalls") and status == bare_status
            print(f"    kairos: {weight:.2f} s of CPU in samples = {100 * weight / threads_cpu:.1f}% of the program "
                  f"threads' {threads_cpu:.2f} s; the run's process CPU {cpu:.2f} s (kairos's threads included), "
                  f"the bare run's {bare_cpu:.2f} s; output and exit status {'unchanged' if same else 'CHANGED'}")
            for line in err.splitlines():
                if "not sampled" in line or "lost" in line:
                    print(f"    kairos said: {line.strip()}")
            perf_self = {}
            if perf:
                data = work / f"perf-{hz}.data"
                if "inserts.db" in " ".join(command):
                    Path(work / "inserts.db").unlink(missing_ok=True)
                _, perf_status, _, perf_err = run([perf, "record", "-q", "-e", "task-clock", "-F", str(hz), "-g",
                                                   "-o", str(data), "--", *command], work, stdin, env)
                if perf_status != 0 or not data.exists():
                    print(f"    perf record failed ({perf_status}): {perf_err.strip()[:200]}")
                else:
                    perf_self = perf_shares(perf, str(data), work)
            else:
                print("    perf: not installed")
            compare(f"{name} at {hz} Hz", selfs, perf_self, arguments.top)
            if name == "syscalls":
                match = re.search(rb"read_random=(\d+) multiply_loop=(\d+)", out)
                truth = 100.0 * int(match.group(1)) / (int(match.group(1)) + int(match.group(2))) if match else 0
                # perf -g walks frame pointers, which lose read's caller (read keeps none): its
                # self share of read is the comparison, this the program's own measure.
                print(f"    read_random inclusive: kairos {totals.get('read_random', 0):.1f}%, "
                      f"the program's own measure {truth:.1f}%")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
