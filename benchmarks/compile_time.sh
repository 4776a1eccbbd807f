#!/usr/bin/env bash
# Compile time and peak compiler memory of the core's headers: the first cost of a header-only
# library. Four translation units: the floor (<chrono> and <string>); one bundle from
# <kairos/component_tuple.hpp>; the umbrella <kairos/kairos.hpp>; the umbrella and
# <kairos/report_json.hpp> (what JSON adds). RUNS rounds, each compiling the four once, in that
# order, so that a change in the machine's load reaches every unit alike. Prints, per unit, the
# median wall time and peak resident memory of the compiler, and the ratio to the floor: the median
# of the rounds' ratios (each round's time over that round's floor). The spread (min-max) of the
# rounds follows each figure; the load average before and after says how quiet the machine was.
# Usage: benchmarks/compile_time.sh [compiler (default c++)] [runs (default 5)]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh" "$root/benchmarks/debian-packages.txt"  # /usr/bin/time
compiler=${1:-c++}
runs=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/floor.cpp" <<'CPP'
#include <chrono>
#include <string>
int main() { return static_cast<int>(std::string{"x"}.size() + std::chrono::steady_clock::now().time_since_epoch().count() % 2); }
CPP
cat > "$work/bundle.cpp" <<'CPP'
#include <kairos/component_tuple.hpp>
#include <kairos/components/cpu_clock.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/page_faults.hpp>
#include <kairos/components/user_clock.hpp>
#include <kairos/components/wall_clock.hpp>
int main() {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::user_clock,
                          kairos::peak_rss, kairos::page_faults> bundle{"main"};
  bundle.start();
  bundle.stop();
  return static_cast<int>(bundle.laps()) - 1;
}
CPP
cat > "$work/umbrella.cpp" <<'CPP'
#include <kairos/kairos.hpp>
int main() {
  kairos::component_list<kairos::wall_clock, kairos::cpu_clock, kairos::user_clock,
                         kairos::peak_rss, kairos::page_faults> bundle{"main"};
  bundle.start();
  bundle.stop();
  return kairos::describe<decltype(bundle)>().table().empty() ? 1 : 0;
}
CPP
{
  echo '#include <kairos/report_json.hpp>'
  cat "$work/umbrella.cpp"
} > "$work/umbrella_json.cpp"

units=(floor bundle umbrella umbrella_json)
declare -A description=(
  [floor]="floor: <chrono> + <string>"
  [bundle]="bundle: component_tuple.hpp + 5 components"
  [umbrella]="umbrella: kairos.hpp"
  [umbrella_json]="umbrella + report_json.hpp"
)

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$work/measures"  # one line per compile: unit round seconds kilobytes
for round in $(seq "$runs"); do
  for unit in "${units[@]}"; do
    begin=$EPOCHREALTIME
    /usr/bin/time -f '%M' -o "$work/memory" \
      "$compiler" -std=c++20 -O2 -I"$root/include" -c "$work/$unit.cpp" -o "$work/$unit.o"
    end=$EPOCHREALTIME
    seconds=$(awk -v begin="$begin" -v end="$end" 'BEGIN { printf "%.3f", end - begin }')
    echo "$unit $round $seconds $(cat "$work/memory")" >> "$work/measures"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "$("$compiler" --version | head -n 1); -std=c++20 -O2; $runs rounds"
echo "load average (1, 5, 15 min): $load_before before, $load_after after"
printf '%-44s %-20s %-22s %-18s %s\n' "translation unit" "wall s (min-max)" \
  "wall x floor (min-max)" "peak MB (min-max)" "MB x floor"
for unit in "${units[@]}"; do
  awk -v unit="$unit" -v label="${description[$unit]}" '
    # The median of values[1..count]; sets range_low and range_high to the least and the greatest.
    function median(values, count,   sorted, i, j, swap) {
      for (i = 1; i <= count; ++i) sorted[i] = values[i]
      for (i = 2; i <= count; ++i)  # insertion sort: a handful of values
        for (j = i; j > 1 && sorted[j - 1] > sorted[j]; --j) {
          swap = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = swap
        }
      range_low = sorted[1]; range_high = sorted[count]
      return count % 2 ? sorted[(count + 1) / 2] : (sorted[count / 2] + sorted[count / 2 + 1]) / 2
    }
    $1 == "floor" { floor_seconds[$2] = $3; floor_megabytes[$2] = $4 / 1024 }
    $1 == unit { seconds[$2] = $3; megabytes[$2] = $4 / 1024; rounds = $2 }
    END {
      for (r = 1; r <= rounds; ++r) ratio[r] = seconds[r] / floor_seconds[r]
      middle = median(seconds, rounds)
      time = sprintf("%.2f (%.2f-%.2f)", middle, range_low, range_high)
      middle = median(ratio, rounds)
      time_ratio = sprintf("%.2f (%.2f-%.2f)", middle, range_low, range_high)
      memory_median = median(megabytes, rounds)
      memory = sprintf("%.0f (%.0f-%.0f)", memory_median, range_low, range_high)
      printf "%-44s %-20s %-22s %-18s %.2f\n", label, time, time_ratio, memory,
             memory_median / median(floor_megabytes, rounds)
    }' "$work/measures"
done
