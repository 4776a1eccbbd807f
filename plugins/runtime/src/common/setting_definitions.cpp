// The table of every setting: data only. kairos-avail --settings prints it, docs/settings.md
// describes it, the runtime and kairos-run read it.
#include <array>
#include <charconv>
#include <string>

#include <kairos/components.hpp>
#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>
#include <kairos/runtime/time_windows.hpp>

#include "posix_regex.hpp"

namespace kairos::runtime {
namespace {

using enum setting_type;

constexpr std::string_view component_names =
    "wall_clock,cpu_clock,thread_cpu_clock,user_clock,system_clock,peak_rss,page_rss,page_faults,"
    "context_switches";

// The accepted names are the built-in components' labels, in kairos::builtin_components' order
// (the one list of them): a component added there and not here fails to compile.
template <class... Components>
constexpr bool names_match(std::tuple<Components...>*) {
  std::string_view rest = component_names;
  bool match = true;
  auto next = [&](std::string_view label) {
    const auto comma = rest.find(',');
    match = match && rest.substr(0, comma) == label;
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  };
  (next(Components::label()), ...);
  return match && rest.empty();
}
static_assert(names_match(static_cast<builtin_components*>(nullptr)),
              "KAIROS_COMPONENTS' accepted names and kairos::builtin_components disagree");

std::optional<std::string> check_output_path(std::string_view text) {
  if (auto problem = check_path_pattern(text))
    return "a path whose keys are among " + std::string{accepted_path_keys()} + " (" + *problem + ")";
  return std::nullopt;
}

std::optional<std::string> check_periods(std::string_view text) {
  auto periods = parse_periods(text);
  if (!periods.error) return std::nullopt;
  return "specs clock:delay:duration[:repeat] or delay:duration[:repeat][:clock], separated by spaces "
         "or commas (kairos-avail --settings shows examples); " + *periods.error;
}

std::optional<std::string> check_windows_file(std::string_view text) {
  auto windows = load_windows_file(std::string{text});
  if (!windows.error) return std::nullopt;
  return "a CSV file of clock,start,length lines; " + *windows.error;
}

// Causal speedups: percentages 0..100 in steps of 5, as coz's schedule has them. The item at fault
// is named by its position: the value itself is echoed once, made printable, by the caller.
std::optional<std::string> check_speedups(std::string_view text) {
  std::size_t position = 0;
  for (const auto& item : split_list(text)) {
    ++position;
    int percent = -1;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), percent);
    if (error != std::errc{} || end != item.data() + item.size() || percent < 0 || percent > 100 || percent % 5 != 0)
      return "a comma-separated list of percentages 0..100 in steps of 5 (item " + std::to_string(position) +
             " is not one)";
  }
  return std::nullopt;
}

std::optional<std::string> check_regex(std::string_view text) {
  const posix_regex expression{std::string{text}};
  if (expression.compiled()) return std::nullopt;
  return "a POSIX extended regular expression (" + expression.error() + ")";
}

constexpr double max_frequency_hz = 100'000;
constexpr double max_seconds = 1e9;

