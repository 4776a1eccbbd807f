// The core's cost against hand-written code: a bundle must cost what the code it replaces costs.
#include <sys/resource.h>

#include <chrono>

#include <kairos/component_tuple.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/system_clock.hpp>
#include <kairos/components/user_clock.hpp>
#include <kairos/components/wall_clock.hpp>

#include "baselines.hpp"
#include "ratio_report.hpp"

namespace {

using kairos::benchmarks::raw_steady_clock_pair;
BENCHMARK(raw_steady_clock_pair);

void component_tuple_wall_clock(benchmark::State& state) {
  kairos::component_tuple<kairos::wall_clock> bundle{"bench"};
  for (auto _ : state) {
    bundle.start();
    bundle.stop();
    benchmark::DoNotOptimize(bundle);
  }
}
BENCHMARK(component_tuple_wall_clock);

void raw_getrusage_pair(benchmark::State& state) {
  std::int64_t user_us = 0, system_us = 0, peak_kib = 0;
  for (auto _ : state) {
    rusage begin{}, end{};
    getrusage(RUSAGE_SELF, &begin);
    getrusage(RUSAGE_SELF, &end);
    user_us +=
        (end.ru_utime.tv_sec - begin.ru_utime.tv_sec) * 1'000'000 + (end.ru_utime.tv_usec - begin.ru_utime.tv_usec);
    system_us +=
        (end.ru_stime.tv_sec - begin.ru_stime.tv_sec) * 1'000'000 + (end.ru_stime.tv_usec - begin.ru_stime.tv_usec);
    peak_kib += end.ru_maxrss - begin.ru_maxrss;
    benchmark::DoNotOptimize(user_us);
    benchmark::DoNotOptimize(system_us);
    benchmark::DoNotOptimize(peak_kib);
  }
}
BENCHMARK(raw_getrusage_pair);

void component_tuple_three_rusage(benchmark::State& state) {
  kairos::component_tuple<kairos::user_clock, kairos::system_clock, kairos::peak_rss> bundle{"bench"};
  for (auto _ : state) {
    bundle.start();
    bundle.stop();
    benchmark::DoNotOptimize(bundle);
  }
}
BENCHMARK(component_tuple_three_rusage);

}  // namespace

int main(int argc, char** argv) {
  return kairos::benchmarks::run_and_print_ratios(argc, argv,
                                                  {{"component_tuple_wall_clock", "raw_steady_clock_pair", 1.05},
                                                   {"component_tuple_three_rusage", "raw_getrusage_pair", 1.10}});
}
