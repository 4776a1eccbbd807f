#pragma once
// Benchmarks that prove a speed claim print ratios of medians measured in the same run:
// register pairs (measured, baseline), run with repetitions interleaved, then print one line a pair.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace kairos::benchmarks {

// Keeps the median real time of every benchmark, in nanoseconds whatever its display unit,
// while the console reporter prints as usual.
class median_collector : public ::benchmark::ConsoleReporter {
 public:
  median_collector() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}
  std::map<std::string, double> median_ns;

  static double nanoseconds_per_unit(::benchmark::TimeUnit unit) {
    switch (unit) {
      case ::benchmark::kSecond: return 1e9;
      case ::benchmark::kMillisecond: return 1e6;
      case ::benchmark::kMicrosecond: return 1e3;
      default: return 1.0;
    }
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median")
        median_ns[run.run_name.function_name] =
            run.GetAdjustedRealTime() * nanoseconds_per_unit(run.time_unit);
    ConsoleReporter::ReportRuns(runs);
  }
};

struct ratio_claim {
  std::string measured;
  std::string baseline;
  double limit;  // the ratio the project promises to stay under
};

// Runs every registered benchmark (repetitions and interleaving unless the command line says
// otherwise) and prints "ratio" lines; returns 0 even when a claim is missed: a claim is data.
inline int run_and_print_ratios(int argc, char** argv, const std::vector<ratio_claim>& claims) {
  std::vector<char*> arguments(argv, argv + argc);
  std::string repetitions = "--benchmark_repetitions=15";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::string aggregates = "--benchmark_report_aggregates_only=true";
  std::string min_time = "--benchmark_min_time=0.05";
  for (auto* option : {&repetitions, &interleave, &aggregates, &min_time})
    arguments.insert(arguments.begin() + 1, option->data());
  int count = static_cast<int>(arguments.size());
  ::benchmark::Initialize(&count, arguments.data());
  median_collector reporter;
  ::benchmark::RunSpecifiedBenchmarks(&reporter);
  ::benchmark::Shutdown();

  fmt::print("\n{:<44} {:>10} {:>10} {:>8} {:>8}\n", "ratio (median of repetitions)", "ns",
             "base ns", "ratio", "limit");
  for (const auto& claim : claims) {
    const auto measured = reporter.median_ns.find(claim.measured);
    const auto baseline = reporter.median_ns.find(claim.baseline);
    if (measured == reporter.median_ns.end() || baseline == reporter.median_ns.end()) continue;
    const double ratio = measured->second / baseline->second;
    fmt::print("{:<44} {:>10.2f} {:>10.2f} {:>8.3f} {:>8.2f} {}\n",
               claim.measured + " / " + claim.baseline, measured->second, baseline->second, ratio,
               claim.limit, ratio <= claim.limit ? "ok" : "OVER");
  }
  return 0;
}

}  // namespace kairos::benchmarks
