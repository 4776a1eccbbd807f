#!/usr/bin/env python3
"""Process sampling's tests: real processes under kairos-run, checked through their profile
databases, traces, HTML reports and kairos-avail (docs/runtime.md, "Process sampling").

Run one test: process_sampling_tests.py NAME (ctest does, one entry per test). Needs KAIROS_RUN,
KAIROS_AVAIL and KAIROS_SAMPLED_PROGRAM (tests/sampled_program.cpp) in the environment.
"""
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_AVAIL = os.environ.get("KAIROS_AVAIL", "")
PROGRAM = os.environ.get("KAIROS_SAMPLED_PROGRAM", "")
TIMEOUT = 60
GPU_METRICS = ("gpu_power_watts", "gpu_temperature_celsius", "gpu_utilization_percent", "gpu_memory_used_bytes")


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0", "KAIROS_OUTPUT_FORMATS": "db,trace,html"}, **extra)


def kairos(arguments, directory, **extra):
    result = run_process([KAIROS_RUN, "--", PROGRAM, *arguments], TIMEOUT, cwd=directory, env=environment(**extra))
    return result.stdout.decode(), result.stderr.decode(), result.returncode


def only(pattern, directory):
    found = glob.glob(os.path.join(directory, "kairos-output", pattern))
    check(len(found) == 1, f"one {pattern} expected, found {found}")
    return found[0]


def database(directory):
    connection = sqlite3.connect(only("*.db", directory))
    check(connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "the database is intact")
    return connection


def metadata(connection):
    return dict(connection.execute("SELECT key, value FROM metadata"))


def values_of(connection, metric):
    return [row[0] for row in connection.execute(
        "SELECT value FROM process_metrics WHERE metric = ? ORDER BY time_ns", (metric,))]


def kairos_lines(stderr):
    """kairos's lines but its exit summary ("[kairos] 116 samples, 0 regions on 3 threads; ...")."""
    return [line for line in stderr.splitlines()
            if line.startswith("[kairos]") and not re.match(r"\[kairos\] \d+ samples, ", line)]


def nvml_present():
    import ctypes
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


def test_metrics_recorded_in_the_database(directory):
    """Two threads busy for 1.2 s of CPU between them, sampled every 20 ms: memory, CPU use in total
    and per thread, context switches and page faults, at every period."""
    out, err, status = kairos(["split", "1.2"], directory, KAIROS_PROCESS_SAMPLING_PERIOD="0.02")
    check(status == 0, f"the program succeeded: {err}")
    connection = database(directory)
    meta = metadata(connection)
    check(meta.get("process_sampling.period_ns") == "20000000", f"the period is stored: {meta}")
    periods = int(meta["process_sampling.periods"])
    check(periods >= 10, f"at least 10 periods in 1.2 s of CPU on 2 threads: {periods}")
    check(meta.get("dropped.process_samples") == "0", "no row was dropped")
    resident = values_of(connection, "memory_resident_bytes")
    virtual = values_of(connection, "memory_virtual_bytes")
    # Every period's rows reach the database once it exists (the first sample creates it).
    check(periods - 3 <= len(resident) <= periods, f"a resident size a period: {len(resident)} of {periods}")
    check(len(virtual) == len(resident), "as many virtual sizes")
    check(all(1 << 20 < r <= v for r, v in zip(resident, virtual)), "resident sizes are positive and below virtual")
    cpu = values_of(connection, "cpu_percent")
    check(len(cpu) == len(resident) and all(0 <= c <= 100 * os.cpu_count() * 1.5 for c in cpu),
          f"CPU use a period, at most the machine's cores: {cpu[:5]}")
    check(max(cpu) > 40, f"the busy threads show: {max(cpu)}")
    for metric in ("context_switches_per_s", "page_faults_per_s"):
        rates = values_of(connection, metric)
        check(len(rates) == len(resident) and all(r >= 0 for r in rates), f"{metric} a period, never negative")
    # Each worker thread's own CPU, tied to its thread row; the main thread waits in join.
    per_thread = connection.execute(
        "SELECT thread, COUNT(*), MAX(value) FROM process_metric WHERE thread IS NOT NULL GROUP BY thread").fetchall()
    threads = {row[0] for row in connection.execute("SELECT id FROM thread")}
    check({row[0] for row in per_thread} <= threads, "thread_cpu_percent rows name thread rows")
    # Each worker's CPU use, summed over its periods (the first from the thread's start), is the CPU
    # time the program measured of it, within a period of a thread's run.
    times = [int(t) for t in re.findall(r"=(\d+)", out)]
    integrals = []
    for thread, start in connection.execute("SELECT id, start_ns FROM thread"):
        previous, total = start, 0.0
        for time_ns, value in connection.execute(
                "SELECT time_ns, value FROM process_metrics WHERE thread = ? ORDER BY time_ns", (thread,)):
            total += value / 100 * (time_ns - previous)
            previous = time_ns
        integrals.append(total)
    for measured in times:
        check(any(abs(total - measured) < 0.15 * measured + 25e6 for total in integrals),
              f"a thread's CPU use adds up to its {measured} ns: {integrals}")
    check(connection.execute("SELECT COUNT(*) FROM process_metrics WHERE thread IS NOT NULL "
                             "AND metric <> 'thread_cpu_percent'").fetchone()[0] == 0,
          "only thread_cpu_percent is per thread")


