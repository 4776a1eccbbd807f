// kairos-causal [options] -- <command> [args...]
// Causal profiling (docs/causal.md): runs the command under kairos-run with KAIROS_CAUSAL on,
// once, or once per configuration with --variants (each in a process of its own: fork, then exec
// of kairos-run), `--runs` times; merges the runs' profiles into one database; writes coz's
// profile.coz and an SVG of the curves beside it; prints the locations whose speedup would speed
// the program up most. The exit status is the command's (of its last run).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/merge.hpp>
#include <kairos/plugins/database/sqlite.hpp>
#include <kairos/runtime/settings.hpp>

#include "command_line.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using kairos::runtime::setting;
using kairos::tools::error_line;
using kairos::tools::usage_error_status;

constexpr int failure_status = 1;

fs::path own_directory() {
  std::error_code error;
  auto path = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path{} : path.parent_path();
}

// One configuration of a run: the settings it adds to kairos-run's command line.
struct configuration {
  std::string label;  // "" for the single configuration
  std::vector<std::string> settings;
};

struct options {
  std::string output;
  std::string scope = "line";
  std::vector<std::string> select;
  std::string speedups;
  std::string include, exclude, binaries;
  std::string experiment;
  bool variants = false;
  int runs = 1;
  std::size_t top = 10;
  std::vector<std::string> settings;  // -s VARIABLE=VALUE, passed on to kairos-run
  int verbose = 0;
};

std::vector<int> parse_speedups(const std::string& text) {
  std::vector<int> percents;
  std::stringstream stream{text};
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) percents.push_back(std::stoi(item));
  return percents;
}

// "VARIABLE=value", as kairos-run's -s takes it.
std::string assignment(setting which, std::string_view value) {
  return fmt::format("{}={}", kairos::runtime::definition_of(which).variable, value);
}

// Without --variants one configuration draws among every location and speedup asked for; with
// it, one per (location pattern, speedup), with a 0% run per pattern for its baseline.
std::vector<configuration> configurations(const options& given) {
  std::vector<std::string> common{assignment(setting::causal_scope, given.scope)};
  if (!given.include.empty()) common.push_back(assignment(setting::causal_include, given.include));
  if (!given.exclude.empty()) common.push_back(assignment(setting::causal_exclude, given.exclude));
  if (!given.binaries.empty()) common.push_back(assignment(setting::causal_binaries, given.binaries));
  if (!given.experiment.empty()) common.push_back(assignment(setting::causal_experiment, given.experiment));
  if (!given.variants) {
    auto settings = common;
    if (!given.select.empty()) {
      std::string either;
      for (const auto& pattern : given.select) either += (either.empty() ? "(" : "|(") + pattern + ")";
      settings.push_back(assignment(setting::causal_select, either));
    }
    if (!given.speedups.empty()) settings.push_back(assignment(setting::causal_speedups, given.speedups));
    return {{"", settings}};
  }
  auto percents = parse_speedups(given.speedups.empty() ? "0,25,50,75,100" : given.speedups);
  if (std::find(percents.begin(), percents.end(), 0) == percents.end()) percents.insert(percents.begin(), 0);
  std::vector<configuration> all;
  const std::vector<std::string> patterns = given.select.empty() ? std::vector<std::string>{""} : given.select;
  for (std::size_t p = 0; p < patterns.size(); ++p)
    for (const int percent : percents) {
      auto settings = common;
      if (!patterns[p].empty()) settings.push_back(assignment(setting::causal_select, patterns[p]));
      settings.push_back(assignment(setting::causal_speedups, std::to_string(percent)));
      all.push_back({fmt::format("select{}-speedup{}", p, percent), settings});
    }
  return all;
}

