#pragma once
// The hand-written code kairos's benchmarks compare against, defined once.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

namespace kairos::benchmarks {

// Two steady_clock reads and their difference accumulated: what a wall_clock region replaces.
inline void raw_steady_clock_pair(benchmark::State& state) {
  std::int64_t total_ns = 0;
  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    const auto end = std::chrono::steady_clock::now();
    total_ns += (end - begin).count();
    benchmark::DoNotOptimize(total_ns);
  }
}

}  // namespace kairos::benchmarks