def test_counter_tracks_in_the_trace_match_the_database(directory):
    kairos(["split", "0.8"], directory, KAIROS_PROCESS_SAMPLING_PERIOD="0.02")
    connection = database(directory)
    with open(only("*.json", directory)) as file:
        trace = json.load(file)
    counters = [event for event in trace["traceEvents"] if event["ph"] == "C"]
    check(counters, "the trace has counter events")
    by_name = {}
    for event in counters:
        check(set(event["args"]) == {"value"} and isinstance(event["args"]["value"], (int, float)),
              f"a counter event holds its value: {event}")
        by_name.setdefault(event["name"], []).append(event["args"]["value"])
    rows = connection.execute("SELECT COUNT(*) FROM process_metric").fetchone()[0]
    check(len(counters) == rows, f"a counter event a row: {len(counters)} events, {rows} rows")
    for metric, count in connection.execute(
            "SELECT metric, COUNT(*) FROM process_metrics WHERE thread IS NULL AND instance IS NULL GROUP BY metric"):
        check(len(by_name.get(metric, [])) == count, f"{metric}: {count} rows, {len(by_name.get(metric, []))} events")
    resident = values_of(connection, "memory_resident_bytes")
    check(by_name["memory_resident_bytes"] == resident, "the values are the database's, in time order")
    thread_tracks = [name for name in by_name if name.startswith("thread_cpu_percent (")]
    check(len(thread_tracks) >= 2, f"a track per thread: {thread_tracks}")


def test_sparklines_in_the_html_timeline(directory):
    kairos(["split", "0.8"], directory, KAIROS_PROCESS_SAMPLING_PERIOD="0.02")
    connection = database(directory)
    with open(only("*.html", directory)) as file:
        page = file.read()
    series = connection.execute(
        "SELECT COUNT(*) FROM (SELECT DISTINCT metric, thread, instance FROM process_metric)").fetchone()[0]
    lines = re.findall(r'<g class="sparkline"><text[^>]*>([^<]*)</text>.*?<polyline class="metric" points="([^"]*)"',
                       page)
    check(len(lines) == series, f"a sparkline a series: {len(lines)} of {series}")
    names = [name for name, _ in lines]
    check("memory_resident_bytes" in names and "cpu_percent" in names, f"named by their metric: {names}")
    for name, points in lines:
        check(len(points.split()) >= 2, f"{name} has points: {points!r}")


def test_off_records_nothing(directory):
    out, err, status = kairos(["split", "0.4"], directory, KAIROS_PROCESS_SAMPLING="off")
    check(status == 0 and not kairos_lines(err), f"a clean run: {err}")
    connection = database(directory)
    check(connection.execute("SELECT COUNT(*) FROM process_metric").fetchone()[0] == 0, "no row")
    check("process_sampling.periods" not in metadata(connection), "no process-sampling metadata")


def test_bad_period_and_metric_are_named_once(directory):
    for variable, value, word in (("KAIROS_PROCESS_SAMPLING_PERIOD", "fast", "a number"),
                                  ("KAIROS_PROCESS_SAMPLING_PERIOD", "0", "a number"),
                                  ("KAIROS_PROCESS_SAMPLING_METRICS", "memory_resident_bytes,bogus", "bogus")):
        run = os.path.join(directory, f"{variable}-{value}")
        os.makedirs(run)
        out, err, status = kairos(["split", "0.4"], run, **{variable: value})
        check(status == 0 and "three_quarters=" in out, f"{variable}={value}: the program ran as ever")
        lines = kairos_lines(err)
        check(len(lines) == 1 and variable in lines[0] and value in lines[0] and word in lines[0]
              and "the process is not sampled" in lines[0], f"{variable}={value}: one line says so: {lines}")
        connection = database(run)
        check(connection.execute("SELECT COUNT(*) FROM sample").fetchone()[0] > 0, "the rest of the profile goes on")
        check(connection.execute("SELECT COUNT(*) FROM process_metric").fetchone()[0] == 0, "no process sampling")