constexpr std::array definitions{
    // general
    setting_definition{"enabled", "KAIROS_ENABLED", boolean, "true", "general",
                       "profile the program at all; false makes libkairos.so do nothing"},
    setting_definition{"verbose", "KAIROS_VERBOSE", integer, "0", "general",
                       "0: only problems and the exit summary; 1: what kairos does, and what its parts "
                       "cost the run; 2: per thread",
                       {}, 0, 3},
    setting_definition{"config_file", "KAIROS_CONFIG_FILE", path, "", "general",
                       "JSON file of settings (keys or variables to values), below the "
                       "environment in priority",
                       {}, 0, 0, true},
    setting_definition{"follow_children", "KAIROS_FOLLOW_CHILDREN", boolean, "false", "general",
                       "profile child processes too (fork, spawn), each writing its own output; "
                       "off: children run without kairos"},
    // output
    setting_definition{"output_path", "KAIROS_OUTPUT_PATH", path, "kairos-output/%exe%-%pid%",
                       "output",
                       "file stem of each process's outputs (extension added per format); keys "
                       "%pid% %ppid% %hostname% %exe% %launch_date% %rank% %size% %env{NAME}%; under an MPI launch of "
                       "several ranks the default is kairos-output/%exe%-%launch_date%/rank%rank%",
                       {}, 0, 0, false, &check_output_path},
    setting_definition{"output_formats", "KAIROS_OUTPUT_FORMATS", list, "db,text,trace", "output",
                       "outputs written at exit: db (<stem>.db, the SQLite profile), text (<stem>.txt), "
                       "trace (<stem>.trace.json, Chrome trace), folded (<stem>.folded), speedscope "
                       "(<stem>.speedscope.json), flamegraph (<stem>.svg), html (<stem>.html, a report page), "
                       "json (<stem>.json)",
                       "db,text,trace,folded,speedscope,flamegraph,html,json"},
    setting_definition{"flush_interval", "KAIROS_FLUSH_INTERVAL", number, "1", "output",
                       "seconds between commits of the profile database (what a killed program "
                       "leaves is complete up to the last one)",
                       {}, 0.01, 3600},
    setting_definition{"source_lines", "KAIROS_SOURCE_LINES", text, "own", "output",
                       "file:line of the sampled frames in the database: own (from the debug information "
                       "a program or library carries itself, as a -g build does), all (also separate "
                       "debug files under /usr/lib/debug, such as Debian's -dbgsym packages: about "
                       "100 ms each to decompress at the end of the run), off (functions only)",
                       "own,all,off"},
    setting_definition{"symbol_cache", "KAIROS_SYMBOL_CACHE", path, "", "output",
                       "directory where symbolized addresses are kept from one run to the next, by each "
                       "module's build id, so a run whose addresses were seen before does not read "
                       "symbol or line tables again; empty: $XDG_CACHE_HOME/kairos/symbols, else "
                       "~/.cache/kairos/symbols; off: no cache",
                       {}, 0, 0, true},
    // regions
    setting_definition{"components", "KAIROS_COMPONENTS", list, "wall_clock", "regions",
                       "what each user-API region measures, by component name", component_names},
    // instrument (docs/instrumentation.md)
    setting_definition{"instrument", "KAIROS_INSTRUMENT", boolean, "true", "instrument",
                       "record the calls of the functions a program compiled with -finstrument-functions "
                       "(CMake: kairos_instrument) as regions; off: the hooks return at once"},
    setting_definition{"instrument_include", "KAIROS_INSTRUMENT_INCLUDE", text, "", "instrument",
                       "only functions whose demangled name matches this POSIX extended regular "
                       "expression (searched, as grep -E does); empty: all",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"instrument_exclude", "KAIROS_INSTRUMENT_EXCLUDE", text, "", "instrument",
                       "leave out functions whose demangled name matches this regular expression",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"instrument_file_include", "KAIROS_INSTRUMENT_FILE_INCLUDE", text, "", "instrument",
                       "only functions whose source file (from the debug information) matches this "
                       "regular expression",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"instrument_file_exclude", "KAIROS_INSTRUMENT_FILE_EXCLUDE", text, "", "instrument",
                       "leave out functions whose source file matches this regular expression",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"instrument_system", "KAIROS_INSTRUMENT_SYSTEM", boolean, "false", "instrument",
                       "also the standard library's functions (std::, __gnu_cxx::, operator new/delete) and "
                       "those from /usr/include; off: they stay in their callers' time"},
    setting_definition{"instrument_min_duration", "KAIROS_INSTRUMENT_MIN_DURATION", number, "0.00001",
                       "instrument",
                       "seconds: a call shorter than this gets no row and stays in its caller's time "
                       "(0: every call a row; a row costs about 1 us, so at 10 us rows cost at most a "
                       "tenth of the time they describe)",
                       {}, 0, max_seconds},
    // sampling (registered for the sampler; common values, then per-sampler overrides)
    setting_definition{"sampling_freq", "KAIROS_SAMPLING_FREQ", number, "300", "sampling",
                       "samples per second of each sampled thread", {}, 0.001, max_frequency_hz},
    setting_definition{"sampling_delay", "KAIROS_SAMPLING_DELAY", number, "0.5", "sampling",
                       "seconds after start before sampling begins", {}, 0, max_seconds},
    setting_definition{"sampling_duration", "KAIROS_SAMPLING_DURATION", number, "0", "sampling",
                       "seconds of sampling after the delay; 0 = until exit", {}, 0, max_seconds},
    setting_definition{"sampling_cputime", "KAIROS_SAMPLING_CPUTIME", boolean, "true", "sampling",
                       "sample threads by the CPU time they use"},
    setting_definition{"sampling_cputime_source", "KAIROS_SAMPLING_CPUTIME_SOURCE", text, "auto",
                       "sampling",
                       "CPU-time sampler's clock; each charges system-call time to the call: "
                       "auto (ring), ring (perf task-clock samples in a ring buffer, no signal, "
                       "where perf_event_open lets it count the kernel, else timer), perf (task-clock "
                       "overflow signal, same condition), timer (POSIX per-thread CPU timer, "
                       "tick-limited)",
                       "auto,ring,perf,timer"},
    setting_definition{"sampling_cputime_freq", "KAIROS_SAMPLING_CPUTIME_FREQ", number, "",
                       "sampling", "CPU-time sampler frequency; empty = KAIROS_SAMPLING_FREQ", {},
                       0.001, max_frequency_hz, true},
    setting_definition{"sampling_cputime_delay", "KAIROS_SAMPLING_CPUTIME_DELAY", number, "",
                       "sampling", "CPU-time sampler delay; empty = KAIROS_SAMPLING_DELAY", {}, 0,
                       max_seconds, true},
    setting_definition{"sampling_cputime_duration", "KAIROS_SAMPLING_CPUTIME_DURATION", number, "",
                       "sampling", "CPU-time sampler duration; empty = KAIROS_SAMPLING_DURATION",
                       {}, 0, max_seconds, true},
    setting_definition{"sampling_realtime", "KAIROS_SAMPLING_REALTIME", boolean, "false",
                       "sampling", "sample threads by elapsed real time (also sees waiting)"},
    setting_definition{"sampling_realtime_freq", "KAIROS_SAMPLING_REALTIME_FREQ", number, "",
                       "sampling", "real-time sampler frequency; empty = KAIROS_SAMPLING_FREQ", {},
                       0.001, max_frequency_hz, true},
    setting_definition{"sampling_realtime_delay", "KAIROS_SAMPLING_REALTIME_DELAY", number, "",
                       "sampling", "real-time sampler delay; empty = KAIROS_SAMPLING_DELAY", {}, 0,
                       max_seconds, true},
    setting_definition{"sampling_realtime_duration", "KAIROS_SAMPLING_REALTIME_DURATION", number,
                       "", "sampling",
                       "real-time sampler duration; empty = KAIROS_SAMPLING_DURATION", {}, 0,
                       max_seconds, true},
    setting_definition{"sampling_allocator_size", "KAIROS_SAMPLING_ALLOCATOR_SIZE", integer, "8",
                       "sampling", "live sampled threads one writer thread serves before another starts "
                       "(writers retire when idle)", {}, 1, 4096},
    setting_definition{"use_temporary_files", "KAIROS_USE_TEMPORARY_FILES", boolean, "true",
                       "sampling", "writer threads spill samples to temporary files (unnamed, O_TMPFILE; "
                       "ingested into the database every flush interval)"},
    // windows (docs/windows.md): nothing is collected outside them
    setting_definition{"trace_periods", "KAIROS_TRACE_PERIODS", text, "", "windows",
                       "when to collect: specs clock:delay:duration:repeat run one after another, "
                       "e.g. \"realtime:10:1:5 process_cputime:10:2:20\" (5 x: 10 s off, 1 s on; "
                       "then 20 x by CPU time); the clock may come last; clocks realtime, monotonic, "
                       "process_cputime, thread_cputime, instructions (10M); repeat 0: until exit",
                       {}, 0, 0, true, &check_periods},
    setting_definition{"trace_windows_file", "KAIROS_TRACE_WINDOWS_FILE", path, "", "windows",
                       "CSV of irregular windows, one clock,start,length a line (instructions,100M,10M), "
                       "counted from the process's start; they follow KAIROS_TRACE_PERIODS' windows",
                       {}, 0, 0, true, &check_windows_file},
    // gpu
    setting_definition{"gpu", "KAIROS_GPU", text, "auto", "gpu",
                       "GPU kernels, copies and API calls (HIP; CUDA through CUPTI): auto observes a GPU "
                       "runtime loaded in the program, off never wraps or loads anything",
                       "auto,off"},
    setting_definition{"gpu_stacks", "KAIROS_GPU_STACKS", boolean, "false", "gpu",
                       "also record the call stack of each GPU kernel launch and copy (2.6-4.7 us more per "
                       "call on an H100, where a launch costs about 4 us); off: its thread and call time"},
    // mpi (docs/mpi.md)
    setting_definition{"mpi", "KAIROS_MPI", text, "auto", "mpi",
                       "MPI ranks and calls: auto learns the rank from MPI_Init and records point-to-point "
                       "and collective calls where an MPI library is loaded, off never wraps anything "
                       "(the rank still comes from the launcher's environment)",
                       "auto,off"},
    // causal (docs/causal.md; kairos-causal sets them)
    setting_definition{"causal", "KAIROS_CAUSAL", boolean, "false", "causal",
                       "run causal experiments (virtual speedups) and record them; kairos-causal turns it on"},
    setting_definition{"causal_scope", "KAIROS_CAUSAL_SCOPE", text, "line", "causal",
                       "what an experiment speeds up: a source line, or a whole function", "line,function"},
    setting_definition{"causal_select", "KAIROS_CAUSAL_SELECT", text, "", "causal",
                       "only locations (\"file:line\", or a function's name) matching this regular "
                       "expression are sped up; empty: any location in scope, as often as it is sampled",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"causal_speedups", "KAIROS_CAUSAL_SPEEDUPS", text, "", "causal",
                       "speedups to try, percent (e.g. 0,25,50), one drawn per experiment; empty: 0..100 in "
                       "steps of 5 with 0 drawn 8 times in 28, as coz does",
                       {}, 0, 0, true, &check_speedups},
    setting_definition{"causal_include", "KAIROS_CAUSAL_INCLUDE", text, "", "causal",
                       "only code whose source file or function matches this regular expression is in scope",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"causal_exclude", "KAIROS_CAUSAL_EXCLUDE", text, "", "causal",
                       "leave out code whose source file or function matches this regular expression",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"causal_binaries", "KAIROS_CAUSAL_BINARIES", text, "", "causal",
                       "binaries in scope: those whose path matches this regular expression; empty: the main "
                       "program only",
                       {}, 0, 0, true, &check_regex},
    setting_definition{"causal_experiment", "KAIROS_CAUSAL_EXPERIMENT", number, "0.5", "causal",
                       "seconds an experiment lasts at first; doubled while a progress point sees fewer than 5 "
                       "visits in one (up to 16 times)",
                       {}, 0.01, 3600},
    // internal: set by kairos-run and the runtime to tie the processes of one launch together
    setting_definition{"launch_pid", "KAIROS_LAUNCH_PID", integer, "0", "internal",
                       "pid of the launched process (set by kairos-run); others are children", {},
                       0, 4194304},
    setting_definition{"launch_date", "KAIROS_LAUNCH_DATE", text, "", "internal",
                       "launch time shared by a launch's processes (%launch_date%)", {}, 0, 0,
                       true},
    setting_definition{"launch_id", "KAIROS_LAUNCH_ID", text, "", "internal",
                       "id shared by the ranks of one MPI launch, from the launcher's environment", {}, 0,
                       0, true},
    setting_definition{"exec_generation", "KAIROS_EXEC_GENERATION", text, "", "internal",
                       "PID:N, how many execs the process PID has gone through", {}, 0, 0, true},
};

