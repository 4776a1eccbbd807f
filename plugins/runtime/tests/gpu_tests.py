#!/usr/bin/env python3
"""GPU tests (docs/plugins/gpu.md): a HIP program under kairos-run, checked through its profile.

There is no GPU on the machines these tests run on. The program (plugins/gpu/tests/hip_program.cpp)
is linked against Debian's real HIP runtime; run as it is, that runtime answers hipErrorNoDevice,
and kairos must leave that path exactly as it was. With LD_LIBRARY_PATH pointing at the test double
(plugins/gpu/tests/hip_double/), the same binary runs against a stand-in runtime that simulates
asynchronous kernels and copies with known durations: the honest way to test API interception
without hardware. The real-runtime path with a device is checked on a GPU machine (docs).

Run one test: gpu_tests.py NAME (ctest does). Needs KAIROS_RUN, KAIROS_REPORT, KAIROS_HIP_PROGRAM and
KAIROS_HIP_DOUBLE_DIR in the environment.
"""
import json
import os
import sqlite3
import sys

import html_page
from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PROGRAM = os.environ.get("KAIROS_HIP_PROGRAM", "")
DOUBLE_DIR = os.environ.get("KAIROS_HIP_DOUBLE_DIR", "")
CUDA_PROGRAM = os.environ.get("KAIROS_CUDA_PROGRAM", "")
TIMEOUT = 60
# Simulated durations are exact; what is measured adds the launch's own host time between kairos's
# start event and the kernel (microseconds) and the float milliseconds of hipEventElapsedTime.
TOLERANCE_MS = 0.5
# hip_program's plan: stream A runs three integrate kernels, stream B one reduce_sum.
KERNELS_A = [(2.0, (64, 1, 1), (256, 1, 1), 0), (3.0, (128, 1, 1), (128, 2, 1), 1024),
             (4.0, (256, 2, 1), (64, 4, 1), 2048)]
COPIES = {("host_to_device", 1 << 20), ("device_to_host", 512 << 10), ("memset", 64 << 10)}


def environment(double=True, **extra):
    return clean_environment({"LD_LIBRARY_PATH": DOUBLE_DIR} if double else {}, **extra)


def plain(double=True, **extra):
    return run_process([PROGRAM], TIMEOUT, env=environment(double, **extra))


def profiled(directory, double=True, formats="db,text,trace", **extra):
    extra.setdefault("KAIROS_GPU_STACKS", "true")
    return run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), "--formats", formats, "--", PROGRAM],
                       TIMEOUT, env=environment(double, **extra))


def without_kairos_lines(stderr):
    return [line for line in stderr.decode(errors="replace").splitlines() if not line.startswith("[kairos]")]


def same_as_plain(result, bare):
    check(result.returncode == bare.returncode,
          f"exit status {result.returncode} under kairos, {bare.returncode} without: {result.stderr!r}")
    check(result.stdout == bare.stdout, f"stdout changed: {result.stdout!r} vs {bare.stdout!r}")
    check(without_kairos_lines(result.stderr) == without_kairos_lines(bare.stderr),
          f"stderr changed: {result.stderr!r} vs {bare.stderr!r}")


