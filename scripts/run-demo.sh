#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, builds kairos, profiles an unmodified
# example program with kairos-run (sampling every thread, recording its user-API regions) and prints
# where its time went, then the paths of the database, the HTML report and the flame graph.
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
"$build/plugins/runtime/kairos-run" -o "$output/%exe%-%pid%" -s KAIROS_SAMPLING_DELAY=0 \
  --formats db,text,trace,html,flamegraph -- "$build/examples/profiled_app"
echo
echo "== the report ($(ls "$output"/*.txt))"
cat "$output"/*.txt
echo
echo "== outputs (docs/outputs.md says what opens each)"
ls -l "$output"
echo
echo "database:    $(ls "$output"/*.db)   (sqlite3; kairos-report turns it into any output again)"
echo "trace:       $(ls "$output"/*.trace.json)   (https://ui.perfetto.dev or chrome://tracing)"
echo "HTML report: $(ls "$output"/*.html)   (any browser, no network needed)"
echo "flame graph: $(ls "$output"/*.svg)"
