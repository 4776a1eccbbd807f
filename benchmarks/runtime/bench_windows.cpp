// What time windows save and cost, whole processes side by side in one run, the configurations
// interleaved round by round (median [lowest–highest] of the rounds). The program burns a known
// amount of CPU (the windows tests' phased program: three phases of SECONDS each):
//   bare            the program alone;
//   full sampling   kairos-run, CPU-time sampling at 1 kHz from the start;
//   1-in-10 window  the same, collecting only 10 ms in every 100 ms (monotonic:0.09:0.01:0);
//   closed window   a window that never opens before the end: kairos's cost outside windows.
// Printed: each configuration's overhead over bare, the ratio windowed/full (about 0.1 is the
// goal), and the cost of one edge: the time the windows thread spends arming or disarming every
// thread, as kairos measures it (the database's windows.edge_ns over its window count).
// Usage: bench_windows [rounds, default 5] [seconds per phase, default 1]
#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "median.hpp"
#include "process_runner.hpp"
#include "smoke.hpp"

namespace {

using namespace kairos::benchmarks;

std::string metadata(const std::string& path, const char* key) {
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT value FROM metadata WHERE key = ?", -1, &statement, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(statement, 1, key, -1, SQLITE_STATIC);
      if (sqlite3_step(statement) == SQLITE_ROW)
        value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return value;
}

void print(const char* name, const spread& value, const char* unit, double scale) {
  std::printf("  %-40s %9.3f %s [%.3f–%.3f]\n", name, value.median * scale, unit, value.lowest * scale,
              value.highest * scale);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : smoke_or(1, 5);
  const std::string seconds = argc > 2 ? argv[2] : (smoke_run() ? "0.2" : "1");
  if (rounds < 1 || std::atof(seconds.c_str()) <= 0) {
    std::fprintf(stderr,
                 "bench_windows: rounds (\"%s\") must be a whole number ≥ 1 and seconds per phase "
                 "(\"%s\") a number > 0; usage: bench_windows [rounds] [seconds per phase]\n",
                 argc > 1 ? argv[1] : "", seconds.c_str());
    return 2;
  }
  const std::string program = KAIROS_PHASED_PROGRAM_PATH, kairos_run = KAIROS_RUN_PATH;
  const auto directory = std::filesystem::temp_directory_path() / ("kairos-bench-windows-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  const std::vector<std::string> sampling{"KAIROS_SAMPLING_FREQ=1000", "KAIROS_SAMPLING_DELAY=0"};

  std::vector<double> bare, full, windowed, closed, full_added, windowed_added, closed_added, ratio, edge_us;
  for (int round = 0; round < rounds; ++round) {
    auto profiled = [&](const char* name, std::vector<std::string> extra) {
      const auto stem = (directory / (std::string{name} + std::to_string(round))).string();
      auto environment = sampling;
      environment.insert(environment.end(), extra.begin(), extra.end());
      const auto wall =
          run_process({kairos_run, "-o", stem, "--formats", "db", "--", program, seconds}, environment).wall_s;
      return std::pair{wall, stem + ".db"};
    };
    const double plain = run_process({program, seconds}).wall_s;
    const auto [all, all_db] = profiled("full", {});
    const auto [some, some_db] = profiled("windowed", {"KAIROS_TRACE_PERIODS=monotonic:0.09:0.01:0"});
    const auto [none, none_db] = profiled("closed", {"KAIROS_TRACE_PERIODS=realtime:1000:1"});
    bare.push_back(plain);
    full.push_back(all);
    windowed.push_back(some);
    closed.push_back(none);
    full_added.push_back(all - plain);
    windowed_added.push_back(some - plain);
    closed_added.push_back(none - plain);
    ratio.push_back((some - plain) / (all - plain));
    const auto opened = std::atof(metadata(some_db, "windows.opened").c_str());
    if (opened > 0) edge_us.push_back(std::atof(metadata(some_db, "windows.edge_ns").c_str()) / (2 * opened) / 1e3);
  }
  std::printf(
      "time windows: CPU-bound program, 3 phases of %s s of CPU, sampling at 1 kHz; medians of %d "
      "interleaved rounds [lowest–highest]\n",
      seconds.c_str(), rounds);
  print("bare", spread_of(bare), "s ", 1);
  print("full sampling", spread_of(full), "s ", 1);
  print("1-in-10 window (10 ms every 100 ms)", spread_of(windowed), "s ", 1);
  print("closed window (never opens)", spread_of(closed), "s ", 1);
  print("added: full sampling", spread_of(full_added), "ms", 1e3);
  print("added: 1-in-10 window", spread_of(windowed_added), "ms", 1e3);
  print("added: closed window", spread_of(closed_added), "ms", 1e3);
  std::printf("ratio 1-in-10 window overhead vs full sampling overhead (goal about 0.1): %.3f [%.3f–%.3f]\n",
              spread_of(ratio).median, spread_of(ratio).lowest, spread_of(ratio).highest);
  if (!edge_us.empty())
    std::printf("ratio one window edge (arm or disarm every thread) in microseconds: %.1f [%.1f–%.1f]\n",
                spread_of(edge_us).median, spread_of(edge_us).lowest, spread_of(edge_us).highest);
  std::filesystem::remove_all(directory);
  return 0;
}