def test_kernels_and_copies_recorded(directory):
    bare = plain()
    check(bare.returncode == 0, f"the program runs against the test double: {bare.stderr!r}")
    result = profiled(directory)
    same_as_plain(result, bare)
    db = sqlite3.connect(os.path.join(directory, "out.db"))

    devices = db.execute("SELECT api, name, architecture FROM gpu_device").fetchall()
    check(devices == [("hip", "kairos HIP test double", "gfx90a")], f"one device, described: {devices}")

    kernels = db.execute(
        "SELECT name, stream, duration_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, "
        "start_ns, end_ns, queued_ns FROM gpu_kernels ORDER BY start_ns").fetchall()
    check(len(kernels) == 4, f"exactly the 4 kernels launched: {kernels}")
    integrate = [k for k in kernels if k[0].startswith("physics::integrate(")]
    reduce = [k for k in kernels if k[0].startswith("reduce_sum")]
    check(len(integrate) == 3 and len(reduce) == 1, f"names demangled: {[k[0] for k in kernels]}")
    check(len({k[1] for k in integrate}) == 1 and reduce[0][1] != integrate[0][1],
          "integrate on one stream, reduce_sum on another")
    for (name, _, duration_ns, gx, gy, gz, bx, by, bz, shared, *_), (ms, grid, block, shared_wanted) in zip(
            integrate, KERNELS_A):
        check(abs(duration_ns / 1e6 - ms) <= TOLERANCE_MS, f"{name}: {duration_ns / 1e6:.3f} ms, simulated {ms} ms")
        check((gx, gy, gz) == grid and (bx, by, bz) == block and shared == shared_wanted,
              f"{name}: grid {(gx, gy, gz)} block {(bx, by, bz)} shared {shared}, launched {grid} {block} {shared_wanted}")
    check(abs(reduce[0][2] / 1e6 - 5.0) <= TOLERANCE_MS, f"reduce_sum: {reduce[0][2] / 1e6:.3f} ms, simulated 5 ms")
    for earlier, later in zip(integrate, integrate[1:]):
        check(later[10] >= earlier[11] - 50_000, "a stream runs its kernels one after another, in launch order")
    check(all(k[12] >= -100_000 for k in kernels), "no kernel starts before its launch call")

    copies = {(kind, size) for kind, size in db.execute("SELECT kind, bytes FROM gpu_memcpy")}
    check(copies == COPIES, f"the copies and the memset, by kind and size: {copies}")

    calls = dict(db.execute("SELECT name, COUNT(*) FROM gpu_api_calls GROUP BY name"))
    check(calls.get("hipLaunchKernel") == 4 and calls.get("hipDeviceSynchronize", 0) >= 1,
          f"API calls recorded: {calls}")
    correlated = db.execute(
        "SELECT COUNT(*) FROM gpu_kernel JOIN gpu_api_call USING (correlation) "
        "JOIN string ON string.id = gpu_api_call.name WHERE string.value = 'hipLaunchKernel'").fetchone()[0]
    check(correlated == 4, f"each kernel tied to its launch call: {correlated}")

    main_thread = db.execute("SELECT id FROM thread WHERE sequent_id = 0").fetchone()
    owners = {thread for (thread,) in db.execute("SELECT thread FROM gpu_kernel")}
    check(main_thread is not None and owners == {main_thread[0]}, f"launched by the main thread: {owners}")
    stack = db.execute("SELECT stack FROM gpu_kernel WHERE stack IS NOT NULL LIMIT 1").fetchone()
    check(stack is not None, "the launching call stack is kept")
    names = [name for (name,) in db.execute(
        "WITH RECURSIVE chain(id) AS (SELECT ? UNION ALL SELECT parent FROM stack JOIN chain ON stack.id = chain.id "
        "WHERE parent IS NOT NULL) SELECT string.value FROM chain JOIN stack ON stack.id = chain.id "
        "JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function", (stack[0],))]
    check("main" in names, f"the stack reaches main: {names}")
    check(not any("kairos::" in name for name in names[:1]), f"the leaf is the program's, not kairos's: {names[:3]}")

    with open(os.path.join(directory, "out.txt")) as report:
        text = report.read()
    check("top kernels: 4 launches" in text and "physics::integrate" in text, f"text report: {text}")
    check("top copies: 3" in text and "host_to_device" in text, "text report lists the copies")
    with open(os.path.join(directory, "out.trace.json")) as trace_file:
        trace = json.load(trace_file)["traceEvents"]
    tracks = [e["args"]["name"] for e in trace if e.get("name") == "thread_name" and e["args"]["name"].startswith("GPU ")]
    # Streams A and B, and the default stream of the synchronous copies.
    check(len(tracks) == 3, f"one trace track per stream: {tracks}")
    check(sum(1 for e in trace if e.get("cat") == "gpu_kernel") == 4, "the kernels are slices in the trace")
    summary = [line for line in result.stderr.decode().splitlines() if line.startswith("[kairos]")]
    check(any("4 GPU kernels, 3 GPU copies" in line for line in summary), f"the exit line counts them: {summary}")


def test_no_device_path_unchanged(directory):
    bare = plain(double=False)
    check(bare.returncode == 3, f"Debian's HIP runtime has no device here: {bare.returncode} {bare.stderr!r}")
    result = profiled(directory, double=False, KAIROS_VERBOSE=1)
    same_as_plain(result, bare)


def test_gpu_off_wraps_nothing(directory):
    bare = plain()
    result = profiled(directory, KAIROS_GPU="off", KAIROS_SAMPLING_DELAY=0, KAIROS_SAMPLING_FREQ=1000)
    same_as_plain(result, bare)
    err = result.stderr.decode()
    check("GPU" not in err, f"nothing observed, nothing said: {err!r}")
    check("CUDA_INJECTION64_PATH" not in run_process(
        [KAIROS_RUN, "-o", os.path.join(directory, "env"), "--", "env"], TIMEOUT,
        env=environment(KAIROS_GPU="off")).stdout.decode(), "KAIROS_GPU=off asks nothing of CUDA")
    path = os.path.join(directory, "out.db")
    if os.path.exists(path):  # sampling may have written one; it must hold no GPU row
        count = sqlite3.connect(path).execute("SELECT COUNT(*) FROM gpu_kernel").fetchone()[0]
        check(count == 0, f"KAIROS_GPU=off records no kernel: {count}")


def test_stacks_off_by_default(directory):
    bare = plain()
    result = run_process([KAIROS_RUN, "-o", os.path.join(directory, "out"), "--", PROGRAM], TIMEOUT,
                         env=environment())
    same_as_plain(result, bare)
    db = sqlite3.connect(os.path.join(directory, "out.db"))
    rows = db.execute("SELECT COUNT(*), COUNT(stack), COUNT(thread) FROM gpu_kernel").fetchone()
    check(rows == (4, 0, 4), f"kernels without stacks, still with their thread: {rows}")


