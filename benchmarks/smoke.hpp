#pragma once
// KAIROS_BENCHMARK_SMOKE=1 (the "benchmark smoke" ctest entries): every benchmark runs briefly,
// enough to show that it works and that each of its ratios prints, in seconds.
#include <cstdlib>

namespace kairos::benchmarks {

inline bool smoke_run() { return std::getenv("KAIROS_BENCHMARK_SMOKE") != nullptr; }
// For benchmarks that fix their own counts: `full` normally, `smoke` in a smoke run.
inline int smoke_or(int smoke, int full) { return smoke_run() ? smoke : full; }

}  // namespace kairos::benchmarks
