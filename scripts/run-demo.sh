#!/usr/bin/env bash
# Installs what is missing, builds the examples and runs them: a bundle of built-in components
# around a workload, a user-written component, and the published bundle example.
# Usage: scripts/run-demo.sh [build directory, default build]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target measure_region call_graph_report custom_component seed_bundle
for example in measure_region call_graph_report custom_component seed_bundle; do
  echo "== examples/$example.cpp"
  (cd "$build/examples" && "./$example")
done