def test_report_from_database(directory):
    result = profiled(directory, formats="db")
    check(result.returncode == 0, f"exit status {result.returncode}: {result.stderr!r}")
    text = run_process([KAIROS_REPORT, os.path.join(directory, "out.db")], TIMEOUT)
    check(text.returncode == 0, f"kairos-report: {text.stderr!r}")
    out = text.stdout.decode()
    check("top kernels" in out and "reduce_sum" in out, f"kairos-report shows the kernels: {out}")
    summary = run_process([KAIROS_REPORT, os.path.join(directory, "out.db"), "-f", "json"], TIMEOUT)
    gpu = json.loads(summary.stdout)["gpu"]
    kernels = {k["name"].split("(")[0]: k["launches"] for k in gpu["top_kernels"]}
    check(kernels == {"physics::integrate": 3, "reduce_sum": 1}, f"the JSON summary's kernels: {gpu}")
    check(len(gpu["devices"]) == 1 and sum(c["count"] for c in gpu["copies"]) == 3, f"devices, copies: {gpu}")
    # The HTML report's GPU section: the same kernels and copies.
    page_path = os.path.join(directory, "out.html")
    result = run_process([KAIROS_REPORT, os.path.join(directory, "out.db"), "-f", "html", "-o", page_path], TIMEOUT)
    check(result.returncode == 0, f"kairos-report -f html: {result.stderr!r}")
    page = html_page.read(page_path)
    check("gpu" in page.sections, f"a GPU section: {page.sections}")
    launches = {row[4][0].split("(")[0]: int(row[1][0]) for row in page.tables["kernel-table"][1:]}
    check(launches == kernels, f"the page's kernels: {launches}")
    check(sum(int(row[1][0]) for row in page.tables["copy-table"][1:]) == 3, "the page's copies")


def cuda_runs(directory, **extra):
    command = [KAIROS_RUN, "-o", os.path.join(directory, "out"), "--formats", "db,text", "--", CUDA_PROGRAM]
    env = environment(double=False, **extra)
    return run_process([CUDA_PROGRAM], TIMEOUT, env=env), run_process(command, TIMEOUT, env=env)


def test_cuda_program(directory):
    """cuda_program (plugins/gpu/tests/cuda_program.cu) under kairos-run: without a device (here) its
    exit and output are unchanged; with one, CUPTI's kernels match the program's own cudaEvent times."""
    if not CUDA_PROGRAM:
        skip("no CUDA compiler at configure time: cuda_program was not built")
    bare, result = cuda_runs(directory, KAIROS_VERBOSE=1)
    check(result.returncode == bare.returncode, f"exit status {result.returncode} under kairos, {bare.returncode} without")
    check(result.stdout == bare.stdout, f"stdout changed: {result.stdout!r} vs {bare.stdout!r}")
    if bare.returncode == 3:
        check(without_kairos_lines(result.stderr) == without_kairos_lines(bare.stderr),
              f"stderr changed: {result.stderr!r} vs {bare.stderr!r}")
        skip("no CUDA device here: the no-device path is unchanged, the kernels cannot be checked")
    check(bare.returncode == 0, f"cuda_program failed: {bare.stderr!r}")
    events = {}
    for line in without_kairos_lines(result.stderr):
        if line.startswith("cuda_program: kernel "):
            name, ms = line[len("cuda_program: kernel "):].rsplit(" ", 1)
            events.setdefault(name, []).append(float(ms))
    db = sqlite3.connect(os.path.join(directory, "out.db"))
    kernels = db.execute("SELECT name, duration_ns FROM gpu_kernels ORDER BY start_ns").fetchall()
    check(len(kernels) == 4, f"the 4 kernels: {kernels}")
    measured = {}
    for name, duration_ns in kernels:
        measured.setdefault(name.split("(")[0], []).append(duration_ns / 1e6)
    check(set(measured) == set(events), f"names {sorted(measured)} vs the program's {sorted(events)}")
    for name, times in measured.items():
        for cupti_ms, event_ms in zip(sorted(times), sorted(events[name])):
            check(abs(cupti_ms - event_ms) <= max(0.05 * event_ms, 0.05),
                  f"{name}: {cupti_ms:.3f} ms recorded, {event_ms:.3f} ms by the program's events")
    devices = db.execute("SELECT api, architecture FROM gpu_device").fetchall()
    check(devices and devices[0][0] == "cuda" and devices[0][1].startswith("sm_"), f"the device: {devices}")
    kinds = {kind for (kind,) in db.execute("SELECT kind FROM gpu_memcpy")}
    check({"host_to_device", "device_to_host", "memset"} <= kinds, f"copies by kind: {kinds}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-gpu"))