// Runs kairos-run with `settings` on the command; returns its wait status, or -1.
int run_once(const fs::path& kairos_run, const std::string& stem, const std::vector<std::string>& settings,
             char** command) {
  std::vector<std::string> arguments{kairos_run.string(), "-o", stem, "--formats", "db"};
  for (const auto& setting : settings) {
    arguments.push_back("-s");
    arguments.push_back(setting);
  }
  arguments.push_back("-s");
  arguments.push_back(assignment(setting::causal, "true"));
  arguments.push_back("--");
  for (char** word = command; *word; ++word) arguments.emplace_back(*word);
  std::vector<char*> pointers;
  for (auto& argument : arguments) pointers.push_back(argument.data());
  pointers.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execv(pointers[0], pointers.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string default_output(const char* command) {
  const auto now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[32];
  std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", &local);
  return fmt::format("kairos-output/{}-causal-{}", fs::path{command}.filename().string(), date);
}

void add_options(CLI::App& app, options& given) {
  app.add_option("-o,--output", given.output,
                 "directory for the runs' profiles and the results "
                 "(default kairos-output/<exe>-causal-<date>); must not exist");
  app.add_option("--scope", given.scope, "speed up source lines or whole functions")
      ->check(CLI::IsMember({"line", "function"}));
  app.add_option("--select", given.select,
                 "only locations (\"file:line\" or a function) matching this POSIX extended regex; repeatable");
  app.add_option("--speedups", given.speedups,
                 "speedups to try, percent, e.g. 0,25,50 (default: 0..100 in steps of 5, 0 drawn most, as coz)");
  app.add_option("--include", given.include, "only code whose file or function matches this regex");
  app.add_option("--exclude", given.exclude, "leave out code whose file or function matches this regex");
  app.add_option("--binaries", given.binaries,
                 "binaries in scope, a regex over their paths (default: the main program)");
  app.add_option("--experiment", given.experiment, "seconds per experiment at first (default 0.5)");
  app.add_flag("--variants", given.variants,
               "one run per (--select pattern, speedup), each a process of its own, instead of drawing "
               "them in one run");
  app.add_option("--runs", given.runs, "run the program this many times (per configuration); results add up")
      ->check(CLI::Range(1, 1000));
  app.add_option("--top", given.top, "locations printed")->check(CLI::Range(1, 1000));
  app.add_option("-s,--set", given.settings, "any other setting for kairos-run, VARIABLE=VALUE (repeatable)");
  app.add_flag("-v,--verbose", given.verbose, "more [kairos] lines");
  app.footer("Example: kairos-causal --scope function --speedups 0,25,50 -- ./app input");
  app.set_version_flag("--version", std::string{"kairos-causal "} + KAIROS_VERSION);
}

// Every value kairos-run would refuse, refused here first, before any directory or run: false,
// said on stderr.
bool plan_accepted(const std::vector<configuration>& plan) {
  for (const auto& config : plan)
    for (const auto& setting : config.settings) {
      const auto equals = setting.find('=');
      const auto* definition = kairos::runtime::find_setting(setting.substr(0, equals));
      if (!definition) continue;
      if (auto accepted = kairos::runtime::check_value(*definition, setting.substr(equals + 1))) {
        error_line(fmt::format("{} (from the command line) is not valid: expected {}", setting, *accepted));
        return false;
      }
    }
  return true;
}

// The directory the runs write to, made now (it must not exist); empty when it cannot be (said on
// stderr).
fs::path results_directory(const options& given, const char* command) {
  const fs::path directory = given.output.empty() ? default_output(command) : given.output;
  std::error_code error;
  if (fs::exists(directory, error)) {
    error_line(fmt::format("--output {}: it exists already; name a new directory", directory.string()));
    return {};
  }
  fs::create_directories(directory, error);
  if (error) {
    error_line(fmt::format("--output {}: cannot create it ({})", directory.string(), error.message()));
    return {};
  }
  return directory;
}

struct runs_done {
  std::vector<std::string> profiles;  // the databases the runs left
  int last_status = 0;                // the last run's wait status; < 0: kairos-run could not start
};

// Runs the command under kairos-run `given.runs` times per configuration, until one is interrupted.
runs_done run_all(const fs::path& kairos_run, const fs::path& directory, const std::vector<configuration>& plan,
                  const options& given, char** command) {
  runs_done done;
  for (int run = 1; run <= given.runs; ++run)
    for (const auto& config : plan) {
      auto stem = (directory / fmt::format("run{}{}{}", run, config.label.empty() ? "" : "-", config.label)).string();
      auto settings = config.settings;
      settings.insert(settings.end(), given.settings.begin(), given.settings.end());
      if (given.verbose > 0) {
        settings.push_back(assignment(setting::verbose, std::to_string(given.verbose)));
        error_line(fmt::format("run {} of {}{}", run, given.runs, config.label.empty() ? "" : ": " + config.label));
      }
      done.last_status = run_once(kairos_run, stem, settings, command);
      if (done.last_status < 0) return done;
      if (fs::exists(stem + ".db")) done.profiles.push_back(stem + ".db");
      const int status = done.last_status;
      if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)) return done;
    }
  return done;
}

