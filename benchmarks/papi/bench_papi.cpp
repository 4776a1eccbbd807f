// PAPI costs. CPU counters (PAPI_TOT_INS) when PAPI has them, else the reason they are skipped;
// and, everywhere, PAPI's own overhead on a software-defined event (sde component), with
// papi_vector start+stop against two raw PAPI_read calls on the same event set, side by side.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <kairos/plugins/papi.hpp>
#if KAIROS_BENCH_WITH_SDE
#include <sde_lib.h>
#endif

#include "median.hpp"
#include "smoke.hpp"

namespace {

long long work_items = 0;
constexpr const char* work_items_event = "sde:::kairos_bench::work_items";

[[maybe_unused]] const bool sde_counter_registered = [] {
#if KAIROS_BENCH_WITH_SDE
  papi_handle_t handle = papi_sde_init("kairos_bench");
  papi_sde_register_counter(handle, "work_items", PAPI_SDE_RO | PAPI_SDE_DELTA, PAPI_SDE_long_long, &work_items);
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
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count() / calls;
}

using kairos::benchmarks::median;

// Rounds alternate between the raw event set and papi_vector so both see the same machine load.
// Each side runs on a thread of its own: PAPI runs one event set per component and thread, and
// papi_vector keeps its thread's set running between phases.
void print_side_by_side() {
  if (!kairos::papi_vector::available())
    std::printf("PAPI CPU counters skipped: %s\n", kairos::papi_vector::unavailable_reason().c_str());
  {
    kairos::papi_vector probe{work_items_event};
    if (!probe.events()[0].counting) {
      std::printf("PAPI sde comparison skipped: %s\n", probe.events()[0].unavailable_reason.c_str());
      return;
    }
  }
  using kairos::benchmarks::smoke_or;
  const int rounds = smoke_or(3, 21);
  const int calls = smoke_or(1'000, 50'000);
  std::vector<double> raw_ns, phase_ns, ratio;
  for (int round = 0; round < rounds; ++round) {
    double raw = 0, phase = 0;
    std::thread{[&] {
      int raw_set = PAPI_NULL;
      long long value = 0;
      PAPI_create_eventset(&raw_set);
      PAPI_add_named_event(raw_set, work_items_event);
      PAPI_start(raw_set);
      raw = nanoseconds_per_call([&] { PAPI_read(raw_set, &value); }, calls);
      PAPI_stop(raw_set, &value);
      PAPI_cleanup_eventset(raw_set);
      PAPI_destroy_eventset(&raw_set);
    }}.join();
    std::thread{[&] {
      kairos::papi_vector counters{work_items_event};
      counters.start();  // the first start creates and starts the thread's set: not timed
      counters.stop();
      phase = nanoseconds_per_call(
          [&] {
            counters.start();
            counters.stop();
          },
          calls);
    }}.join();
    raw_ns.push_back(raw);
    phase_ns.push_back(phase);
    ratio.push_back(phase / (2 * raw));
  }
  const auto spread = [](const std::vector<double>& values) {
    return std::make_pair(*std::min_element(values.begin(), values.end()),
                          *std::max_element(values.begin(), values.end()));
  };
  std::printf(
      "raw PAPI_read, 1 sde event: %.1f ns (%.1f–%.1f); papi_vector start+stop: %.1f ns "
      "(%.1f–%.1f) (medians (min–max) of %d interleaved rounds of %d calls)\n",
      median(raw_ns), spread(raw_ns).first, spread(raw_ns).second, median(phase_ns), spread(phase_ns).first,
      spread(phase_ns).second, rounds, calls);
  std::printf("ratio papi_vector start+stop vs two raw PAPI_read: %.2f (%.2f–%.2f) (median of %d)\n", median(ratio),
              spread(ratio).first, spread(ratio).second, rounds);
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
