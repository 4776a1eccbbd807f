#!/usr/bin/env bash
# Compile time and peak compiler memory of the core's headers: the first cost of a header-only
# library. Compiles three translation units (the floor: <chrono> and <string>; one bundle from
# <kairos/component_tuple.hpp>; the umbrella <kairos/kairos.hpp>) RUNS times each and prints the
# median wall time and the median peak resident memory of the compiler.
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

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-34s %12s %16s\n' "translation unit ($compiler -std=c++20 -O2)" "median s" "median peak MB"
for unit in floor bundle umbrella; do
  : > "$work/seconds" ; : > "$work/megabytes"
  for _ in $(seq "$runs"); do
    /usr/bin/time -f '%e %M' -o "$work/measure" \
      "$compiler" -std=c++20 -O2 -I"$root/include" -c "$work/$unit.cpp" -o "$work/$unit.o"
    read -r seconds kilobytes < "$work/measure"
    echo "$seconds" >> "$work/seconds"
    echo $((kilobytes / 1024)) >> "$work/megabytes"
  done
  printf '%-34s %12s %16s\n' "$unit" "$(median < "$work/seconds")" "$(median < "$work/megabytes")"
done
