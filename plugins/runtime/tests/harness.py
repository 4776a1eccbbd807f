"""What the runtime's Python test scripts share: a failure type, check(), and running the test
named on the command line (ctest gives each test its own entry) in a fresh temporary directory."""
import sys
import tempfile


class Failure(Exception):
    pass


class Skipped(Exception):
    """The test cannot run on this machine (a missing program, a limit it cannot set)."""


SKIP_RETURN_CODE = 77  # registered with ctest as SKIP_RETURN_CODE: reported as skipped


def check(condition, message):
    if not condition:
        raise Failure(message)


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
            print(f"skipped {name}: {reason}")
            return SKIP_RETURN_CODE
    print(f"passed {name}")
    return 0
