// kairos-run [options] -- <command> [args...]
// Turns its options into KAIROS_* variables, puts libkairos.so (found relative to this
// executable, so a build tree and an install tree both work) first in LD_PRELOAD, and replaces
// itself with the command (execvpe): the command's exit status is kairos-run's.
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
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

// A file's bytes through a read-only mapping (empty when it cannot be read, or is over 1 GiB).
class mapped_file {
 public:
  explicit mapped_file(const std::filesystem::path& file) {
    constexpr std::uintmax_t largest_mapped = 1ull << 30;
    std::error_code error;
    const auto size = std::filesystem::file_size(file, error);
    if (error || size == 0 || size > largest_mapped) return;
    const int descriptor = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return;
    void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
    close(descriptor);
    if (mapped != MAP_FAILED) bytes_ = {static_cast<const char*>(mapped), size};
  }
  ~mapped_file() {
    if (!bytes_.empty()) munmap(const_cast<char*>(bytes_.data()), bytes_.size());
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  // Whether it holds one of `markers` (a string its code uses).
  bool contains(std::initializer_list<std::string_view> markers) const {
    for (const auto marker : markers)
      if (bytes_.find(marker) != std::string_view::npos) return true;
    return false;
  }
  // Its ELF program interpreter (PT_INTERP), "" for a static program or anything else.
  std::string interpreter() const {
    Elf64_Ehdr header{};
    if (bytes_.size() < sizeof header) return {};
    std::memcpy(&header, bytes_.data(), sizeof header);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_phentsize != sizeof(Elf64_Phdr))
      return {};
    for (std::size_t i = 0; i < header.e_phnum; ++i) {
      Elf64_Phdr segment{};
      const auto at = header.e_phoff + i * sizeof segment;
      if (at + sizeof segment > bytes_.size()) return {};
      std::memcpy(&segment, bytes_.data() + at, sizeof segment);
      if (segment.p_type == PT_INTERP && segment.p_offset + segment.p_filesz <= bytes_.size())
        return {bytes_.data() + segment.p_offset, strnlen(bytes_.data() + segment.p_offset, segment.p_filesz)};
    }
    return {};
  }

 private:
  std::string_view bytes_;
};

