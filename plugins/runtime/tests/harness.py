"""What the runtime's Python test scripts share: a failure type, check(), skip(), time limits that
end in a named failure instead of a bare ctest timeout, and running the test named on the command
line (ctest gives each test its own entry) in a fresh temporary directory."""
import os
import selectors
import subprocess
import sys
import tempfile
import time

# ctest's TIMEOUT for the test, less a margin (set by tests/CMakeLists.txt): a subprocess may not
# run past it, so a hang is reported by this script, naming the command, before ctest kills it.
_deadline = time.monotonic() + float(os.environ.get("KAIROS_TEST_BUDGET_S", "3600"))


class Failure(Exception):
    pass


class Skipped(Exception):
    """The test's subject cannot run on this machine; ctest reports the test skipped."""


# What reaches a program from an outer kairos or another tool: none of it may leak into a test's run.
TOOL_VARIABLES = ("LD_PRELOAD", "OMP_TOOL_LIBRARIES", "NVTX_INJECTION64_PATH", "KOKKOS_TOOLS_LIBS",
                  "KOKKOS_PROFILE_LIBRARY")


def clean_environment(*defaults, **settings):
    """The caller's environment without any KAIROS_* setting or tool variable, in the C locale, then
    each of `defaults` (a test script's own dicts) and the test's `settings` on top, as strings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_") and k not in TOOL_VARIABLES}
    env["LC_ALL"] = "C"
    for layer in (*defaults, settings):
        env.update({k: str(v) for k, v in layer.items()})
    return env


def sampled_stacks(db, table="sample"):
    """Each sample of `table` (sample, realtime_sample) of a profile database: (weight_ns, frames
    leaf first as (function, module) pairs)."""
    nodes = {node: (parent, function, module or "") for node, parent, function, module in db.execute(
        """SELECT stack.id, stack.parent, function.value, module.value FROM stack
           JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function
           LEFT JOIN string AS module ON module.id = frame.module""")}
    stacks = []
    for weight, node in db.execute(f"SELECT weight_ns, stack FROM {table} WHERE stack IS NOT NULL"):
        frames = []
        while node is not None:
            parent, function, module = nodes[node]
            frames.append((function, module))
            node = parent
        stacks.append((weight, frames))
    return stacks


def unfolded_kairos_frames(frames):
    """The frames of a stack (sampled_stacks) in kairos's own code other than `[kairos]`, the one
    frame its own work on the program's threads is charged to (docs/runtime.md): there are none."""
    return [function for function, module in frames
            if os.path.basename(module).startswith("libkairos.so") and function != "[kairos]"]


def share_tolerance(samples, share_percent):
    """Percentage points within which a share of `share_percent` measured by `samples` CPU-time
    samples lands around the truth: 4 standard deviations of a binomial share (random sample
    periods make the spread a little narrower), so that a correct sampler fails 1 run in 15,000."""
    p = min(max(share_percent / 100.0, 0.0), 1.0)
    return 100.0 * 4 * (p * (1 - p) / max(samples, 1)) ** 0.5


def check(condition, message):
    if not condition:
        raise Failure(message)


def skip(reason):
    raise Skipped(reason)


def time_left(limit):
    """The smaller of `limit` seconds and what is left of the test's budget."""
    return max(1.0, min(limit, _deadline - time.monotonic()))


def run_process(command, limit, **options):
    """subprocess.run with captured output, ending in Failure if it runs past `limit` seconds or
    the test's budget, whichever comes first."""
    timeout = time_left(limit)
    try:
        return subprocess.run(command, capture_output=True, timeout=timeout, **options)
    except subprocess.TimeoutExpired:
        raise Failure(f"{command} did not finish within {timeout:.0f} s")


def read_line(process, limit):
    """The next line of a Popen's stdout, or Failure (the process killed) if none comes in time."""
    timeout = time_left(limit)
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            process.wait()
            raise Failure(f"{process.args} printed no line within {timeout:.0f} s")
    return process.stdout.readline()


def communicate(process, limit):
    """Popen.communicate within `limit` seconds or the budget; Failure (process killed) if not."""
    timeout = time_left(limit)
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise Failure(f"{process.args} did not finish within {timeout:.0f} s")


def run_named_test(tests, prefix):
    """Runs tests[f"test_{sys.argv[1]}"](directory); returns the process exit status."""
    name = sys.argv[1]
    test = tests.get(f"test_{name}")
    if test is None:
        print(f"no test named {name}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-{name}-") as directory:
        try:
            test(directory)
        except Failure as failure:
            print(f"FAILED {name}: {failure}", file=sys.stderr)
            return 1
        except Skipped as reason:
            # The marker ctest's SKIP_REGULAR_EXPRESSION looks for (cmake/kairos_testing.cmake).
            print(f"KAIROS-TEST-SKIPPED: {name}: {reason}")
            return 0
    print(f"passed {name}")
    return 0
