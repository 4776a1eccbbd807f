#!/usr/bin/env bash
# Installs what is missing, builds everything (core, plugins, examples, tests, benchmarks) and runs
# every test with ctest, then says which tests were skipped and why. Fails when a test group is
# missing although install-deps.sh should have provided its dependency.
# Usage: scripts/run-tests.sh [build directory, default build]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAIROS_WARNINGS_AS_ERRORS=ON
cmake --build "$build" -j "$(nproc)"
status=0
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure --timeout 300 || status=$?

# Each skipped test's reason: the KAIROS-TEST-SKIPPED line it printed (cmake/kairos_testing.cmake).
echo "Skipped tests and why:"
awk '/^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0 }
     /KAIROS-TEST-SKIPPED: / { sub(/.*KAIROS-TEST-SKIPPED: /, ""); print "  " name ": " $0 }' \
  "$build/Testing/Temporary/LastTest.log" | sort -u

# A group that configure left out for want of a package install-deps.sh installs means the
# install step failed or the package no longer provides what CMake looks for.
not_built=$(ctest --test-dir "$build" -N | grep -o '[^:]*: not built (install [^)]*)' || true)
if [ -n "$not_built" ]; then
  echo "[kairos] test groups missing although scripts/install-deps.sh provides them:" >&2
  echo "$not_built" >&2
  status=1
fi
exit "$status"
