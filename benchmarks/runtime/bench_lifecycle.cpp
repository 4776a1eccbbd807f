// What kairos costs a process for being there at all, whole processes side by side in one run,
// the configurations interleaved round by round (median [lowest–highest] of the rounds):
//   start-up   /bin/true bare, under kairos-run with KAIROS_ENABLED=false (the floor: kairos-run's
//              exec and the loader mapping libkairos.so), and under kairos-run at default
//              settings: milliseconds added per run (each round times `startup_runs` runs);
//   churn      100,000 short threads, 8 alive at a time (the tests' sampled program, `churn`),
//              bare and under kairos-run with sampling from the start: the wall-time ratio;
//              while both run, /proc/<pid>/task is polled every 2 ms for kairos's own threads
//              and the program's live ones (the bound: kairos's ≤ 2 + ⌈live / 8⌉), and
//              afterwards the database must list every thread.
// Usage: bench_lifecycle [rounds, default 7] [threads, default 100000]
#include <dirent.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "median.hpp"
#include "process_runner.hpp"

namespace {

using namespace kairos::benchmarks;

constexpr int startup_runs = 20;

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

struct thread_census {
  int most_kairos = 0;      // kairos's own threads at once
  int most_over_bound = 0;  // kairos's threads beyond 2 + ⌈live/8⌉, at worst
  int polls_over_bound = 0;
  int polls = 0;
};

// One look at /proc/<pid>/task: kairos's threads are named "kairos-*".
void count_threads(pid_t pid, thread_census& census) {
  const auto directory = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(directory.c_str());
  if (!tasks) return;
  int kairos = 0, program = 0;
  while (auto* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm{directory + "/" + entry->d_name + "/comm"};
    std::string name;
    std::getline(comm, name);
    (name.starts_with("kairos-") ? kairos : program) += 1;
  }
  closedir(tasks);
  ++census.polls;
  census.most_kairos = std::max(census.most_kairos, kairos);
  const int bound = 2 + (program + 7) / 8;
  census.most_over_bound = std::max(census.most_over_bound, kairos - bound);
  census.polls_over_bound += kairos > bound;
  std::this_thread::sleep_for(std::chrono::milliseconds{2});
}

void print(const char* name, const spread& value, const char* unit, double scale) {
  std::printf("  %-44s %9.3f %s [%.3f–%.3f]\n", name, value.median * scale, unit, value.lowest * scale,
              value.highest * scale);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const long churn_threads = argc > 2 ? std::atol(argv[2]) : 100000;
  const std::string program = KAIROS_SAMPLED_PROGRAM_PATH, kairos_run = KAIROS_RUN_PATH;
  const auto directory =
      std::filesystem::temp_directory_path() / ("kairos-bench-lifecycle-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  const std::string output = "KAIROS_OUTPUT_PATH=" + (directory / "out-%pid%").string();

  std::vector<double> true_bare, true_floor, true_kairos, churn_bare, churn_kairos, added, added_over_floor;
  thread_census census;
  long long threads_missing = 0;
  for (int round = 0; round < rounds; ++round) {
    double bare = 0, floor = 0, profiled = 0;
    for (int i = 0; i < startup_runs; ++i) {
      bare += run_process({"/bin/true"}).wall_s;
      floor += run_process({kairos_run, "--", "/bin/true"}, {"KAIROS_ENABLED=false"}).wall_s;
      profiled += run_process({kairos_run, "--", "/bin/true"}, {output}).wall_s;
    }
    true_bare.push_back(bare / startup_runs);
    true_floor.push_back(floor / startup_runs);
    true_kairos.push_back(profiled / startup_runs);
    added.push_back((profiled - bare) / startup_runs);
    added_over_floor.push_back((profiled - floor) / startup_runs);

    const auto count = std::to_string(churn_threads);
    // Both sides are polled alike, so the poll's own cost falls on both.
    thread_census bare_census;
    churn_bare.push_back(
        run_process({program, "churn", count, "8"}, {}, [&](pid_t pid) { count_threads(pid, bare_census); }).wall_s);
    const auto stem = (directory / ("churn-" + std::to_string(round))).string();
    churn_kairos.push_back(run_process({kairos_run, "-o", stem, "--formats", "db", "--", program, "churn", count, "8"},
                                       {"KAIROS_SAMPLING_DELAY=0"}, [&](pid_t pid) { count_threads(pid, census); })
                               .wall_s);
    threads_missing += churn_threads + 1 - query(stem + ".db", "SELECT COUNT(*) FROM thread");
    std::filesystem::remove(stem + ".db");
  }
  std::printf("kairos-run's cost for being there: medians of %d interleaved rounds [lowest–highest]\n", rounds);
  std::printf("start-up (/bin/true, each round the mean of %d runs)\n", startup_runs);
  print("bare", spread_of(true_bare), "ms", 1e3);
  print("kairos-run, KAIROS_ENABLED=false (floor)", spread_of(true_floor), "ms", 1e3);
  print("kairos-run, default settings", spread_of(true_kairos), "ms", 1e3);
  print("added by kairos-run (goal <= 5 ms)", spread_of(added), "ms", 1e3);
  print("added over the floor", spread_of(added_over_floor), "ms", 1e3);
  std::printf("thread churn (%ld threads, 8 alive at a time)\n", churn_threads);
  print("bare", spread_of(churn_bare), "s ", 1);
  print("kairos-run, sampling from the start", spread_of(churn_kairos), "s ", 1);
  std::printf("  %-44s %9.3f (goal <= 1.5)\n", "ratio of medians", median(churn_kairos) / median(churn_bare));
  // A writer retires within a pass of its last thread's end, so a poll can catch the moment
  // between a thread's end and its writer's retirement: how often is printed, not hidden.
  std::printf(
      "  kairos's own threads at most %d; over the bound 2 + ceil(live/8) by at most %d, in %d of "
      "%d polls\n",
      census.most_kairos, std::max(census.most_over_bound, 0), census.polls_over_bound, census.polls);
  std::printf("  threads missing from the databases: %lld\n", threads_missing);
  std::filesystem::remove_all(directory);
  return threads_missing == 0 ? 0 : 1;
}
