#pragma once
// Whole processes for the benchmarks that compare them side by side: spawn with a clean KAIROS_*
// environment (plus the given variables), stdout to `stdout_path` (default /dev/null), stderr to
// /dev/null, wait, and report wall time and rusage. `while_running(pid)` is called in a loop until
// the process ends (a poll of its /proc entries, say); it should sleep a little itself. A process
// that fails ends the benchmark: a failed run must never count as a fast one.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace kairos::benchmarks {

struct process_result {
  double wall_s = 0;
  double user_s = 0;
  double system_s = 0;
  long max_rss_kb = 0;
  int status = 0;
};

inline process_result run_process(std::vector<std::string> command,
                                  const std::vector<std::string>& extra_environment = {},
                                  const std::function<void(pid_t)>& while_running = {},
                                  const std::string& stdout_path = "/dev/null") {
  std::vector<std::string> environment_text;
  for (char** entry = environ; *entry; ++entry)
    if (!std::string_view{*entry}.starts_with("KAIROS_")) environment_text.emplace_back(*entry);
  environment_text.insert(environment_text.end(), extra_environment.begin(), extra_environment.end());
  std::vector<char*> argv, envp;
  for (auto& word : command) argv.push_back(word.data());
  argv.push_back(nullptr);
  for (auto& word : environment_text) envp.push_back(word.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) {
    std::fprintf(stderr, "cannot start %s\n", argv[0]);
    std::exit(1);
  }
  int status = 0;
  rusage usage{};
  if (while_running)
    while (wait4(pid, &status, WNOHANG, &usage) == 0) while_running(pid);
  else
    wait4(pid, &status, 0, &usage);
  posix_spawn_file_actions_destroy(&actions);
  process_result result;
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.user_s = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6;
  result.system_s = usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
  result.max_rss_kb = usage.ru_maxrss;
  result.status = status;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s failed (status %d): the benchmark's figures would be wrong\n", argv[0], status);
    std::exit(1);
  }
  return result;
}

}  // namespace kairos::benchmarks