def test_file_vanishing_mid_run_is_named_once(directory):
    """A core's frequency file that stops answering mid-run (as a core taken offline does): one line
    names it, its rows stop there, every other metric and core goes on to the end. The file is
    /proc/<pid>/oom_score of a helper process, which fails once the helper has exited, through a
    descriptor opened before, just as a removed /sys file does."""
    cores = sorted(os.sched_getaffinity(0))
    root = os.path.join(directory, "cpu")
    helper = subprocess.Popen(["sleep", "30"])
    try:
        for core in cores:
            os.makedirs(os.path.join(root, f"cpu{core}", "cpufreq"))
            path = os.path.join(root, f"cpu{core}", "cpufreq", "scaling_cur_freq")
            if core == cores[0]:
                os.symlink(f"/proc/{helper.pid}/oom_score", path)
            else:
                with open(path, "w") as file:
                    file.write("2400000\n")
        process = subprocess.Popen([KAIROS_RUN, "--", PROGRAM, "split", "1.6"], cwd=directory,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=environment(KAIROS_PROCESS_SAMPLING_PERIOD="0.02",
                                                   KAIROS_PROCESS_SAMPLING_CPU_ROOT=root))
        time.sleep(0.5)
        helper.kill()
        helper.wait()
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    err = err.decode()
    check(process.returncode == 0 and "three_quarters=" in out.decode(), f"the program ran as ever: {err}")
    vanished = os.path.join(root, f"cpu{cores[0]}", "cpufreq", "scaling_cur_freq")
    lines = kairos_lines(err)
    check(len(lines) == 1 and vanished in lines[0] and f"core {cores[0]}" in lines[0],
          f"one line names the file and its core: {lines}")
    connection = database(directory)
    last = dict(connection.execute(
        "SELECT instance, MAX(time_ns) FROM process_metric WHERE instance IS NOT NULL GROUP BY instance"))
    end = connection.execute("SELECT MAX(time_ns) FROM process_metric").fetchone()[0]
    check(cores[0] in last and last[cores[0]] < end - 200_000_000,
          f"core {cores[0]}'s rows stop mid-run: {last}, last row at {end}")
    for core in cores[1:]:
        check(last.get(core) == end, f"core {core}'s go on to the end: {last}")
        check(set(connection.execute("SELECT value FROM process_metric WHERE instance = ?", (core,))) == {(2400.0,)},
              "kHz read as MHz")
    check(values_of(connection, "memory_resident_bytes"), "the other metrics go on")


def test_kairos_avail_lists_what_this_machine_offers(directory):
    result = run_process([KAIROS_AVAIL, "--process-metrics", "--json"], TIMEOUT, env=environment())
    check(result.returncode == 0, result.stderr.decode())
    rows = {row["name"]: row for row in json.loads(result.stdout)["process_metrics"]}
    check(len(rows) == 13, f"every metric: {sorted(rows)}")
    for name in ("memory_resident_bytes", "cpu_percent", "thread_cpu_percent", "context_switches_per_s"):
        check(rows[name]["available"], f"{name} is available everywhere: {rows[name]}")
    frequency = os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    check(rows["cpu_frequency_mhz"]["available"] == frequency, f"frequency as /sys offers it: {rows['cpu_frequency_mhz']}")
    if not frequency:
        check("scaling_cur_freq" in rows["cpu_frequency_mhz"]["detail"], "why not names the file")
    gpu = [rows[name] for name in GPU_METRICS]
    if nvml_present():
        check(all(row["available"] or "NVML" in row["detail"] for row in gpu), f"NVML answers: {gpu}")
    else:
        check(not any(row["available"] for row in gpu) and all("libnvidia-ml.so.1" in row["detail"] and
                                                             "ROCm SMI" in row["detail"] for row in gpu),
              f"GPU metrics absent, with each library's reason: {gpu}")
    table = run_process([KAIROS_AVAIL, "-P"], TIMEOUT, env=environment()).stdout.decode()
    check("PROCESS METRICS" in table and "gpu_power_watts" in table, "the table lists them")


def test_gpu_metrics_absent_without_a_library(directory):
    if nvml_present():
        skip("libnvidia-ml.so.1 is present: the GPU metrics are sampled here")
    out, err, status = kairos(["split", "0.4"], directory, KAIROS_PROCESS_SAMPLING_METRICS="cpu_percent,gpu_power_watts")
    check(status == 0, err)
    lines = kairos_lines(err)
    check(len(lines) == 1 and "gpu_power_watts is not available here" in lines[0] and "libnvidia-ml.so.1" in lines[0],
          f"a GPU metric named and absent is said once: {lines}")
    connection = database(directory)
    check({row[0] for row in connection.execute("SELECT DISTINCT metric FROM process_metrics")} == {"cpu_percent"},
          "the metric named that is here is sampled")
    check(metadata(connection)["process_sampling.metrics"] == "cpu_percent", "the metadata says which")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-process-sampling"))
