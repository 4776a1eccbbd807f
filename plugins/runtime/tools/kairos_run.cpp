// kairos-run [options] -- <command> [args...]
// Turns its options into KAIROS_* variables, puts libkairos.so (found relative to this
// executable, so a build tree and an install tree both work) first in LD_PRELOAD, and replaces
// itself with the command (execvpe): the command's exit status is kairos-run's.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <kairos/plugins/database/formats.hpp>
#include <kairos/printable.hpp>
#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

#include "command_line.hpp"

#ifndef KAIROS_RUN_LIBRARY_RELATIVE_PATH
#define KAIROS_RUN_LIBRARY_RELATIVE_PATH "../lib"
#endif

extern char** environ;

namespace {

using kairos::runtime::check_value;
using kairos::runtime::definition_of;
using kairos::runtime::find_setting;
using kairos::runtime::setting;
using kairos::tools::error_line;
using kairos::tools::usage_error_status;

constexpr int not_found_status = 127;           // as a shell reports a command it cannot find
constexpr int not_executable_status = 126;      // as a shell reports a command it cannot run
constexpr std::size_t shown_value_bytes = 120;  // as the runtime shows a value (settings.cpp)

std::filesystem::path own_directory() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path{} : path.parent_path();
}

// libkairos.so next to kairos-run (build tree), or at the install layout's relative place.
std::vector<std::filesystem::path> library_candidates() {
  const auto directory = own_directory();
  return {directory / "libkairos.so",
          (directory / KAIROS_RUN_LIBRARY_RELATIVE_PATH / "libkairos.so").lexically_normal()};
}

// Replaces kairos-run with the command; returns only when it cannot run, with a shell's status.
int run_command(char** command) {
  execvpe(command[0], command, environ);
  const int error = errno;
  error_line(fmt::format("cannot run '{}': {}", command[0], std::strerror(error)));
  return error == ENOENT ? not_found_status : not_executable_status;
}

struct assignment {
  const kairos::runtime::setting_definition* definition;
  std::string value;
};

// The command's file, as execvpe will find it ("" when not found).
std::filesystem::path command_file(const char* command) {
  if (std::strchr(command, '/') != nullptr) return command;
  const char* path = std::getenv("PATH");
  std::string_view directories = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!directories.empty()) {
    const auto colon = directories.find(':');
    const auto directory = directories.substr(0, colon);
    const auto candidate = std::filesystem::path{directory.empty() ? "." : directory} / command;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    directories.remove_prefix(colon + 1);
  }
  return {};
}

// Whether the file holds one of `markers` (a string its code uses), read through a mapping.
bool file_contains(const std::filesystem::path& file, std::initializer_list<std::string_view> markers) {
  constexpr std::uintmax_t largest_scanned = 1ull << 30;
  std::error_code error;
  const auto size = std::filesystem::file_size(file, error);
  if (error || size == 0 || size > largest_scanned) return false;
  const int descriptor = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return false;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
  close(descriptor);
  if (mapped == MAP_FAILED) return false;
  bool found = false;
  for (const auto marker : markers) found = found || memmem(mapped, size, marker.data(), marker.size()) != nullptr;
  munmap(mapped, size);
  return found;
}

