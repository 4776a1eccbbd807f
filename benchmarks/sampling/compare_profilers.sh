#!/usr/bin/env bash
# Sampling overhead, whole processes, side by side in one run: the same CPU-bound 2-thread program
# (cpu_bound_workload) with no profiler, with an empty signal handler at the same rate (the floor),
# gperftools, perf record and kairos-run, at the default rate and at 1 kHz. Prints the median wall
# time of RUNS runs, its ratio to no profiler, and samples delivered vs requested (frequency x the
# program's CPU time).
#
# Usage: benchmarks/sampling/compare_profilers.sh [build directory (default build)] [runs (default 5)]
# Installs what it compares against first: scripts/install-deps.sh benchmarks/sampling/debian-packages.txt
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
runs=${2:-5}
"$root/scripts/install-deps.sh" "$root/benchmarks/sampling/debian-packages.txt" >/dev/null
cmake --build "$build" --target cpu_bound_workload kairos-run kairos_preload >/dev/null 2>&1 ||
  cmake --build "$build" --target cpu_bound_workload >/dev/null
program=$build/benchmarks/sampling/cpu_bound_workload
kairos_run=$build/plugins/runtime/kairos-run
[ -x "$kairos_run" ] || kairos_run=""
profiler_library=$(ls /usr/lib/*/libprofiler.so.0 2>/dev/null | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now_ns() { date +%s%N; }

# run_config NAME HZ COMMAND...: COMMAND runs the program (it may be prefixed by a profiler) and
# leaves its stdout in $work/out; count_samples (set per profiler) prints the samples delivered.
baseline_seconds=""
run_config() {
  local name=$1 hz=$2; shift 2
  : > "$work/seconds"; : > "$work/delivered"; : > "$work/cpu"
  for _ in $(seq "$runs"); do
    rm -rf "$work/run"; mkdir -p "$work/run"
    local begin end
    begin=$(now_ns)
    (cd "$work/run" && "$@" > "$work/out" 2> "$work/err")
    end=$(now_ns)
    awk -v b="$begin" -v e="$end" 'BEGIN { printf "%.4f\n", (e - b) / 1e9 }' >> "$work/seconds"
    awk '{ print $2 }' "$work/out" >> "$work/cpu"
    count_samples >> "$work/delivered"
  done
  local seconds cpu delivered requested ratio share
  seconds=$(median < "$work/seconds"); cpu=$(median < "$work/cpu"); delivered=$(median < "$work/delivered")
  [ -z "$baseline_seconds" ] && baseline_seconds=$seconds
  ratio=$(awk -v a="$seconds" -v b="$baseline_seconds" 'BEGIN { printf "%.3f", a / b }')
  if [ "$hz" -gt 0 ]; then
    requested=$(awk -v hz="$hz" -v cpu="$cpu" 'BEGIN { printf "%d", hz * cpu }')
    share=$(awk -v d="$delivered" -v r="$requested" 'BEGIN { printf "%.1f", (r > 0 ? 100 * d / r : 0) }')
    printf '%-34s %6s %9s %8s %10s %10s %8s%%\n' "$name" "$hz" "$seconds" "$ratio" "$delivered" "$requested" "$share"
  else
    printf '%-34s %6s %9s %8s %10s %10s %9s\n' "$name" "-" "$seconds" "$ratio" "-" "-" "-"
  fi
}

printf 'cpu_bound_workload, %s runs each, medians (this machine: %s cores)\n' "$runs" "$(nproc)"
printf '%-34s %6s %9s %8s %10s %10s %9s\n' "profiler" "Hz" "wall s" "ratio" "samples" "requested" "delivered"
count_samples() { echo 0; }
run_config "none" 0 "$program"

for hz in 300 1000; do
  count_samples() { awk '{ print $4 }' "$work/out"; }
  run_config "empty handler (perf task-clock)" "$hz" "$program" --empty-handler "$hz"

  if [ -n "$profiler_library" ]; then
    count_samples() {
      google-pprof --text "$program" "$work/run/cpu.prof" 2>/dev/null |
        awk '/^Total:/ { print $2; found = 1 } END { if (!found) print 0 }'
    }
    run_config "gperftools (CPUPROFILE)" "$hz" env CPUPROFILE="$work/run/cpu.prof" \
      CPUPROFILE_FREQUENCY="$hz" LD_PRELOAD="$profiler_library" "$program"
  fi

  if command -v perf >/dev/null; then
    count_samples() { perf script -i "$work/run/perf.data" -F tid 2>/dev/null | wc -l; }
    run_config "perf record -e cpu-clock -g" "$hz" perf record -q -F "$hz" -e cpu-clock -g \
      -o "$work/run/perf.data" -- "$program"
  fi

  if [ -n "$kairos_run" ]; then
    count_samples() {
      local database
      database=$(find "$work/run" -name '*.db' | head -1)
      if [ -n "$database" ]; then sqlite3 "$database" 'SELECT COUNT(*) FROM sample'; else echo 0; fi
    }
    # No start-up delay, so every profiler samples the same span of the program.
    run_config "kairos-run" "$hz" "$kairos_run" -o "$work/run/kairos-%pid%" --freq "$hz" \
      -s KAIROS_SAMPLING_DELAY=0 -- "$program"
  fi
done
