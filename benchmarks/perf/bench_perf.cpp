// perf_counters costs: a group read of 4 software events against a raw read() of the same fd, and
// a start+stop phase. Ends with ratios measured side by side (interleaved rounds, median).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <kairos/plugins/perf.hpp>

#include "median.hpp"

namespace {

std::vector<int> event_indices(std::initializer_list<std::string_view> names) {
  std::vector<int> indices;
  for (auto name : names) indices.push_back(kairos::perf::find_event(name));
  return indices;
}

const std::vector<int>& four_software_events() {
  static const auto indices = event_indices({"task-clock", "context-switches", "page-faults", "cpu-migrations"});
  return indices;
}

void group_read_4_software(benchmark::State& state) {
  auto& set = kairos::perf::event_set_for_this_thread(four_software_events());
  kairos::perf::event_snapshot snapshot;
  for (auto _ : state) {
    set.read(snapshot);
    benchmark::DoNotOptimize(snapshot);
  }
}
BENCHMARK(group_read_4_software);

void raw_read_same_fd(benchmark::State& state) {
  auto& set = kairos::perf::event_set_for_this_thread(four_software_events());
  std::array<std::uint64_t, 3 + 4> buffer;
  for (auto _ : state) {
    benchmark::DoNotOptimize(::read(set.leader_fd(0), buffer.data(), sizeof(buffer)));
  }
}
BENCHMARK(raw_read_same_fd);

void start_stop_4_software(benchmark::State& state) {
  kairos::perf_counters counters{"task-clock", "context-switches", "page-faults", "cpu-migrations"};
  for (auto _ : state) {
    counters.start();
    counters.stop();
  }
  benchmark::DoNotOptimize(counters.get());
}
BENCHMARK(start_stop_4_software);

// Hardware counters read through the hypervisor in a VM: this shows that cost against software.
void group_read_2_hardware(benchmark::State& state) {
  if (!kairos::perf_counters::available("instructions")) {
    state.SkipWithError(kairos::perf_counters::unavailable_reason("instructions").c_str());
    return;
  }
  static const auto indices = event_indices({"instructions", "cycles"});
  auto& set = kairos::perf::event_set_for_this_thread(indices);
  set.begin_phase();
  kairos::perf::event_snapshot snapshot;
  for (auto _ : state) {
    set.read(snapshot);
    benchmark::DoNotOptimize(snapshot);
  }
  set.end_phase();
}
BENCHMARK(group_read_2_hardware);

// Repeated phases on one set: hardware groups stay enabled, so no ioctl, but two hardware reads.
void start_stop_2_hardware_2_software(benchmark::State& state) {
  if (!kairos::perf_counters::available("instructions")) {
    state.SkipWithError(kairos::perf_counters::unavailable_reason("instructions").c_str());
    return;
  }
  kairos::perf_counters counters{"instructions", "cycles", "task-clock", "page-faults"};
  for (auto _ : state) {
    counters.start();
    counters.stop();
  }
  benchmark::DoNotOptimize(counters.get());
}
BENCHMARK(start_stop_2_hardware_2_software);

template <class Operation>
double nanoseconds_per_call(Operation operation, int calls) {
  const auto begin = std::chrono::steady_clock::now();
  for (int call = 0; call < calls; ++call) operation();
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  return std::chrono::duration<double, std::nano>(elapsed).count() / calls;
}

using kairos::benchmarks::median;

// Rounds alternate between the two operations so both see the same machine load.
void print_side_by_side_ratios() {
  constexpr int rounds = 21;
  constexpr int calls = 20'000;
  auto& set = kairos::perf::event_set_for_this_thread(four_software_events());
  kairos::perf::event_snapshot snapshot;
  std::array<std::uint64_t, 3 + 4> buffer;
  kairos::perf_counters counters{"task-clock", "context-switches", "page-faults", "cpu-migrations"};
  std::vector<double> group_ns, raw_ns, start_stop_ns, read_ratio, start_stop_ratio;
  for (int round = 0; round < rounds; ++round) {
    const double group = nanoseconds_per_call([&] { set.read(snapshot); }, calls);
    const double raw = nanoseconds_per_call(
        [&] { benchmark::DoNotOptimize(::read(set.leader_fd(0), buffer.data(), sizeof(buffer))); }, calls);
    const double phase = nanoseconds_per_call(
        [&] {
          counters.start();
          counters.stop();
        },
        calls);
    group_ns.push_back(group);
    raw_ns.push_back(raw);
    start_stop_ns.push_back(phase);
    read_ratio.push_back(group / raw);
    start_stop_ratio.push_back(phase / raw);
  }
  std::printf(
      "perf group read, 4 software events: %.0f ns; raw read() of the same fd: %.0f ns; "
      "start+stop: %.0f ns (medians of %d rounds of %d calls)\n",
      median(group_ns), median(raw_ns), median(start_stop_ns), rounds, calls);
  std::printf("ratio perf group read vs raw read() on the same fd: %.2f (median of %d)\n", median(read_ratio), rounds);
  std::printf("ratio perf_counters start+stop vs one raw read(): %.2f (median of %d)\n", median(start_stop_ratio),
              rounds);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_side_by_side_ratios();
  return 0;
}
