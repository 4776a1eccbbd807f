#!/usr/bin/env python3
"""MPI tests (docs/mpi.md): an imbalanced MPI program (mpi_program.cpp) under
`mpirun -np 4 kairos-run -- ./mpi_program`, checked through the ranks' databases.

mpirun runs 4 ranks on however many cores there are (--oversubscribe); where mpirun cannot start
even one rank here (no Open MPI, a container that forbids it), the tests report themselves skipped.

Run one test: mpi_tests.py NAME (ctest does). Needs KAIROS_RUN and KAIROS_MPI_PROGRAM.
"""
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import sys

from harness import (check, clean_environment, communicate, run_named_test, run_process, sampled_stacks, skip,
                     unfolded_kairos_frames)

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
KAIROS_MERGE = os.environ.get("KAIROS_MERGE", "")
PROGRAM = os.environ.get("KAIROS_MPI_PROGRAM", "")
RANKS = 4
UNIT_SECONDS = "0.15"  # rank r works (r + 1) units: 1.5 s of CPU in all, on 2 cores
TIMEOUT = 50



def launcher(ranks):
    mpirun_path = shutil.which("mpirun")
    if not mpirun_path:
        skip("mpirun not found (install openmpi-bin: scripts/install-deps.sh)")
    command = [mpirun_path, "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def mpirun(ranks, command, directory, **extra):
    return run_process(launcher(ranks) + command, TIMEOUT, cwd=directory, env=clean_environment(**extra))


def require_mpirun(directory):
    if not PROGRAM or not os.path.exists(PROGRAM):
        skip("the MPI test program was not built (no MPI compiler at configure time)")
    probe = mpirun(1, ["true"], directory)
    if probe.returncode != 0:
        skip(f"mpirun cannot start a process here: {probe.stderr.decode(errors='replace').strip()[:300]}")


def sorted_lines(output):
    return sorted(output.decode(errors="replace").splitlines())


def kairos_lines(stderr):
    return [line for line in stderr.decode(errors="replace").splitlines() if line.startswith("[kairos]")]


def launch_databases(launch_directory, ranks):
    """A launch directory's databases, named by rank; the directory's name ends with their launch id."""
    databases = sorted(glob.glob(os.path.join(launch_directory, "*.db")))
    expected = [os.path.join(launch_directory, f"rank{rank}.db") for rank in range(ranks)]
    check(databases == expected, f"databases named by rank expected: {expected}, found {databases}")
    with sqlite3.connect(databases[0]) as database:
        launch_id = database.execute("SELECT launch_id FROM process").fetchone()[0]
    check(launch_id and launch_directory.endswith("-" + launch_id),
          f"the launch directory {launch_directory} is named by its launch id {launch_id}")
    return databases


def rank_databases(directory):
    """The databases of the one launch under kairos-output/ (the default path under MPI), by rank."""
    launches = glob.glob(os.path.join(directory, "kairos-output", "*"))
    check(len(launches) == 1, f"one launch directory expected under kairos-output, found {launches}")
    return launches[0], launch_databases(launches[0], RANKS)


def test_imbalanced_ranks(directory):
    require_mpirun(directory)
    bare = mpirun(RANKS, [PROGRAM, UNIT_SECONDS], directory)
    check(bare.returncode == 0, f"the program failed without kairos: {bare.stderr.decode(errors='replace')}")
    profiled = mpirun(RANKS, [KAIROS_RUN, "--", PROGRAM, UNIT_SECONDS], directory)
    stderr = profiled.stderr.decode(errors="replace")
    check(profiled.returncode == bare.returncode, f"exit status {profiled.returncode}, without kairos "
          f"{bare.returncode}: {stderr}")
    # Ranks print in any order: the lines, not their interleaving, are the output.
    check(sorted_lines(profiled.stdout) == sorted_lines(bare.stdout),
          f"output changed:\n{profiled.stdout.decode()}\nwithout kairos:\n{bare.stdout.decode()}")
    launch_directory, databases = rank_databases(directory)

    summary = kairos_lines(profiled.stderr)
    check(len(summary) == 1, f"one [kairos] line for the launch expected (rank 0's), got: {summary}")
    merge = f"kairos-merge -o {launch_directory}/merged.db {launch_directory}/*.db"
    check("rank 0 of 4" in summary[0] and merge in summary[0], f"rank 0's line names the directory and "
          f"'{merge}': {summary[0]}")

    launch_ids, mpi_seconds, mpi_callers = set(), {}, set()
    for rank, path in enumerate(databases):
        with sqlite3.connect(path) as database:
            row = database.execute("SELECT rank, size, launch_id, hostname, command FROM processes").fetchall()
            check(len(row) == 1 and row[0][0] == rank and row[0][1] == RANKS and row[0][2] and row[0][3],
                  f"{path}: process row (rank, size, launch id, host) {row}")
            check(row[0][4] == f"{PROGRAM} {UNIT_SECONDS}", f"{path}: the process row's command {row[0][4]!r}")
            launch_ids.add(row[0][2])
            calls = dict(database.execute("SELECT name, COUNT(*) FROM mpi_calls GROUP BY name").fetchall())
            for name in ("MPI_Isend", "MPI_Irecv", "MPI_Waitall", "MPI_Allreduce", "MPI_Barrier"):
                check(calls.get(name) == 1, f"{path}: one {name} row expected, calls {calls}")
            isend = database.execute("SELECT bytes, peer FROM mpi_calls WHERE name = 'MPI_Isend'").fetchone()
            check(isend == (4000, (rank + 1) % RANKS), f"{path}: MPI_Isend (bytes, peer) {isend}")
            allreduce = database.execute("SELECT bytes, peer FROM mpi_calls WHERE name = 'MPI_Allreduce'").fetchone()
            check(allreduce == (8, None), f"{path}: MPI_Allreduce (bytes, peer) {allreduce}")
            mpi_seconds[rank] = database.execute("SELECT SUM(duration_ns) FROM mpi_calls").fetchone()[0] / 1e9
            # kairos's wrappers are folded out: an MPI function's frame sits right under the
            # program's frame that called it, as without kairos.
            for _, frames in sampled_stacks(database):
                check(not unfolded_kairos_frames(frames), f"{path}: a kairos frame in a stack: {frames}")
                mpi_callers.update((function, os.path.basename(module)) for (function, _), (_, module)
                                   in zip(frames, frames[1:]) if function.startswith("MPI_"))
        with open(path[:-3] + ".txt") as text:
            report = text.read()
        check(f"in MPI of" in report and "waiting" in report and "MPI_Allreduce" in report,
              f"{path[:-3]}.txt has no MPI section:\n{report[:2000]}")
    check(len(launch_ids) == 1, f"one launch id for every rank expected, found {launch_ids}")
    check(any(module == os.path.basename(PROGRAM) for _, module in mpi_callers),
          f"sampled MPI calls under the program's frames expected, found (function, caller's module) {mpi_callers}")
    check(max(mpi_seconds, key=mpi_seconds.get) == 0,
          f"rank 0 does the least work, so it waits the most; seconds in MPI by rank: {mpi_seconds}")
    print(f"seconds in MPI by rank: {mpi_seconds}; launch {launch_ids.pop()}")


def test_wrapper_script_between_mpirun_and_kairos(directory):
    # Each rank's kairos-run is a child of its own shell, not of mpirun: the launch (id, date, and so
    # the directory) is still mpirun's, found as the nearest ancestor started without the rank.
    require_mpirun(directory)
    script = f"'{KAIROS_RUN}' -- '{PROGRAM}' 0.02; exit $?"
    profiled = mpirun(2, ["sh", "-c", script], directory)
    check(profiled.returncode == 0, f"exit status {profiled.returncode}: {profiled.stderr.decode(errors='replace')}")
    launches = glob.glob(os.path.join(directory, "kairos-output", "*"))
    check(len(launches) == 1, f"the two ranks in one launch directory expected, found {launches}")
    ids = set()
    for rank in range(2):
        with sqlite3.connect(os.path.join(launches[0], f"rank{rank}.db")) as database:
            ids.add(database.execute("SELECT launch_id FROM processes").fetchone()[0])
    check(len(ids) == 1, f"one launch id expected, found {ids}")


def test_mpi_off_keeps_ranks_from_the_launcher(directory):
    require_mpirun(directory)
    profiled = mpirun(RANKS, [KAIROS_RUN, "--", PROGRAM, "0.02"], directory, KAIROS_MPI="off")
    check(profiled.returncode == 0, f"exit status {profiled.returncode}: {profiled.stderr.decode(errors='replace')}")
    _, databases = rank_databases(directory)
    for rank, path in enumerate(databases):
        with sqlite3.connect(path) as database:
            row = database.execute("SELECT rank, size FROM process").fetchone()
            check(row == (rank, RANKS), f"{path}: rank and size from OMPI_COMM_WORLD_* expected, got {row}")
            calls = database.execute("SELECT COUNT(*) FROM mpi_call").fetchone()[0]
            check(calls == 0, f"{path}: KAIROS_MPI=off recorded {calls} MPI calls")


def test_bad_kairos_mpi_is_named_once(directory):
    require_mpirun(directory)
    profiled = mpirun(2, [KAIROS_RUN, "--", PROGRAM, "0.01"], directory, KAIROS_MPI="yes")
    lines = kairos_lines(profiled.stderr)
    check(profiled.returncode == 0, f"exit status {profiled.returncode}")
    named = [line for line in lines if "KAIROS_MPI" in line]
    check(len(named) == 1 and '"yes"' in named[0] and "auto,off" in named[0] and "not recorded" in named[0],
          f"one line (rank 0's) naming KAIROS_MPI, the value, what is accepted and what is off expected: {lines}")


def paragraphs(text, prefix):
    """A text report's paragraphs (split at blank lines) that start with `prefix`."""
    return [part.strip("\n") for part in text.split("\n\n") if part.strip("\n").startswith(prefix)]


def test_launches_in_the_same_second_write_apart_and_merge_only_together(directory):
    """Two launches started at once: each its own directory (their dates may be the same second, their
    launch ids differ), no file of one beside the other's, and kairos-merge refuses to add them up
    unless told they belong together."""
    require_mpirun(directory)
    launches = [subprocess.Popen(launcher(2) + [KAIROS_RUN, "--", PROGRAM, "0.02"], cwd=directory, env=clean_environment(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for launch in launches:
        _, stderr = communicate(launch, TIMEOUT)
        check(launch.returncode == 0, f"exit status {launch.returncode}: {stderr.decode(errors='replace')}")
    directories = sorted(glob.glob(os.path.join(directory, "kairos-output", "*")))
    check(len(directories) == 2, f"a directory per launch expected, found {directories}")
    databases = [launch_databases(launch_directory, 2) for launch_directory in directories]
    ids = []
    for launch_databases_of_one in databases:
        with sqlite3.connect(launch_databases_of_one[0]) as database:
            ids.append(database.execute("SELECT launch_id FROM process").fetchone()[0])
    check(ids[0] != ids[1], f"two launch ids expected: {ids}")
    everything = databases[0] + databases[1]
    merged = os.path.join(directory, "merged.db")
    refused = run_process([KAIROS_MERGE, "-o", merged, *everything], TIMEOUT)
    stderr = refused.stderr.decode(errors="replace")
    check(refused.returncode == 2 and f"'{ids[0]}'" in stderr and f"'{ids[1]}'" in stderr and
          "--several-launches" in stderr and not os.path.exists(merged),
          f"inputs of two launches refused, naming both and the flag, nothing written: {refused.returncode}, {stderr}")
    together = run_process([KAIROS_MERGE, "--several-launches", "-o", merged, *everything], TIMEOUT)
    check(together.returncode == 0, f"--several-launches: {together.stderr.decode(errors='replace')}")
    with sqlite3.connect(merged) as database:
        launch_ids = database.execute("SELECT launch_id, COUNT(*) FROM process GROUP BY launch_id").fetchall()
    check(sorted(launch_ids) == sorted([(ids[0], 2), (ids[1], 2)]), f"both launches' ranks: {launch_ids}")


def spread_row(report, section, name):
    """(min, median, mean, max, max/mean, slowest rank) of `name` in a ranks-side-by-side table."""
    lines = report.split(section, 1)[1].split("\n\n", 1)[0].splitlines()
    for line in lines[2:]:
        fields = line.split()
        if fields[-1] == name:
            return (*map(float, fields[:5]), int(fields[6]))
    raise AssertionError(f"{name} not in {section}:\n" + "\n".join(lines))


def test_merged_launch_shows_the_imbalance(directory):
    """The launch merged (kairos-merge), then its report: rank 3 slowest at the known 1.6, rank 0 the
    most in MPI, --rank R for one rank alone."""
    require_mpirun(directory)
    profiled = mpirun(RANKS, [KAIROS_RUN, "--", PROGRAM, UNIT_SECONDS], directory)
    check(profiled.returncode == 0, f"exit status {profiled.returncode}: {profiled.stderr.decode(errors='replace')}")
    launch_directory, databases = rank_databases(directory)
    merged = os.path.join(directory, "merged.db")
    merge = run_process([KAIROS_MERGE, "-o", merged, *databases], TIMEOUT)
    check(merge.returncode == 0, f"kairos-merge: {merge.stderr.decode(errors='replace')}")
    report = run_process([KAIROS_REPORT, merged], TIMEOUT)
    check(report.returncode == 0, f"kairos-report: {report.stderr.decode(errors='replace')}")
    text = report.stdout.decode(errors="replace")
    check(f"{RANKS} MPI ranks side by side" in text, f"the ranks section:\n{text[:3000]}")
    low, median, mean, high, imbalance, slowest = spread_row(text, "regions and instrumented functions", "work")
    unit = float(UNIT_SECONDS)
    check(slowest == 3 and abs(imbalance - 1.6) < 0.1, f"work: rank 3 slowest at 4 / 2.5 = 1.6, got rank {slowest} "
          f"at {imbalance}")
    check(abs(low - unit) < 0.05 and abs(high - 4 * unit) < 0.05, f"work: 1 to 4 units of {unit} s: {low}..{high}")
    mpi = text.split("MPI time per rank", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    in_mpi = {int(line.split()[0]): float(line.split()[2]) for line in mpi}
    check(sorted(in_mpi) == list(range(RANKS)) and max(in_mpi, key=in_mpi.get) == 0,
          f"rank 0 waits the most: {in_mpi}")
    # --rank 2: every output sees rank 2's process alone.
    with sqlite3.connect(merged) as database:
        pid_of_rank_2 = database.execute("SELECT pid FROM processes WHERE rank = 2").fetchone()[0]
    trace = run_process([KAIROS_REPORT, merged, "--rank", "2", "-f", "trace"], TIMEOUT)
    events = json.loads(trace.stdout)["traceEvents"]
    check(events and {event["pid"] for event in events} == {pid_of_rank_2},
          f"--rank 2's trace holds rank 2's process only: {sorted({event['pid'] for event in events})}")
    names = [event["args"]["name"] for event in events if event.get("name") == "process_name"]
    check(names == [f"rank 2: {PROGRAM} {UNIT_SECONDS}"], f"the process track is named by its rank and command: "
          f"{names}")
    allreduce = [event for event in events if event.get("cat") == "mpi" and event["name"] == "MPI_Allreduce"]
    check(len(allreduce) == 1 and allreduce[0]["args"] == {"bytes": 8} and allreduce[0]["dur"] > 0,
          f"the trace has rank 2's MPI_Allreduce as a slice: {allreduce}")
    isend = [event for event in events if event.get("cat") == "mpi" and event["name"] == "MPI_Isend"]
    check(len(isend) == 1 and isend[0]["args"] == {"bytes": 4000, "peer": 3}, f"MPI_Isend to rank 3: {isend}")
    # Each rank's MPI and thread sections in the merged report are those of its own report, the
    # threads named with their rank.
    for rank, path in enumerate(databases):
        with open(path[:-3] + ".txt") as own_file:
            own = own_file.read()
        for prefix in ("MPI, ", f"rank {rank}, thread "):
            sections = paragraphs(own, prefix)
            check(sections and all(section in paragraphs(text, prefix) for section in sections),
                  f"rank {rank}'s '{prefix}' sections as in its own report:\n{sections}\nmerged:\n{text}")
    check(not paragraphs(text, "thread "), f"every thread of the merged launch is named with its rank:\n{text}")
    alone = run_process([KAIROS_REPORT, merged, "--rank", "2"], TIMEOUT).stdout.decode(errors="replace")
    check("MPI ranks side by side" not in alone and "work" in alone, "--rank 2's text is one rank's")
    refused = run_process([KAIROS_REPORT, merged, "--rank", "9"], TIMEOUT)
    check(refused.returncode != 0 and b"no process has rank 9" in refused.stderr and b"0, 1, 2, 3" in refused.stderr,
          f"a rank not there is refused, naming those there: {refused.stderr!r}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-mpi"))