// The enum names the rows in order; this catches a row added to one and not the other.
constexpr bool rows_match_names() {
  constexpr std::string_view names[] = {
      "enabled", "verbose", "config_file", "follow_children", "output_path", "output_formats",
      "flush_interval", "source_lines", "symbol_cache", "components", "instrument", "instrument_include",
      "instrument_exclude", "instrument_file_include", "instrument_file_exclude", "instrument_system",
      "instrument_min_duration", "sampling_freq", "sampling_delay", "sampling_duration",
      "sampling_cputime", "sampling_cputime_source", "sampling_cputime_freq",
      "sampling_cputime_delay", "sampling_cputime_duration", "sampling_realtime",
      "sampling_realtime_freq", "sampling_realtime_delay", "sampling_realtime_duration",
      "sampling_allocator_size", "use_temporary_files", "trace_periods", "trace_windows_file",
      "gpu", "gpu_stacks", "mpi", "causal", "causal_scope", "causal_select", "causal_speedups",
      "causal_include", "causal_exclude", "causal_binaries", "causal_experiment", "launch_pid", "launch_date", "launch_id",
      "exec_generation"};
  if (std::size(names) != definitions.size()) return false;
  for (std::size_t i = 0; i < definitions.size(); ++i)
    if (definitions[i].name != names[i]) return false;
  return static_cast<std::size_t>(setting::exec_generation) + 1 == definitions.size();
}
static_assert(rows_match_names(), "enum class setting (settings.hpp) and the table disagree");

}  // namespace

std::span<const setting_definition> setting_definitions() { return definitions; }

}  // namespace kairos::runtime