// The runs' profiles merged into DIR/causal.db, and from it profile.coz, causal.svg and causal.txt;
// the top locations on stderr. False, said on stderr, when no experiment was recorded.
bool write_results(const fs::path& directory, const std::vector<std::string>& profiles, std::size_t top) {
  const auto merged = (directory / "causal.db").string();
  try {
    kairos::database::merger merge{merged};
    for (const auto& profile : profiles) try {
        merge.add(profile);
      } catch (const kairos::database::database_error& skipped) {
        error_line(fmt::format("{}; left out", skipped.what()));
      }
    merge.finish();
    kairos::database::connection database{merged, kairos::database::connection::mode::read_only};
    auto count = database.prepare("SELECT COUNT(*) FROM causal_experiment");
    if (!count.step() || count.integer(0) == 0) {
      // Each run's own summary line above says why (no progress point, nothing in scope...).
      error_line(fmt::format("no causal experiment was recorded; the runs' profiles are in {}", directory.string()));
      return false;
    }
    {
      std::ofstream coz{directory / "profile.coz"};
      kairos::database::write_coz_profile(database, coz);
    }
    {
      std::ofstream svg{directory / "causal.svg"};
      kairos::database::write_causal_svg(database, svg, top);
    }
    {
      std::ofstream text{directory / "causal.txt"};
      kairos::database::write_causal_text(database, text, top);
    }
    kairos::database::write_causal_text(database, std::cerr, top);
  } catch (const std::exception& failure) {
    error_line(fmt::format("{}; the runs' profiles are in {}", failure.what(), directory.string()));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kairos-causal [options] -- <command> [args...]\n\n"
      "Causal profiling: which code, made faster, would make the program faster (docs/causal.md).\n"
      "The program marks progress with kairos_progress(\"name\") (kairos/user.h) or coz.h's macros;\n"
      "experiments slow every other thread down while a location runs, to predict what speeding\n"
      "that location up would gain. Writes DIR/causal.db, DIR/profile.coz (coz's viewer reads it),\n"
      "DIR/causal.svg and DIR/causal.txt, and prints the top locations on stderr.",
      "kairos-causal"};
  options given;
  add_options(app, given);
  const auto parsed =
      kairos::tools::parse_command_line(app, argc, argv, "kairos-causal [options] -- <command> [args...]");
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  char** command = std::get<char**>(parsed);
  const auto plan = configurations(given);
  if (!plan_accepted(plan)) return usage_error_status;
  const auto kairos_run = own_directory() / "kairos-run";
  if (!fs::exists(kairos_run)) {
    error_line(fmt::format("kairos-run not found at {}; reinstall kairos", kairos_run.string()));
    return usage_error_status;
  }
  const fs::path directory = results_directory(given, command[0]);
  if (directory.empty()) return usage_error_status;

  // The program's Ctrl-C ends the program (same process group); kairos-causal stays to write up
  // what the finished runs collected.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  const auto runs = run_all(kairos_run, directory, plan, given, command);
  if (runs.last_status < 0) {
    error_line(fmt::format("cannot start kairos-run: {}", std::strerror(errno)));
    return failure_status;
  }
  const int exit_status = WIFEXITED(runs.last_status)     ? WEXITSTATUS(runs.last_status)
                          : WIFSIGNALED(runs.last_status) ? 128 + WTERMSIG(runs.last_status)
                                                          : failure_status;
  if (runs.profiles.empty()) {
    error_line(
        "no causal experiment: no run left a profile (the program ended before anything was sampled, "
        "or kairos-run refused to start it: see above)");
    return exit_status;
  }
  if (write_results(directory, runs.profiles, given.top))
    error_line(
        fmt::format("{}: causal.txt, causal.svg (open it in a browser), profile.coz (coz's viewer), "
                    "causal.db (kairos-report, python3 -m kairos)",
                    directory.string()));
  return exit_status;
}
