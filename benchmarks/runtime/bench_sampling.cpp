// Sampling costs, whole processes measured side by side in one run (medians of N rounds, each
// round running every configuration once, with the spread min–max):
//   overhead   the CPU-bound 2-thread program (tests/sampled_program.cpp `split`) plain, under
//              kairos-run at the default 300 Hz and at 1 kHz: wall-time ratio, samples delivered
//              vs requested (frequency × the CPU time the program itself measured and printed),
//              and the samples' weights vs that CPU time;
//   ingest     samples written into the database per second of wall time at 20 kHz × 2 threads
//              (the rate the program produced them: every sample delivered was ingested);
//   peak RSS   the largest sample count that fits in about a minute (20 kHz × 2 threads × 25 s
//              ≈ 1 million samples), RSS after 5 s vs after 25 s: bounded if equal.
// Usage: bench_sampling [runs, default 5]. KAIROS_BENCHMARK_SMOKE=1: one short round, no long run.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "median.hpp"
#include "process_runner.hpp"
#include "smoke.hpp"

extern char** environ;

namespace {

struct run_result {
  double wall_s = 0;
  long max_rss_kb = 0;
  double program_cpu_s = 0;  // what the program printed: its threads' CPU time
};

// Runs `command` with its stdout in `output` (the program's own CPU time is read from it); exits
// the benchmark if the process fails: a failed run must not count as a fast one.
run_result run(std::vector<std::string> command, const std::vector<std::string>& extra_environment,
               const std::string& output) {
  const auto process = kairos::benchmarks::run_process(command, extra_environment, {}, output);
  long long three_quarters = 0, one_quarter = 0;
  FILE* printed = std::fopen(output.c_str(), "r");
  const bool read = printed && std::fscanf(printed, "cpu_ns three_quarters=%lld one_quarter=%lld", &three_quarters,
                                           &one_quarter) == 2;
  if (printed) std::fclose(printed);
  if (!read) {
    std::fprintf(stderr, "bench_sampling: %s printed no CPU times\n", command.front().c_str());
    std::exit(1);
  }
  return {process.wall_s, process.max_rss_kb, static_cast<double>(three_quarters + one_quarter) / 1e9};
}

// "median (min–max)" of a series.
std::string with_spread(const std::vector<double>& values, const char* format) {
  char median_text[32], low[32], high[32];
  std::snprintf(median_text, sizeof median_text, format, kairos::benchmarks::median(values));
  std::snprintf(low, sizeof low, format, *std::min_element(values.begin(), values.end()));
  std::snprintf(high, sizeof high, format, *std::max_element(values.begin(), values.end()));
  return std::string{median_text} + " (" + low + "–" + high + ")";
}

long long query(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  long long value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK && sqlite3_step(statement) == SQLITE_ROW)
      value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  if (value <= 0) {
    std::fprintf(stderr, "bench_sampling: %s: no samples (%s)\n", path.c_str(), sql);
    std::exit(1);
  }
  return value;
}

using kairos::benchmarks::median;

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = kairos::benchmarks::smoke_run();
  const int runs = smoke ? 1 : argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string split_seconds = smoke ? "0.3" : "2";
  const std::string program = KAIROS_SAMPLED_PROGRAM_PATH, kairos_run = KAIROS_RUN_PATH;
  const auto directory = std::filesystem::temp_directory_path() / ("kairos-bench-sampling-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  const std::string output = (directory / "stdout").string();

  std::vector<double> plain, at_default, at_1khz, ratio_default, ratio_1khz, cpu;
  std::vector<double> delivered_default, delivered_1khz, weighed_default, weighed_1khz;
  for (int i = 0; i < runs; ++i) {
    const auto plain_run = run({program, "split", split_seconds}, {}, output);
    plain.push_back(plain_run.wall_s);
    cpu.push_back(plain_run.program_cpu_s);
    for (int frequency : {300, 1000}) {
      const auto stem = (directory / ("run-" + std::to_string(frequency) + "-" + std::to_string(i))).string();
      const auto result = run({kairos_run, "--freq", std::to_string(frequency), "-o", stem, "--formats", "db", "--",
                               program, "split", split_seconds},
                              {"KAIROS_SAMPLING_DELAY=0"}, output);
      const auto samples = query(stem + ".db", "SELECT COUNT(*) FROM sample");
      const auto weight_ns = query(stem + ".db", "SELECT SUM(weight_ns) FROM sample");
      // Independent truth: the CPU time the program measured itself, not the samples' weights.
      const double requested = frequency * result.program_cpu_s;
      const bool is_default = frequency == 300;
      (is_default ? at_default : at_1khz).push_back(result.wall_s);
      (is_default ? ratio_default : ratio_1khz).push_back(result.wall_s / plain_run.wall_s);
      (is_default ? delivered_default : delivered_1khz).push_back(samples / requested);
      (is_default ? weighed_default : weighed_1khz).push_back(weight_ns / 1e9 / result.program_cpu_s);
    }
  }
  std::printf(
      "CPU-bound 2-thread program (%s s of CPU), medians (min–max) of %d rounds, each round "
      "plain, 300 Hz, 1 kHz\n",
      with_spread(cpu, "%.3f").c_str(), runs);
  std::printf("  plain             %s s\n", with_spread(plain, "%.3f").c_str());
  std::printf(
      "  kairos 300 Hz     %s s   ratio to plain in the same round %s\n"
      "                    samples delivered/requested %s   weights/CPU time %s\n",
      with_spread(at_default, "%.3f").c_str(), with_spread(ratio_default, "%.3f").c_str(),
      with_spread(delivered_default, "%.3f").c_str(), with_spread(weighed_default, "%.3f").c_str());
  std::printf(
      "  kairos 1 kHz      %s s   ratio to plain in the same round %s\n"
      "                    samples delivered/requested %s   weights/CPU time %s\n",
      with_spread(at_1khz, "%.3f").c_str(), with_spread(ratio_1khz, "%.3f").c_str(),
      with_spread(delivered_1khz, "%.3f").c_str(), with_spread(weighed_1khz, "%.3f").c_str());

  // Ingest and memory: a long run at 20 kHz per thread, short vs long, same settings.
  for (double seconds : {5.0, 25.0}) {
    if (smoke) break;
    const auto stem = (directory / ("long-" + std::to_string(static_cast<int>(seconds)))).string();
    const auto result = run(
        {kairos_run, "--freq", "20000", "-o", stem, "--formats", "db", "--", program, "split", std::to_string(seconds)},
        {"KAIROS_SAMPLING_DELAY=0"}, output);
    const auto samples = query(stem + ".db", "SELECT COUNT(*) FROM sample");
    const auto bytes = std::filesystem::file_size(stem + ".db");
    std::printf(
        "  %2.0f s of CPU at 20 kHz: %lld samples, peak RSS %ld KB, database %.1f MB (%.1f MB per million "
        "samples), %.0f samples/s produced and ingested\n",
        seconds, samples, result.max_rss_kb, bytes / 1e6, bytes / 1e6 / (samples / 1e6), samples / result.wall_s);
  }
  std::filesystem::remove_all(directory);
  return 0;
}