// The library the program's loader would load whose file name holds `name` (e.g. "kokkoscore"),
// dependencies of dependencies included: the loader itself lists them (`ld.so --list`, what ldd
// runs), by the program's RUNPATH, LD_LIBRARY_PATH and cache, and runs none of the program's code.
std::filesystem::path loaded_library(const std::filesystem::path& file, const std::string& interpreter,
                                     std::string_view name) {
  std::array<int, 2> pipe_ends{};
  if (interpreter.empty() || pipe2(pipe_ends.data(), O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string list_option = "--list";
  std::string program = file.string();
  std::string loader = interpreter;
  char* arguments[] = {loader.data(), list_option.data(), program.data(), nullptr};
  pid_t child = 0;
  const bool spawned = posix_spawn(&child, loader.c_str(), &actions, nullptr, arguments, environ) == 0;
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_ends[1]);
  std::string listing;
  char buffer[4096];
  for (ssize_t got = 0; spawned && (got = read(pipe_ends[0], buffer, sizeof buffer)) != 0;) {
    if (got > 0) {
      listing.append(buffer, static_cast<std::size_t>(got));
    } else if (errno != EINTR) {
      break;
    }
  }
  close(pipe_ends[0]);
  int status = 0;
  if (spawned)
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  // Lines read "\tlibx.so.1 => /path/libx.so.1 (0x7f...)".
  std::string_view lines{listing};
  while (!lines.empty()) {
    const auto line = lines.substr(0, lines.find('\n'));
    lines.remove_prefix(std::min(lines.size(), line.size() + 1));
    const auto arrow = line.find(" => ");
    if (arrow == std::string_view::npos || line.substr(0, arrow).find(name) == std::string_view::npos) continue;
    const auto path = line.substr(arrow + 4, line.rfind(" (") - arrow - 4);
    if (!path.empty() && path.front() == '/') return std::filesystem::path{path};
  }
  return {};
}

// Whether `value` (a Kokkos tool variable's, libraries separated by ';') names `library`.
bool names_library(std::string_view value, const std::filesystem::path& library) {
  while (!value.empty()) {
    const auto entry = value.substr(0, value.find(';'));
    value.remove_prefix(std::min(value.size(), entry.size() + 1));
    std::error_code error;
    if (entry == library.filename().string() ||  // found by the loader's search, as Kokkos's dlopen finds it
        (!entry.empty() && std::filesystem::equivalent(std::filesystem::path{entry}, library, error)))
      return true;
  }
  return false;
}

// Kokkos Tools. Kokkos 3 reads KOKKOS_PROFILE_LIBRARY only; Kokkos 4 (3.7 on) reads
// KOKKOS_TOOLS_LIBS, and for KOKKOS_PROFILE_LIBRARY prints a deprecation warning on the program's
// stderr (aborting where the two differ), so setting both would change a Kokkos 4 program's
// output. The variable is the one Kokkos's core reads: it holds the name as a string. Its core is
// the program's file where Kokkos is linked in (the string kokkosp_init_library, which it looks
// up), else the library the loader finds: libkokkoscore, or libtrilinos_kokkoscore as Trilinos,
// and so Debian (Kokkos 3.4.1), builds it, for a program that needs it directly ("kokkoscore" in
// its file) or through another library (Kokkos's mangled names, "6Kokkos", in its file).
void point_kokkos_at(const std::filesystem::path& library, const std::filesystem::path& file,
                     const mapped_file& program) {
  std::filesystem::path core;
  if (program.contains({"kokkosp_init_library"}))
    core = file;
  else if (program.contains({"kokkoscore", "6Kokkos"}))
    core = loaded_library(file, program.interpreter(), "kokkoscore");
  if (core.empty()) return;
  const bool reads_both = mapped_file{core}.contains({"KOKKOS_TOOLS_LIBS"});
  // A tool the user named is theirs: Kokkos takes one, and kairos says why its regions are absent.
  bool named = false;
  for (const char* variable : {"KOKKOS_TOOLS_LIBS", "KOKKOS_PROFILE_LIBRARY"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') continue;
    if (!names_library(value, library)) {
      error_line(
          fmt::format("{}={} names another Kokkos tool: kairos leaves Kokkos Tools to it and records no "
                      "kokkos regions; unset it to have them",
                      variable, kairos::printable(value, shown_value_bytes)));
      return;
    }
    // Named once is enough for Kokkos 4: a second spelling of the same path would differ, and abort.
    named = named || reads_both || std::string_view{variable} == "KOKKOS_PROFILE_LIBRARY";
  }
  if (!named) setenv(reads_both ? "KOKKOS_TOOLS_LIBS" : "KOKKOS_PROFILE_LIBRARY", library.c_str(), 1);
}

// The annotations a program carries for other tools reach kairos through a variable naming the
// tool library to load (docs/openmp.md): set to libkairos.so where the program's file carries NVTX
// (its header-only loader reads NVTX_INJECTION64_PATH) or Kokkos (point_kokkos_at), and the user
// named no other tool there. OpenMP needs none: libomp asks the loaded libraries for
// ompt_start_tool.
void point_annotations_at(const std::filesystem::path& library, const char* command) {
  const auto file = command_file(command);
  if (file.empty()) return;
  const mapped_file program{file};
  const char* nvtx = std::getenv("NVTX_INJECTION64_PATH");
  if ((nvtx == nullptr || *nvtx == '\0') && program.contains({"NVTX_INJECTION64_PATH"}))
    setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
  point_kokkos_at(library, file, program);
}

// What kairos-run's options hold once parsed.
struct run_options {
  std::string output, formats, frequency, components, config, cputime, realtime, periods, windows_file;
  std::string instrument, instrument_include, instrument_exclude, instrument_min;
  std::vector<std::string> settings_given;
  bool follow_children = false;
  int verbose = 0;
};

// The options that each set one setting: the value given, and "true" for a switch given bare.
struct setting_option {
  std::string_view name;
  std::string run_options::*value;
  setting which;
};
constexpr setting_option setting_options[] = {
    {"--output", &run_options::output, setting::output_path},
    {"--formats", &run_options::formats, setting::output_formats},
    {"--freq", &run_options::frequency, setting::sampling_freq},
    {"--cputime", &run_options::cputime, setting::sampling_cputime},
    {"--realtime", &run_options::realtime, setting::sampling_realtime},
    {"--components", &run_options::components, setting::components},
    {"--config", &run_options::config, setting::config_file},
    {"--instrument", &run_options::instrument, setting::instrument},
    {"--instrument-include", &run_options::instrument_include, setting::instrument_include},
    {"--instrument-exclude", &run_options::instrument_exclude, setting::instrument_exclude},
    {"--instrument-min", &run_options::instrument_min, setting::instrument_min_duration},
    {"--periods", &run_options::periods, setting::trace_periods},
    {"--windows-file", &run_options::windows_file, setting::trace_windows_file},
};

void add_options(CLI::App& app, run_options& given) {
  app.add_option("-o,--output", given.output,
                 fmt::format("output file stem (KAIROS_OUTPUT_PATH); keys {}", kairos::runtime::accepted_path_keys()));
  app.add_option(
      "--formats", given.formats,
      fmt::format("outputs to write, comma-separated (KAIROS_OUTPUT_FORMATS, default {}): {}; docs/outputs.md",
                  kairos::database::default_exit_format_names, kairos::database::format_help(true)));
  app.add_option("--freq", given.frequency, "sampling frequency in Hz (KAIROS_SAMPLING_FREQ)");
  app.add_option("--cputime", given.cputime, "CPU-time sampling on|off (KAIROS_SAMPLING_CPUTIME)")->expected(0, 1);
  app.add_option("--realtime", given.realtime, "real-time sampling on|off (KAIROS_SAMPLING_REALTIME)")->expected(0, 1);
  app.add_option("--components", given.components,
                 "what user-API regions measure (KAIROS_COMPONENTS), e.g. wall_clock,peak_rss");
  app.add_option("--config", given.config, "JSON settings file (KAIROS_CONFIG_FILE)");
  app.add_option("--instrument", given.instrument,
                 "record instrumented functions on|off (KAIROS_INSTRUMENT, on by default); "
                 "docs/instrumentation.md")
      ->expected(0, 1);
  app.add_option("--instrument-include", given.instrument_include,
                 "only functions whose name matches this POSIX extended regex (KAIROS_INSTRUMENT_INCLUDE)");
  app.add_option("--instrument-exclude", given.instrument_exclude,
                 "leave out functions whose name matches this regex (KAIROS_INSTRUMENT_EXCLUDE)");
  app.add_option("--instrument-min", given.instrument_min,
                 "seconds: shorter calls get no row (KAIROS_INSTRUMENT_MIN_DURATION, default 0.00001)");
  app.add_option("--periods", given.periods,
                 "collect only in time windows (KAIROS_TRACE_PERIODS), e.g. 'realtime:10:1:5' = five "
                 "times 10 s off, 1 s on; docs/windows.md");
  app.add_option("--windows-file", given.windows_file,
                 "CSV of irregular windows, clock,start,length a line (KAIROS_TRACE_WINDOWS_FILE)");
  app.add_flag("--follow-children", given.follow_children,
               "profile child processes too, each with its own output (KAIROS_FOLLOW_CHILDREN)");
  app.add_flag("-v,--verbose", given.verbose, "more [kairos] lines; repeat for more (KAIROS_VERBOSE)");
  app.add_option("-s,--set", given.settings_given, "any setting, as VARIABLE=VALUE or key=value (repeatable)");
  app.footer("Example: kairos-run -o out/%exe%-%pid% --components wall_clock,peak_rss -- ./app 1 2");
  app.set_version_flag("--version", std::string{"kairos-run "} + KAIROS_VERSION);
}

// What an option given without its value accepts.
std::string accepted_values_of(std::string_view option) {
  for (const auto& entry : setting_options)
    if (entry.name == option) return kairos::runtime::accepted_values(definition_of(entry.which));
  return {};
}

// The settings the command line assigns, in the order given; or, for a malformed --set, the usage
// error's exit status (said on stderr).
std::variant<std::vector<assignment>, int> assignments_of(const CLI::App& app, const run_options& given) {
  std::vector<assignment> assignments;
  auto add = [&](setting which, const std::string& value) { assignments.push_back({&definition_of(which), value}); };
  for (const auto& entry : setting_options) {
    if (app.count(std::string{entry.name}) == 0) continue;
    const std::string& value = given.*entry.value;
    const bool bare_switch = value.empty() && definition_of(entry.which).type == kairos::runtime::setting_type::boolean;
    add(entry.which, bare_switch ? "true" : value);
  }
  if (given.follow_children) add(setting::follow_children, "true");
  if (given.verbose > 0) add(setting::verbose, std::to_string(given.verbose));
  for (const auto& assigned : given.settings_given) {
    const auto equals = assigned.find('=');
    if (equals == std::string::npos) {
      error_line(fmt::format("--set \"{}\" is not VARIABLE=VALUE; see kairos-avail --settings", assigned));
      return usage_error_status;
    }
    const auto* definition = find_setting(assigned.substr(0, equals));
    if (!definition) {
      error_line(fmt::format("--set \"{}\": unknown setting; kairos-avail --settings lists them", assigned));
      return usage_error_status;
    }
    assignments.push_back({definition, assigned.substr(equals + 1)});
  }
  return assignments;
}

// Sets the assigned settings in the environment. A value kairos does not accept stops kairos,
// never the user's work: false (said on stderr), and the command runs as without kairos
// (docs/tools.md). So does an output directory that cannot be made: said now, not after the run
// (or never, for a run that records nothing). An empty value is no value (docs/settings.md).
bool settings_taken(const std::vector<assignment>& assignments) {
  for (const auto& [definition, value] : assignments) {
    if (auto accepted = check_value(*definition, value)) {
      error_line(
          fmt::format("{}=\"{}\" (from the command line) is not valid: expected {}; kairos is "
                      "disabled for this run, the program runs without it",
                      definition->variable, kairos::printable(value, shown_value_bytes), *accepted));
      return false;
    }
  }
  for (const auto& [definition, value] : assignments)
    if (!value.empty()) setenv(std::string{definition->variable}.c_str(), value.c_str(), 1);
  const auto settings = kairos::runtime::settings::load(environ);
  if (const auto blocked = kairos::runtime::check_output_directory(settings.text(setting::output_path))) {
    error_line(blocked.text() + "; kairos is disabled for this run, the program runs without it");
    return false;
  }
  return true;
}

// libkairos.so, or an empty path when neither candidate exists (said on stderr).
std::filesystem::path found_library() {
  const auto candidates = library_candidates();
  for (const auto& candidate : candidates)
    if (std::filesystem::exists(candidate)) return candidate;
  error_line(
      fmt::format("libkairos.so not found at {} nor {} (reinstall kairos); the program runs "
                  "without kairos",
                  candidates[0].string(), candidates[1].string()));
  return {};
}

// The environment of one launch: this pid is the launched process (execvpe keeps it; children are
// told apart), the annotations' tool variables, and libkairos.so first in LD_PRELOAD.
void prepare_launch(const std::filesystem::path& library, const char* command) {
  kairos::runtime::set_environment_value(setting::launch_pid, std::to_string(getpid()));
  kairos::runtime::export_launch_variables(true);
  kairos::runtime::unset_environment_value(setting::exec_generation);
  point_annotations_at(library, command);
  const char* existing = std::getenv("LD_PRELOAD");
  std::string preload = library.string();
  if (existing && *existing) preload += std::string{":"} + existing;
  setenv("LD_PRELOAD", preload.c_str(), 1);
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
  run_options given;
  add_options(app, given);
  const auto parsed = kairos::tools::parse_command_line(app, argc, argv, "kairos-run [options] -- <command> [args...]",
                                                        &accepted_values_of);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  char** command = std::get<char**>(parsed);
  const auto assignments = assignments_of(app, given);
  if (const int* status = std::get_if<int>(&assignments)) return *status;
  if (!settings_taken(std::get<std::vector<assignment>>(assignments))) return run_command(command);
  const auto library = found_library();
  if (!library.empty()) prepare_launch(library, command[0]);
  return run_command(command);
}
