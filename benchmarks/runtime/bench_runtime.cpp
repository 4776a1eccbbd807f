// bench_runtime: the runtime's costs, each next to what it is compared with, in one run.
//   1. kairos-run -- /bin/true vs /bin/true (whole processes): added milliseconds.
//   2. a user-API region (push + pop) with libkairos.so loaded vs a stored region of the core
//      (kairos::stored<component_tuple<wall_clock>>) in the same process. This part runs in a
//      child started under kairos-run.
//   3. the user API without kairos (push + pop) vs two calls of an empty function.
//   4. a progress point (kairos_progress, docs/causal.md): without kairos vs one call of an empty
//      function; with libkairos.so vs one relaxed atomic add of the program's own (in the child).
// Repetitions of every benchmark are interleaved at random in one run (ratio_report.hpp); the
// ratio lines give the medians with their spread.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <kairos/user.h>
#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/storage/stored.hpp>

#include "ratio_report.hpp"

extern char** environ;

namespace {

int run_process(std::vector<const char*> argv) {
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], &actions, nullptr, const_cast<char* const*>(argv.data()), environ) != 0) return -1;
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

void progress_without_kairos(benchmark::State& state) {
  for (auto _ : state) kairos_progress("progress");
}
void empty_function_call(benchmark::State& state) {
  for (auto _ : state) empty_function("progress");
}

void progress_with_kairos(benchmark::State& state) {
  if (!kairos_is_active()) state.SkipWithError("libkairos.so is not loaded");
  for (auto _ : state) kairos_progress("progress");
}
std::atomic<std::size_t> own_counter{0};
void relaxed_atomic_add(benchmark::State& state) {
  for (auto _ : state) own_counter.fetch_add(1, std::memory_order_relaxed);
}

const std::string scratch_directory = "/tmp/kairos-bench-runtime";

// A whole process is milliseconds: a fixed count per repetition instead of a minimum time.
void per_process(benchmark::internal::Benchmark* benchmark) {
  using kairos::benchmarks::smoke_or;
  benchmark->Unit(benchmark::kMillisecond)->Iterations(smoke_or(2, 40))->Repetitions(smoke_or(2, 7));
}

}  // namespace

int main(int argc, char** argv) {
  using kairos::benchmarks::run_and_print_ratios;
  if (std::getenv("BENCH_RUNTIME_CHILD") != nullptr) {
    benchmark::RegisterBenchmark("user_api_with_kairos", user_api_with_kairos);
    benchmark::RegisterBenchmark("stored_region", stored_region);
    benchmark::RegisterBenchmark("progress_with_kairos", progress_with_kairos);
    benchmark::RegisterBenchmark("relaxed_atomic_add", relaxed_atomic_add);
    return run_and_print_ratios(
        argc, argv,
        {{"user_api_with_kairos", "stored_region", 3.0}, {"progress_with_kairos", "relaxed_atomic_add", 4.0}});
  }
  benchmark::RegisterBenchmark("process_true", process_true)->Apply(per_process);
  benchmark::RegisterBenchmark("process_kairos_run_true", process_kairos_run_true)->Apply(per_process);
  benchmark::RegisterBenchmark("user_api_without_kairos", user_api_without_kairos);
  benchmark::RegisterBenchmark("empty_function_calls", empty_function_calls);
  benchmark::RegisterBenchmark("progress_without_kairos", progress_without_kairos);
  benchmark::RegisterBenchmark("empty_function_call", empty_function_call);
  // kairos-run's outputs go to a scratch folder, one stem per process (kairos never overwrites a
  // profile database: a shared stem would leave every run after the first without one).
  std::filesystem::remove_all(scratch_directory);
  setenv("KAIROS_OUTPUT_PATH", (scratch_directory + "/true-%pid%").c_str(), 1);
  // No promise is made for a whole process (it is milliseconds of set-up and database files, see
  // docs/performance.md); the limit only flags a regression of that order.
  const int status = run_and_print_ratios(argc, argv,
                                          {{"process_kairos_run_true", "process_true", 100.0},
                                           {"user_api_without_kairos", "empty_function_calls", 2.0},
                                           {"progress_without_kairos", "empty_function_call", 2.0}});
  std::fflush(stdout);
  // Part 2 needs libkairos.so loaded: this program again, under kairos-run, with the same options.
  setenv("BENCH_RUNTIME_CHILD", "1", 1);
  setenv("KAIROS_OUTPUT_PATH", (scratch_directory + "/regions-%pid%").c_str(), 1);
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  std::vector<const char*> child{KAIROS_RUN_PATH, "--", self};
  for (int i = 1; i < argc; ++i) child.push_back(argv[i]);
  child.push_back(nullptr);
  pid_t pid = 0;
  int child_status = 0;
  if (posix_spawn(&pid, KAIROS_RUN_PATH, nullptr, nullptr, const_cast<char* const*>(child.data()), environ) != 0 ||
      waitpid(pid, &child_status, 0) != pid || !WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) {
    std::fprintf(stderr, "bench_runtime: the run under kairos-run failed (status %d)\n", child_status);
    return 1;
  }
  return status;
}
