#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, builds kairos, profiles an unmodified
# example program with kairos-run (sampling every thread, recording its user-API regions) and prints
# where its time went, with the paths of the database, the trace and the report.
# Usage: scripts/run-demo.sh [build directory, default build]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target kairos_run kairos_preload profiled_app

output=$build/demo
rm -rf "$output"
echo "== kairos-run -- examples/profiled_app"
# No start-up delay (default 0.5 s): the demo program runs only about two seconds.
"$build/plugins/runtime/kairos-run" -o "$output/%exe%-%pid%" -s KAIROS_SAMPLING_DELAY=0 -- \
  "$build/examples/profiled_app"
echo
echo "== the report ($(ls "$output"/*.txt))"
cat "$output"/*.txt
echo
echo "== outputs: open the .trace.json in https://ui.perfetto.dev, query the .db with sqlite3"
ls -l "$output"
