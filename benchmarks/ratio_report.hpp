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

#include "smoke.hpp"

namespace kairos::benchmarks {

// Keeps the median real time of every benchmark, in nanoseconds whatever its display unit, and
// the spread of its repetitions (coefficient of variation), while the console reporter prints as
// usual.
class median_collector : public ::benchmark::ConsoleReporter {
 public:
  median_collector() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}
  std::map<std::string, double> median_ns;
  std::map<std::string, double> spread;  // standard deviation / mean of the repetitions

  static double nanoseconds_per_unit(::benchmark::TimeUnit unit) {
    switch (unit) {
      case ::benchmark::kSecond:
        return 1e9;
      case ::benchmark::kMillisecond:
        return 1e6;
      case ::benchmark::kMicrosecond:
        return 1e3;
      default:
        return 1.0;
    }
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Aggregate) continue;
      if (run.aggregate_name == "median")
        median_ns[run.run_name.function_name] = run.GetAdjustedRealTime() * nanoseconds_per_unit(run.time_unit);
      else if (run.aggregate_name == "cv")
        spread[run.run_name.function_name] = run.real_accumulated_time;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

struct ratio_claim {
  std::string measured;
  std::string baseline;
  double limit;  // the ratio the project promises to stay under
};

// Prints one "ratio" line a claim: both medians with their spread (cv), the ratio and the limit.
// Returns false if a claim could not be computed (a benchmark skipped, failed or misnamed): that
// prints MISSING and fails the program, since a broken benchmark must not pass for a fast one.
// A claim over its limit is data, not a failure.
inline bool print_ratios(const median_collector& reporter, const std::vector<ratio_claim>& claims) {
  fmt::print("\n{:<52} {:>10} {:>6} {:>10} {:>6} {:>8} {:>8}\n", "ratio (median of repetitions)", "ns", "cv", "base ns",
             "cv", "ratio", "limit");
  bool all_printed = true;
  for (const auto& claim : claims) {
    const auto measured = reporter.median_ns.find(claim.measured);
    const auto baseline = reporter.median_ns.find(claim.baseline);
    const std::string name = claim.measured + " / " + claim.baseline;
    if (measured == reporter.median_ns.end() || baseline == reporter.median_ns.end() || !(baseline->second > 0)) {
      fmt::print("{:<52} MISSING: a side did not run (skipped or failed, see above)\n", name);
      all_printed = false;
      continue;
    }
    auto spread_of = [&](const std::string& benchmark) {
      const auto found = reporter.spread.find(benchmark);
      return found == reporter.spread.end() ? 0.0 : found->second * 100.0;
    };
    const double ratio = measured->second / baseline->second;
    fmt::print("{:<52} {:>10.2f} {:>5.1f}% {:>10.2f} {:>5.1f}% {:>8.3f} {:>8.2f} {}\n", name, measured->second,
               spread_of(claim.measured), baseline->second, spread_of(claim.baseline), ratio, claim.limit,
               ratio <= claim.limit ? "ok" : "OVER");
  }
  return all_printed;
}

// Runs every registered benchmark, repetitions of all of them interleaved at random (unless the
// command line says otherwise), and prints the claims' ratios; returns the program's exit status.
inline int run_and_print_ratios(int argc, char** argv, const std::vector<ratio_claim>& claims) {
  std::vector<char*> arguments(argv, argv + argc);
  std::vector<std::string> options = {"--benchmark_repetitions=15", "--benchmark_enable_random_interleaving=true",
                                      "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.05"};
  for (auto& option : options) arguments.insert(arguments.begin() + 1, option.data());
  // Smoke: appended last, so they win over the defaults and the command line.
  std::vector<std::string> smoke = {"--benchmark_repetitions=3", "--benchmark_min_time=0.001"};
  if (smoke_run())
    for (auto& option : smoke) arguments.push_back(option.data());
  int count = static_cast<int>(arguments.size());
  ::benchmark::Initialize(&count, arguments.data());
  if (::benchmark::ReportUnrecognizedArguments(count, arguments.data())) return 2;
  median_collector reporter;
  ::benchmark::RunSpecifiedBenchmarks(&reporter);
  ::benchmark::Shutdown();
  return print_ratios(reporter, claims) ? 0 : 1;
}

}  // namespace kairos::benchmarks