// The annotations a program carries for other tools reach kairos through a variable naming the
// tool library to load (docs/openmp.md): set to libkairos.so where the program's file carries NVTX
// (its header-only loader reads NVTX_INJECTION64_PATH) or Kokkos (its runtime reads
// KOKKOS_TOOLS_LIBS), and the user named no other tool there. OpenMP needs none: libomp asks the
// loaded libraries for ompt_start_tool.
void point_annotations_at(const std::filesystem::path& library, const char* command) {
  const auto unset = [](const char* variable) {
    const char* value = std::getenv(variable);
    return value == nullptr || *value == '\0';
  };
  const auto file = command_file(command);
  if (file.empty()) return;
  if (unset("NVTX_INJECTION64_PATH") && file_contains(file, {"NVTX_INJECTION64_PATH"}))
    setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
  if (unset("KOKKOS_TOOLS_LIBS") && unset("KOKKOS_PROFILE_LIBRARY") &&
      file_contains(file, {"kokkosp_init_library", "libkokkoscore"}))
    setenv("KOKKOS_TOOLS_LIBS", library.c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kairos-run [options] -- <command> [args...]\n\n"
      "Profile a program with kairos (libkairos.so preloaded).\n"
      "Options set KAIROS_* variables (kairos-avail --settings lists them all); the command's\n"
      "exit status is kairos-run's. Outputs go to KAIROS_OUTPUT_PATH (default\n"
      "kairos-output/%exe%-%pid%) with one '[kairos]' line on stderr at exit saying where.",
      "kairos-run"};
  std::string output, formats, frequency, components, config, cputime, realtime, periods, windows_file;
  std::string instrument, instrument_include, instrument_exclude, instrument_min;
  std::vector<std::string> settings_given;
  bool follow_children = false;
  int verbose = 0;
  app.add_option("-o,--output", output,
                 "output file stem (KAIROS_OUTPUT_PATH); keys %pid% %ppid% %hostname% %exe% "
                 "%launch_date% %launch_id% %rank% %size% %env{NAME}%");
  app.add_option("--formats", formats,
                 "outputs to write, comma-separated (KAIROS_OUTPUT_FORMATS, default db,text,trace): " +
                     kairos::database::format_help(true) + "; docs/outputs.md");
  app.add_option("--freq", frequency, "sampling frequency in Hz (KAIROS_SAMPLING_FREQ)");
  app.add_option("--cputime", cputime, "CPU-time sampling on|off (KAIROS_SAMPLING_CPUTIME)")->expected(0, 1);
  app.add_option("--realtime", realtime, "real-time sampling on|off (KAIROS_SAMPLING_REALTIME)")->expected(0, 1);
  app.add_option("--components", components,
                 "what user-API regions measure (KAIROS_COMPONENTS), e.g. wall_clock,peak_rss");
  app.add_option("--config", config, "JSON settings file (KAIROS_CONFIG_FILE)");
  app.add_option("--instrument", instrument,
                 "record instrumented functions on|off (KAIROS_INSTRUMENT, on by default); "
                 "docs/instrumentation.md")
      ->expected(0, 1);
  app.add_option("--instrument-include", instrument_include,
                 "only functions whose name matches this POSIX extended regex (KAIROS_INSTRUMENT_INCLUDE)");
  app.add_option("--instrument-exclude", instrument_exclude,
                 "leave out functions whose name matches this regex (KAIROS_INSTRUMENT_EXCLUDE)");
  app.add_option("--instrument-min", instrument_min,
                 "seconds: shorter calls get no row (KAIROS_INSTRUMENT_MIN_DURATION, default 0.00001)");
  app.add_option("--periods", periods,
                 "collect only in time windows (KAIROS_TRACE_PERIODS), e.g. 'realtime:10:1:5' = five "
                 "times 10 s off, 1 s on; docs/windows.md");
  app.add_option("--windows-file", windows_file,
                 "CSV of irregular windows, clock,start,length a line (KAIROS_TRACE_WINDOWS_FILE)");
  app.add_flag("--follow-children", follow_children,
               "profile child processes too, each with its own output (KAIROS_FOLLOW_CHILDREN)");
  app.add_flag("-v,--verbose", verbose, "more [kairos] lines; repeat for more (KAIROS_VERBOSE)");
  app.add_option("-s,--set", settings_given, "any setting, as VARIABLE=VALUE or key=value (repeatable)");
  app.footer("Example: kairos-run -o out/%exe%-%pid% --components wall_clock,peak_rss -- ./app 1 2");
  app.set_version_flag("--version", std::string{"kairos-run "} + KAIROS_VERSION);

  // The options that each set one setting: the value given, and "true" for a switch given bare.
  struct setting_option {
    std::string_view name;
    const std::string& value;
    setting which;
  };
  const setting_option setting_options[] = {{"--output", output, setting::output_path},
                                            {"--formats", formats, setting::output_formats},
                                            {"--freq", frequency, setting::sampling_freq},
                                            {"--cputime", cputime, setting::sampling_cputime},
                                            {"--realtime", realtime, setting::sampling_realtime},
                                            {"--components", components, setting::components},
                                            {"--config", config, setting::config_file},
                                            {"--instrument", instrument, setting::instrument},
                                            {"--instrument-include", instrument_include, setting::instrument_include},
                                            {"--instrument-exclude", instrument_exclude, setting::instrument_exclude},
                                            {"--instrument-min", instrument_min, setting::instrument_min_duration},
                                            {"--periods", periods, setting::trace_periods},
                                            {"--windows-file", windows_file, setting::trace_windows_file}};
  const auto accepted = [&](std::string_view option) {
    for (const auto& entry : setting_options)
      if (entry.name == option) return kairos::runtime::accepted_values(definition_of(entry.which));
    return std::string{};
  };
  const auto parsed =
      kairos::tools::parse_command_line(app, argc, argv, "kairos-run [options] -- <command> [args...]", accepted);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  char** command = std::get<char**>(parsed);

  std::vector<assignment> assignments;
  auto add = [&](setting which, const std::string& value) { assignments.push_back({&definition_of(which), value}); };
  for (const auto& entry : setting_options)
    if (app.count(std::string{entry.name}))
      add(entry.which, entry.value.empty() && definition_of(entry.which).type == kairos::runtime::setting_type::boolean
                           ? "true"
                           : entry.value);
  if (follow_children) add(setting::follow_children, "true");
  if (verbose > 0) add(setting::verbose, std::to_string(verbose));
  for (const auto& given : settings_given) {
    const auto equals = given.find('=');
    if (equals == std::string::npos) {
      error_line(fmt::format("--set \"{}\" is not VARIABLE=VALUE; see kairos-avail --settings", given));
      return usage_error_status;
    }
    const auto* definition = find_setting(given.substr(0, equals));
    if (!definition) {
      error_line(fmt::format("--set \"{}\": unknown setting; kairos-avail --settings lists them", given));
      return usage_error_status;
    }
    assignments.push_back({definition, given.substr(equals + 1)});
  }
  // A value kairos does not accept stops kairos, never the user's work: the command runs as
  // without kairos (docs/tools.md). An empty value is no value (docs/settings.md).
  for (const auto& [definition, value] : assignments) {
    if (auto accepted = check_value(*definition, value)) {
      error_line(
          fmt::format("{}=\"{}\" (from the command line) is not valid: expected {}; kairos is "
                      "disabled for this run, the program runs without it",
                      definition->variable, kairos::printable(value, shown_value_bytes), *accepted));
      return run_command(command);
    }
  }
  for (const auto& [definition, value] : assignments)
    if (!value.empty()) setenv(std::string{definition->variable}.c_str(), value.c_str(), 1);
  // An output directory that cannot be made is said now, not after the run (or never, for a run
  // that records nothing): the program runs without kairos.
  const auto settings = kairos::runtime::settings::load(environ);
  if (const auto blocked = kairos::runtime::check_output_directory(settings.text(setting::output_path))) {
    error_line(blocked.text() + "; kairos is disabled for this run, the program runs without it");
    return run_command(command);
  }

  std::filesystem::path library;
  for (const auto& candidate : library_candidates())
    if (std::filesystem::exists(candidate)) {
      library = candidate;
      break;
    }
  if (library.empty()) {
    const auto candidates = library_candidates();
    error_line(
        fmt::format("libkairos.so not found at {} nor {} (reinstall kairos); the program runs "
                    "without kairos",
                    candidates[0].string(), candidates[1].string()));
    return run_command(command);
  }

  // One launch: this pid is the launched process (execvpe keeps it); children are told apart.
  kairos::runtime::set_environment_value(setting::launch_pid, std::to_string(getpid()));
  kairos::runtime::export_launch_variables(true);
  kairos::runtime::unset_environment_value(setting::exec_generation);
  const char* existing = std::getenv("LD_PRELOAD");
  std::string preload = library.string();
  if (existing && *existing) preload += std::string{":"} + existing;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  point_annotations_at(library, command[0]);

  return run_command(command);
}
