// Sampling costs, whole processes measured side by side in one run (median of N alternating runs):
//   overhead   the CPU-bound 2-thread program (tests/sampled_program.cpp `split`) plain, under
//              kairos-run at the default 300 Hz and at 1 kHz: wall-time ratio, and samples
//              delivered vs requested (frequency × the program's CPU time);
//   ingest     samples written into the database per second of wall time at 20 kHz × 2 threads
//              (the rate the program produced them: every sample delivered was ingested);
//   peak RSS   the largest sample count that fits in about a minute (20 kHz × 2 threads × 25 s
//              ≈ 1 million samples), RSS after 5 s vs after 25 s: bounded if equal.
// Usage: bench_sampling [runs, default 5]
#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "median.hpp"

extern char** environ;

namespace {

struct run_result {
  double wall_s = 0;
  long max_rss_kb = 0;
};

run_result run(std::vector<std::string> command, const std::vector<std::string>& extra_environment) {
  std::vector<std::string> environment_text;
  for (char** entry = environ; *entry; ++entry)
    if (std::string_view{*entry}.substr(0, 7) != "KAIROS_") environment_text.emplace_back(*entry);
  environment_text.insert(environment_text.end(), extra_environment.begin(), extra_environment.end());
  std::vector<char*> argv, envp;
  for (auto& word : command) argv.push_back(word.data());
  argv.push_back(nullptr);
  for (auto& word : environment_text) envp.push_back(word.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) std::exit(1);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  posix_spawn_file_actions_destroy(&actions);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), usage.ru_maxrss};
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
  return value;
}

using kairos::benchmarks::median;

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string program = KAIROS_SAMPLED_PROGRAM_PATH, kairos_run = KAIROS_RUN_PATH;
  const auto directory = std::filesystem::temp_directory_path() / ("kairos-bench-sampling-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  const double cpu_seconds = 2.0;  // the program's total CPU time (1.5 s + 0.5 s on two threads)

  std::vector<double> plain, at_default, at_1khz;
  std::vector<double> delivered_default, delivered_1khz;
  for (int i = 0; i < runs; ++i) {
    plain.push_back(run({program, "split", "2"}, {}).wall_s);
    for (int frequency : {300, 1000}) {
      const auto stem = (directory / ("run-" + std::to_string(frequency) + "-" + std::to_string(i))).string();
      const auto result = run({kairos_run, "--freq", std::to_string(frequency), "-o", stem, "--formats", "db", "--",
                               program, "split", "2"},
                              {"KAIROS_SAMPLING_DELAY=0"});
      const auto samples = query(stem + ".db", "SELECT COUNT(*) FROM sample");
      const auto weight_ns = query(stem + ".db", "SELECT SUM(weight_ns) FROM sample");
      const double requested = frequency * (weight_ns / 1e9);
      (frequency == 300 ? at_default : at_1khz).push_back(result.wall_s);
      (frequency == 300 ? delivered_default : delivered_1khz).push_back(samples / requested);
    }
  }
  std::printf("CPU-bound 2-thread program (%.1f s of CPU), median of %d alternating runs\n", cpu_seconds, runs);
  std::printf("  plain             %.3f s\n", median(plain));
  std::printf("  kairos 300 Hz     %.3f s   ratio %.3f vs plain   samples delivered/requested %.3f\n",
              median(at_default), median(at_default) / median(plain), median(delivered_default));
  std::printf("  kairos 1 kHz      %.3f s   ratio %.3f vs plain   samples delivered/requested %.3f\n",
              median(at_1khz), median(at_1khz) / median(plain), median(delivered_1khz));

  // Ingest and memory: a long run at 20 kHz per thread, short vs long, same settings.
  for (double seconds : {5.0, 25.0}) {
    const auto stem = (directory / ("long-" + std::to_string(static_cast<int>(seconds)))).string();
    const auto result = run({kairos_run, "--freq", "20000", "-o", stem, "--formats", "db", "--", program, "split",
                             std::to_string(seconds)},
                            {"KAIROS_SAMPLING_DELAY=0"});
    const auto samples = query(stem + ".db", "SELECT COUNT(*) FROM sample");
    const auto bytes = std::filesystem::file_size(stem + ".db");
    std::printf("  %2.0f s of CPU at 20 kHz: %lld samples, peak RSS %ld KB, database %.1f MB (%.1f MB per million "
                "samples), %.0f samples/s produced and ingested\n",
                seconds, samples, result.max_rss_kb, bytes / 1e6, bytes / 1e6 / (samples / 1e6),
                samples / result.wall_s);
  }
  std::filesystem::remove_all(directory);
  return 0;
}
