// bench_runtime: the runtime's costs, each next to what it is compared with, in one run.
//   1. kairos-run -- /bin/true vs /bin/true (whole processes): added milliseconds.
//   2. a user-API region (push + pop) with libkairos.so loaded vs a stored region of the core
//      (kairos::stored<component_tuple<wall_clock>>) in the same process. This part runs in a
//      child started under kairos-run.
//   3. the user API without kairos (push + pop) vs two calls of an empty function.
// Each pair is measured as the median of repetitions; the last lines print the ratios.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/storage/stored.hpp>
#include <kairos/user.h>

#include "ratio_report.hpp"

extern char** environ;

namespace {

int run_process(std::vector<const char*> argv) {
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], &actions, nullptr, const_cast<char* const*>(argv.data()),
                   environ) != 0)
    return -1;
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

void process_true(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(run_process({"/bin/true"}));
}
void process_kairos_run_true(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(run_process({KAIROS_RUN_PATH, "--", "/bin/true"}));
}

[[gnu::noinline]] void empty_function(const char* name) { benchmark::DoNotOptimize(name); }

void user_api_without_kairos(benchmark::State& state) {
  for (auto _ : state) {
    kairos_push_region("region");
    kairos_pop_region("region");
  }
}
void empty_function_calls(benchmark::State& state) {
  for (auto _ : state) {
    empty_function("region");
    empty_function("region");
  }
}

void user_api_with_kairos(benchmark::State& state) {
  if (!kairos_is_active()) state.SkipWithError("libkairos.so is not loaded");
  for (auto _ : state) {
    kairos_push_region("region");
    kairos_pop_region("region");
  }
}
void stored_region(benchmark::State& state) {
  for (auto _ : state) {
    kairos::stored<kairos::component_tuple<kairos::wall_clock>> region{"region"};
    region.start();
    region.stop();
  }
}

constexpr int repetitions = 7;
const std::string scratch_directory = "/tmp/kairos-bench-runtime";

}  // namespace

int main(int argc, char** argv) {
  const bool under_kairos = std::getenv("KAIROS_BENCH_CHILD") != nullptr;
  benchmark::Initialize(&argc, argv);
  kairos::benchmarks::median_collector collector;
  if (under_kairos) {
    benchmark::RegisterBenchmark("user_api_with_kairos", user_api_with_kairos)
        ->Repetitions(repetitions)->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark("stored_region", stored_region)
        ->Repetitions(repetitions)->ReportAggregatesOnly(true);
    benchmark::RunSpecifiedBenchmarks(&collector);
    std::printf("ratio user-API region with kairos vs stored region: %.2f (%.1f ns vs %.1f ns, "
                "median of %d)\n",
                collector.median_ns["user_api_with_kairos"] / collector.median_ns["stored_region"],
                collector.median_ns["user_api_with_kairos"], collector.median_ns["stored_region"],
                repetitions);
    return 0;
  }
  benchmark::RegisterBenchmark("process_true", process_true)
      ->Unit(benchmark::kMillisecond)->Iterations(40)->Repetitions(repetitions)
      ->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark("process_kairos_run_true", process_kairos_run_true)
      ->Unit(benchmark::kMillisecond)->Iterations(40)->Repetitions(repetitions)
      ->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark("user_api_without_kairos", user_api_without_kairos)
      ->Repetitions(repetitions)->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark("empty_function_calls", empty_function_calls)
      ->Repetitions(repetitions)->ReportAggregatesOnly(true);
  // kairos-run's outputs go to a scratch folder, one stem per process (kairos never overwrites a
  // profile database: a shared stem would leave every run after the first without one).
  std::filesystem::remove_all(scratch_directory);
  setenv("KAIROS_OUTPUT_PATH", (scratch_directory + "/true-%pid%").c_str(), 1);
  benchmark::RunSpecifiedBenchmarks(&collector);
  const double added_ms =
      (collector.median_ns["process_kairos_run_true"] - collector.median_ns["process_true"]) / 1e6;
  std::printf("kairos-run -- /bin/true vs /bin/true: +%.2f ms (%.2f ms vs %.2f ms, ratio %.2f, "
              "median of %d)\n",
              added_ms, collector.median_ns["process_kairos_run_true"] / 1e6,
              collector.median_ns["process_true"] / 1e6,
              collector.median_ns["process_kairos_run_true"] / collector.median_ns["process_true"],
              repetitions);
  std::printf("ratio user API without kairos vs empty function calls: %.2f (%.2f ns vs %.2f ns, "
              "median of %d)\n",
              collector.median_ns["user_api_without_kairos"] /
                  collector.median_ns["empty_function_calls"],
              collector.median_ns["user_api_without_kairos"],
              collector.median_ns["empty_function_calls"], repetitions);
  std::fflush(stdout);
  // Part 2 needs libkairos.so loaded: this program again, under kairos-run.
  setenv("KAIROS_BENCH_CHILD", "1", 1);
  setenv("KAIROS_OUTPUT_PATH", (scratch_directory + "/regions-%pid%").c_str(), 1);
  std::vector<const char*> child{KAIROS_RUN_PATH, "--", "/proc/self/exe"};
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) > 0) child[2] = self;
  child.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, KAIROS_RUN_PATH, nullptr, nullptr, const_cast<char* const*>(child.data()),
                  environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  return 0;
}
