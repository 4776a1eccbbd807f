// PAPI costs. CPU counters (PAPI_TOT_INS) when PAPI has them, else the reason they are skipped;
// and, everywhere, PAPI's own overhead on a software-defined event (sde component), with
// papi_vector start+stop against two raw PAPI_read calls on the same event set, side by side.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <kairos/plugins/papi.hpp>
#if KAIROS_BENCH_WITH_SDE
#include <sde_lib.h>

#include "median.hpp"
#endif

namespace {

long long work_items = 0;
constexpr const char* work_items_event = "sde:::kairos_bench::work_items";

[[maybe_unused]] const bool sde_counter_registered = [] {
#if KAIROS_BENCH_WITH_SDE
  papi_handle_t handle = papi_sde_init("kairos_bench");
  papi_sde_register_counter(handle, "work_items", PAPI_SDE_RO | PAPI_SDE_DELTA,
                            PAPI_SDE_long_long, &work_items);
  return true;
#else
  return false;
#endif
}();

void papi_start_stop_tot_ins(benchmark::State& state) {
  if (!kairos::papi_vector::available("PAPI_TOT_INS")) {
    state.SkipWithError(kairos::papi_vector::unavailable_reason("PAPI_TOT_INS").c_str());
    return;
  }
  kairos::papi_vector counters{"PAPI_TOT_INS"};
  for (auto _ : state) {
    counters.start();
    counters.stop();
  }
}
BENCHMARK(papi_start_stop_tot_ins);

void papi_vector_start_stop_sde(benchmark::State& state) {
  kairos::papi_vector counters{work_items_event};
  if (!counters.events()[0].counting) {
    state.SkipWithError(counters.events()[0].unavailable_reason.c_str());
    return;
  }
  for (auto _ : state) {
    counters.start();
    ++work_items;
    counters.stop();
  }
}
BENCHMARK(papi_vector_start_stop_sde);

void papi_array_start_stop_sde(benchmark::State& state) {
  kairos::papi_array<1> counters{work_items_event};
  if (!counters.events()[0].counting) {
    state.SkipWithError(counters.events()[0].unavailable_reason.c_str());
    return;
  }
  for (auto _ : state) {
    counters.start();
    ++work_items;
    counters.stop();
  }
}
BENCHMARK(papi_array_start_stop_sde);

template <class Operation>
double nanoseconds_per_call(Operation operation, int calls) {
  const auto begin = std::chrono::steady_clock::now();
  for (int call = 0; call < calls; ++call) operation();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin)
             .count() /
         calls;
}

using kairos::benchmarks::median;

void print_side_by_side() {
  if (!kairos::papi_vector::available())
    std::printf("PAPI CPU counters skipped: %s\n", kairos::papi_vector::unavailable_reason().c_str());
  kairos::papi_vector counters{work_items_event};
  if (!counters.events()[0].counting) {
    std::printf("PAPI sde comparison skipped: %s\n",
                counters.events()[0].unavailable_reason.c_str());
    return;
  }
  // A raw event set of the same event, on the same thread (a second set of the sde component
  // cannot run at the same time, so the raw set is measured before kairos's set starts).
  int raw_set = PAPI_NULL;
  PAPI_create_eventset(&raw_set);
  PAPI_add_named_event(raw_set, work_items_event);
  PAPI_start(raw_set);
  long long value = 0;
  constexpr int rounds = 21;
  constexpr int calls = 50'000;
  std::vector<double> raw_ns;
  for (int round = 0; round < rounds; ++round)
    raw_ns.push_back(nanoseconds_per_call([&] { PAPI_read(raw_set, &value); }, calls));
  PAPI_stop(raw_set, &value);
  PAPI_cleanup_eventset(raw_set);
  PAPI_destroy_eventset(&raw_set);
  std::vector<double> phase_ns;
  for (int round = 0; round < rounds; ++round)
    phase_ns.push_back(nanoseconds_per_call([&] { counters.start(); counters.stop(); }, calls));
  std::printf("raw PAPI_read, 1 sde event: %.0f ns; papi_vector start+stop: %.0f ns "
              "(medians of %d rounds of %d calls)\n",
              median(raw_ns), median(phase_ns), rounds, calls);
  std::printf("ratio papi_vector start+stop vs two raw PAPI_read: %.2f (medians of %d)\n",
              median(phase_ns) / (2 * median(raw_ns)), rounds);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_side_by_side();
  return 0;
}
