#!/usr/bin/env bash
# Sampling overhead, whole processes, side by side in one run: the same CPU-bound 2-thread program
# (cpu_bound_workload) with no profiler, with an empty signal handler at the same rate (the floor),
# gperftools, perf record and kairos-run, at the default rate and at 1 kHz. Configurations are
# interleaved round by round (each round runs every configuration once, in order), so machine
# drift touches them alike. Prints per configuration the median wall time and its spread
# (min–max), the median of its per-round ratio to "none", and samples delivered vs requested
# (frequency x the program's own CPU time).
#
# Usage: benchmarks/sampling/compare_profilers.sh [build directory (default build)] [rounds (default 7)]
# Installs what it compares against first: scripts/install-deps.sh benchmarks/sampling/debian-packages.txt
# A profiler that fails, or a run that leaves no samples, fails the script.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-7}
"$root/scripts/install-deps.sh" "$root/benchmarks/sampling/debian-packages.txt" >/dev/null
cmake --build "$build" --target cpu_bound_workload kairos_run kairos_preload >/dev/null
program=$build/benchmarks/sampling/cpu_bound_workload
kairos_run=$build/plugins/runtime/kairos-run
profiler_library=$(ls /usr/lib/*/libprofiler.so.0 | head -1)
command -v perf >/dev/null
command -v google-pprof >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spread() { sort -g | awk 'NR == 1 { low = $1 } { high = $1 } END { printf "%s-%s", low, high }'; }
now_ns() { date +%s%N; }
fail() { echo "[kairos] compare_profilers: $*" >&2; exit 1; }

# Samples each profiler delivered, read from what it wrote in $work/run.
samples_of() {
  case $1 in
    none) echo 0 ;;
    empty) awk '{ print $4 }' "$work/out" ;;
    gperftools)
      google-pprof --text "$program" "$work/run/cpu.prof" 2>/dev/null |
        awk '/^Total:/ { print $2; found = 1 } END { if (!found) exit 1 }' ;;
    perf) perf script -i "$work/run/perf.data" -F tid 2>/dev/null | wc -l ;;
    kairos) sqlite3 "$(find "$work/run" -name '*.db' | head -1)" 'SELECT COUNT(*) FROM sample' ;;
  esac
}

# The command line of configuration KIND at HZ.
command_of() {
  local kind=$1 hz=$2
  case $kind in
    none) echo "$program" ;;
    empty) echo "$program --empty-handler $hz" ;;
    gperftools) echo "env CPUPROFILE=$work/run/cpu.prof CPUPROFILE_FREQUENCY=$hz LD_PRELOAD=$profiler_library $program" ;;
    perf) echo "perf record -q -F $hz -e cpu-clock -g -o $work/run/perf.data -- $program" ;;
    # No start-up delay, so every profiler samples the same span of the program.
    kairos) echo "$kairos_run -o $work/run/kairos-%pid% --freq $hz -s KAIROS_SAMPLING_DELAY=0 -- $program" ;;
  esac
}

configurations=("none 0")
for hz in 300 1000; do
  for kind in empty gperftools perf kairos; do configurations+=("$kind $hz"); done
done
label() {
  case $1 in
    none) echo "none" ;;
    empty) echo "empty handler (perf task-clock)" ;;
    gperftools) echo "gperftools (CPUPROFILE)" ;;
    perf) echo "perf record -e cpu-clock -g" ;;
    kairos) echo "kairos-run" ;;
  esac
}

for round in $(seq "$rounds"); do
  for configuration in "${configurations[@]}"; do
    read -r kind hz <<< "$configuration"
    rm -rf "$work/run"; mkdir -p "$work/run"
    begin=$(now_ns)
    # shellcheck disable=SC2046  # the command line is split into words on purpose
    (cd "$work/run" && $(command_of "$kind" "$hz") > "$work/out" 2> "$work/err") ||
      fail "$(label "$kind") at $hz Hz failed: $(cat "$work/err")"
    end=$(now_ns)
    seconds=$(awk -v b="$begin" -v e="$end" 'BEGIN { printf "%.4f\n", (e - b) / 1e9 }')
    echo "$seconds" >> "$work/$kind-$hz.seconds"
    awk '{ print $2 }' "$work/out" >> "$work/$kind-$hz.cpu"
    delivered=$(samples_of "$kind") || fail "$(label "$kind") at $hz Hz: its samples cannot be read"
    [ "$kind" = none ] || [ "$delivered" -gt 0 ] || fail "$(label "$kind") at $hz Hz delivered no samples"
    echo "$delivered" >> "$work/$kind-$hz.delivered"
    [ "$kind" = none ] && none_seconds=$seconds
    awk -v a="$seconds" -v b="$none_seconds" 'BEGIN { printf "%.4f\n", a / b }' >> "$work/$kind-$hz.ratio"
  done
done

printf 'cpu_bound_workload, %s interleaved rounds, medians (min-max) (this machine: %s cores)\n' \
  "$rounds" "$(nproc)"
printf '%-32s %5s %20s %20s %8s %9s %9s\n' "profiler" "Hz" "wall s" "ratio to none" "samples" \
  "requested" "delivered"
for configuration in "${configurations[@]}"; do
  read -r kind hz <<< "$configuration"
  stem=$work/$kind-$hz
  seconds="$(median < "$stem.seconds") ($(spread < "$stem.seconds"))"
  ratio="$(median < "$stem.ratio") ($(spread < "$stem.ratio"))"
  if [ "$hz" -gt 0 ]; then
    delivered=$(median < "$stem.delivered"); cpu=$(median < "$stem.cpu")
    requested=$(awk -v hz="$hz" -v cpu="$cpu" 'BEGIN { printf "%d", hz * cpu }')
    share=$(awk -v d="$delivered" -v r="$requested" 'BEGIN { printf "%.1f%%", 100 * d / r }')
    printf '%-32s %5s %20s %20s %8s %9s %9s\n' "$(label "$kind")" "$hz" "$seconds" "$ratio" \
      "$delivered" "$requested" "$share"
  else
    printf '%-32s %5s %20s %20s %8s %9s %9s\n' "none" "-" "$seconds" "$ratio" "-" "-" "-"
  fi
done
