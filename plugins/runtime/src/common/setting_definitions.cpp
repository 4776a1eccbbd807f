// The tables of every setting and every setting category: data only, with the compile-time checks
// that tie them to their enums. kairos-avail --settings prints them, kairos-avail --markdown
// prints docs/settings.md's tables from them (a test compares), the runtime and the tools read
// them.
#include <charconv>
#include <string>
#include <utility>

#include <kairos/components.hpp>
#include <kairos/plugins/database/formats.hpp>
#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/process_metrics.hpp>
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
  if (auto failure = check_path_pattern(text))
    return "a path whose keys are among " + std::string{accepted_path_keys()} + " (" + failure.text() + ")";
  return std::nullopt;
}

std::optional<std::string> check_periods(std::string_view text) {
  const auto periods = parse_periods(text);
  if (periods.has_value()) return std::nullopt;
  return "specs clock:delay:duration[:repeat] or delay:duration[:repeat][:clock], separated by spaces "
         "or commas (kairos-avail --settings shows examples); " +
         periods.failure().text();
}

std::optional<std::string> check_windows_file(std::string_view text) {
  const auto windows = load_windows_file(std::string{text});
  if (windows.has_value()) return std::nullopt;
  return "a CSV file of clock,start,length lines; " + windows.failure().text();
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
  if (!expression.failure()) return std::nullopt;
  return "a POSIX extended regular expression (" + expression.failure().text() + ")";
}

constexpr double max_frequency_hz = 100'000;
constexpr double max_seconds = 1e9;

// The spelling of enumerator `value`, from the compiler's name of this function (g++: "... [with
// auto value = kairos::runtime::setting::sampling_freq; ...]", clang: "... [value =
// kairos::runtime::setting::sampling_freq]"), or "" when `value` names no enumerator (both print
// a cast then: "(kairos::runtime::setting)48"). The tables below are checked against the enums'
// own names, so a name is typed once in the enum and once in its row, never in a third list.
template <auto value>
constexpr std::string_view enumerator_name() {
  const std::string_view signature = __PRETTY_FUNCTION__;
  const auto start = signature.find("value = ") + 8;
  auto spelled = signature.substr(start, signature.find_first_of(";]", start) - start);
  spelled.remove_prefix(spelled.rfind("::") + 2);
  for (const char c : spelled)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return {};
  return spelled;
}

// Row i of `rows` is named as enumerator i of Enum, and Enum has no enumerator past the rows.
template <class Enum, class Row, std::size_t... index>
constexpr bool rows_name_enumerators(const Row& rows, std::index_sequence<index...>) {
  return ((rows[index].name == enumerator_name<static_cast<Enum>(index)>()) && ...) &&
         enumerator_name<static_cast<Enum>(sizeof...(index))>().empty();
}

template <class Enum, class Row, std::size_t count>
constexpr bool rows_name_enumerators(const Row (&rows)[count]) {
  return rows_name_enumerators<Enum>(rows, std::make_index_sequence<count>{});
}

using enum setting_category;

// What a rejected value of each category switches off, in setting_category's order.
constexpr setting_category_definition categories[] = {
    {.category = general, .name = "general", .when_rejected = "kairos is disabled for this run", .stops_kairos = true},
    {.category = output, .name = "output", .when_rejected = "kairos is disabled for this run", .stops_kairos = true},
    {.category = regions, .name = "regions", .when_rejected = "kairos is disabled for this run", .stops_kairos = true},
    {.category = instrument,
     .name = "instrument",
     .when_rejected = "instrumented functions are not recorded",
     .stops_kairos = false},
    {.category = sampling, .name = "sampling", .when_rejected = "sampling is disabled", .stops_kairos = false},
    {.category = windows, .name = "windows", .when_rejected = "kairos is disabled for this run", .stops_kairos = true},
    {.category = gpu, .name = "gpu", .when_rejected = "GPU work is not observed", .stops_kairos = false},
    {.category = mpi, .name = "mpi", .when_rejected = "MPI calls are not recorded", .stops_kairos = false},
    {.category = process_sampling,
     .name = "process_sampling",
     .when_rejected = "the process is not sampled",
     .stops_kairos = false},
    {.category = annotations,
     .name = "annotations",
     .when_rejected = "OpenMP, NVTX and Kokkos annotations are not recorded",
     .stops_kairos = false},
    {.category = causal, .name = "causal", .when_rejected = "no causal experiments run", .stops_kairos = false},
    {.category = internal, .name = "internal", .when_rejected = "the value is ignored", .stops_kairos = false},
};

constexpr bool categories_in_order() {
  for (std::size_t i = 0; i < std::size(categories); ++i)
    if (categories[i].category != static_cast<setting_category>(i)) return false;
  return rows_name_enumerators<setting_category>(categories);
}
static_assert(categories_in_order(), "enum class setting_category and the categories disagree");

// A rejected value's line says kairos is off exactly when it is (instrument's said so, and
// kairos ran on).
constexpr bool lines_tell_the_truth() {
  for (const auto& category : categories)
    if ((category.when_rejected == "kairos is disabled for this run") != category.stops_kairos) return false;
  return true;
}
static_assert(lines_tell_the_truth(), "a category's when_rejected disagrees with its stops_kairos");

// One row per setting, every field named; a field left out keeps its default (no choices, no
// range, not empty, no check beyond the type's).
constexpr setting_definition definitions[] = {
    // general
    {.name = "enabled",
     .variable = "KAIROS_ENABLED",
     .type = boolean,
     .default_value = "true",
     .category = general,
     .description = "profile the program at all; false makes libkairos.so do nothing"},
    {.name = "verbose",
     .variable = "KAIROS_VERBOSE",
     .type = integer,
     .default_value = "0",
     .category = general,
     .description = "0: only problems and the exit summary; 1: what kairos does, and what its "
                    "parts cost the run; 2: per thread",
     .minimum = 0,
     .maximum = 3},
    {.name = "config_file",
     .variable = "KAIROS_CONFIG_FILE",
     .type = path,
     .default_value = "",
     .category = general,
     .description = "JSON file of settings (keys or variables to values), below the environment "
                    "in priority"},
    {.name = "follow_children",
     .variable = "KAIROS_FOLLOW_CHILDREN",
     .type = boolean,
     .default_value = "false",
     .category = general,
     .description = "profile child processes too (fork, spawn), each writing its own output; "
                    "off: children run without kairos"},
    // output
    {.name = "output_path",
     .variable = "KAIROS_OUTPUT_PATH",
     .type = path,
     .default_value = "kairos-output/%exe%-%pid%",
     .category = output,
     .description = "file stem of each process's outputs (extension added per format); keys %pid% "
                    "%ppid% %hostname% %exe% %launch_date% %launch_id% %rank% %size% %env{NAME}%; "
                    "under an MPI launch of several ranks the default is "
                    "kairos-output/%exe%-%launch_date%-%launch_id%/rank%rank%",
     .check = &check_output_path},
    {.name = "output_formats",
     .variable = "KAIROS_OUTPUT_FORMATS",
     .type = list,
     .default_value = database::default_exit_format_names,
     .category = output,
     .description = database::exit_format_descriptions,
     .choices = database::exit_format_names},
    {.name = "trace_max_bytes",
     .variable = "KAIROS_TRACE_MAX_BYTES",
     .type = integer,
     .default_value = "134217728",
     .category = output,
     .description = "size of the Chrome trace (trace format) past which it adds no more samples "
                    "(regions and the rest stay whole) and names the Perfetto trace (perfetto "
                    "format), which holds them all in tens of bytes each",
     .minimum = 1024,
     .maximum = 1e15},
    {.name = "flush_interval",
     .variable = "KAIROS_FLUSH_INTERVAL",
     .type = number,
     .default_value = "1",
     .category = output,
     .description = "seconds between commits of the profile database (what a killed program "
                    "leaves is complete up to the last one)",
     .minimum = 0.01,
     .maximum = 3600},
    {.name = "source_lines",
     .variable = "KAIROS_SOURCE_LINES",
     .type = text,
     .default_value = "own",
     .category = output,
     .description = "file:line of the sampled frames in the database: own (from the debug "
                    "information a program or library carries itself, as a -g build does), all "
                    "(also separate debug files under /usr/lib/debug, such as Debian's -dbgsym "
                    "packages: about 100 ms each to decompress at the end of the run), off "
                    "(functions only)",
     .choices = "own,all,off"},
    {.name = "symbol_cache",
     .variable = "KAIROS_SYMBOL_CACHE",
     .type = path,
     .default_value = "",
     .category = output,
     .description = "directory where symbolized addresses are kept from one run to the next, by "
                    "each module's build id, so a run whose addresses were seen before does not "
                    "read symbol or line tables again; empty: $XDG_CACHE_HOME/kairos/symbols, "
                    "else ~/.cache/kairos/symbols; off: no cache"},
    // regions
    {.name = "components",
     .variable = "KAIROS_COMPONENTS",
     .type = list,
     .default_value = "wall_clock",
     .category = regions,
     .description = "what each user-API region measures, by component name",
     .choices = component_names},
    // instrument (docs/instrumentation.md)
    {.name = "instrument",
     .variable = "KAIROS_INSTRUMENT",
     .type = boolean,
     .default_value = "true",
     .category = instrument,
     .description = "record the calls of the functions a program compiled with "
                    "-finstrument-functions (CMake: kairos_instrument) as regions; off: the "
                    "hooks return at once"},
    {.name = "instrument_include",
     .variable = "KAIROS_INSTRUMENT_INCLUDE",
     .type = text,
     .default_value = "",
     .category = instrument,
     .description = "only functions whose demangled name matches this POSIX extended regular "
                    "expression (searched, as grep -E does); empty: all",
     .check = &check_regex},
    {.name = "instrument_exclude",
     .variable = "KAIROS_INSTRUMENT_EXCLUDE",
     .type = text,
     .default_value = "",
     .category = instrument,
     .description = "leave out functions whose demangled name matches this regular expression",
     .check = &check_regex},
    {.name = "instrument_file_include",
     .variable = "KAIROS_INSTRUMENT_FILE_INCLUDE",
     .type = text,
     .default_value = "",
     .category = instrument,
     .description = "only functions whose source file (from the debug information) matches this "
                    "regular expression",
     .check = &check_regex},
    {.name = "instrument_file_exclude",
     .variable = "KAIROS_INSTRUMENT_FILE_EXCLUDE",
     .type = text,
     .default_value = "",
     .category = instrument,
     .description = "leave out functions whose source file matches this regular expression",
     .check = &check_regex},
    {.name = "instrument_system",
     .variable = "KAIROS_INSTRUMENT_SYSTEM",
     .type = boolean,
     .default_value = "false",
     .category = instrument,
     .description = "also the standard library's functions (std::, __gnu_cxx::, operator "
                    "new/delete) and those from /usr/include; off: they stay in their callers' "
                    "time"},
    {.name = "instrument_min_duration",
     .variable = "KAIROS_INSTRUMENT_MIN_DURATION",
     .type = number,
     .default_value = "0.00001",
     .category = instrument,
     .description = "seconds: a call shorter than this gets no row and stays in its caller's time "
                    "(0: every call a row; a row costs about 1 us, so at 10 us rows cost at most "
                    "a tenth of the time they describe)",
     .minimum = 0,
     .maximum = max_seconds},
    // sampling (registered for the sampler; common values, then per-sampler overrides)
    {.name = "sampling_freq",
     .variable = "KAIROS_SAMPLING_FREQ",
     .type = number,
     .default_value = "300",
     .category = sampling,
     .description = "samples per second of each sampled thread",
     .minimum = 0.001,
     .maximum = max_frequency_hz},
    {.name = "sampling_delay",
     .variable = "KAIROS_SAMPLING_DELAY",
     .type = number,
     .default_value = "0.5",
     .category = sampling,
     .description = "seconds after start before sampling begins",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_duration",
     .variable = "KAIROS_SAMPLING_DURATION",
     .type = number,
     .default_value = "0",
     .category = sampling,
     .description = "seconds of sampling after the delay; 0 = until exit",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_cputime",
     .variable = "KAIROS_SAMPLING_CPUTIME",
     .type = boolean,
     .default_value = "true",
     .category = sampling,
     .description = "sample threads by the CPU time they use"},
    {.name = "sampling_cputime_source",
     .variable = "KAIROS_SAMPLING_CPUTIME_SOURCE",
     .type = text,
     .default_value = "auto",
     .category = sampling,
     .description = "CPU-time sampler's clock; each charges system-call time to the call: "
                    "auto (ring), ring (perf task-clock samples in a ring buffer, no signal, "
                    "where perf_event_open lets it count the kernel, else timer), perf (task-clock "
                    "overflow signal, same condition), timer (POSIX per-thread CPU timer, "
                    "tick-limited)",
     .choices = "auto,ring,perf,timer"},
    {.name = "sampling_python",
     .variable = "KAIROS_SAMPLING_PYTHON",
     .type = boolean,
     .default_value = "true",
     .category = sampling,
     .description = "read CPython's frames (3.11 to 3.13) in each sample and put them in place of the "
                    "interpreter's eval loop; such a program's threads are then sampled with the perf "
                    "signal under auto (a ring's samples are read after the thread moved on)"},
    {.name = "sampling_cputime_freq",
     .variable = "KAIROS_SAMPLING_CPUTIME_FREQ",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "CPU-time sampler frequency; empty = KAIROS_SAMPLING_FREQ",
     .minimum = 0.001,
     .maximum = max_frequency_hz},
    {.name = "sampling_cputime_delay",
     .variable = "KAIROS_SAMPLING_CPUTIME_DELAY",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "CPU-time sampler delay; empty = KAIROS_SAMPLING_DELAY",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_cputime_duration",
     .variable = "KAIROS_SAMPLING_CPUTIME_DURATION",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "CPU-time sampler duration; empty = KAIROS_SAMPLING_DURATION",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_realtime",
     .variable = "KAIROS_SAMPLING_REALTIME",
     .type = boolean,
     .default_value = "false",
     .category = sampling,
     .description = "sample threads by elapsed real time (also sees waiting)"},
    {.name = "sampling_realtime_freq",
     .variable = "KAIROS_SAMPLING_REALTIME_FREQ",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "real-time sampler frequency; empty = KAIROS_SAMPLING_FREQ",
     .minimum = 0.001,
     .maximum = max_frequency_hz},
    {.name = "sampling_realtime_delay",
     .variable = "KAIROS_SAMPLING_REALTIME_DELAY",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "real-time sampler delay; empty = KAIROS_SAMPLING_DELAY",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_realtime_duration",
     .variable = "KAIROS_SAMPLING_REALTIME_DURATION",
     .type = number,
     .default_value = "",
     .category = sampling,
     .description = "real-time sampler duration; empty = KAIROS_SAMPLING_DURATION",
     .minimum = 0,
     .maximum = max_seconds},
    {.name = "sampling_allocator_size",
     .variable = "KAIROS_SAMPLING_ALLOCATOR_SIZE",
     .type = integer,
     .default_value = "8",
     .category = sampling,
     .description = "live sampled threads one writer thread serves before another starts (writers "
                    "retire when idle)",
     .minimum = 1,
     .maximum = 4096},
    {.name = "use_temporary_files",
     .variable = "KAIROS_USE_TEMPORARY_FILES",
     .type = boolean,
     .default_value = "true",
     .category = sampling,
     .description = "writer threads spill samples to temporary files (unnamed, O_TMPFILE; "
                    "ingested into the database every flush interval)"},
    // windows (docs/windows.md): nothing is collected outside them
    {.name = "trace_periods",
     .variable = "KAIROS_TRACE_PERIODS",
     .type = text,
     .default_value = "",
     .category = windows,
     .description = "when to collect: specs clock:delay:duration:repeat run one after another, "
                    "e.g. \"realtime:10:1:5 process_cputime:10:2:20\" (5 x: 10 s off, 1 s on; "
                    "then 20 x by CPU time); the clock may come last; clocks realtime, monotonic, "
                    "process_cputime, thread_cputime, instructions (10M); repeat 0: until exit",
     .check = &check_periods},
    {.name = "trace_windows_file",
     .variable = "KAIROS_TRACE_WINDOWS_FILE",
     .type = path,
     .default_value = "",
     .category = windows,
     .description = "CSV of irregular windows, one clock,start,length a line "
                    "(instructions,100M,10M), counted from the process's start; they follow "
                    "KAIROS_TRACE_PERIODS' windows",
     .check = &check_windows_file},
    // gpu
    {.name = "gpu",
     .variable = "KAIROS_GPU",
     .type = text,
     .default_value = "auto",
     .category = gpu,
     .description = "GPU kernels, copies and API calls (HIP; CUDA through CUPTI): auto observes a "
                    "GPU runtime loaded in the program, off never wraps or loads anything",
     .choices = "auto,off"},
    {.name = "gpu_stacks",
     .variable = "KAIROS_GPU_STACKS",
     .type = boolean,
     .default_value = "false",
     .category = gpu,
     .description = "also record the call stack of each GPU kernel launch and copy (2.6-4.7 us "
                    "more per call on an H100, where a launch costs about 4 us); off: its thread "
                    "and call time"},
    // mpi (docs/mpi.md)
    {.name = "mpi",
     .variable = "KAIROS_MPI",
     .type = text,
     .default_value = "auto",
     .category = mpi,
     .description = "MPI ranks and calls: auto learns the rank from MPI_Init and records "
                    "point-to-point and collective calls where an MPI library is loaded, off "
                    "never wraps anything (the rank still comes from the launcher's environment)",
     .choices = "auto,off"},
    // process sampling (docs/runtime.md, "Process sampling")
    {.name = "process_sampling",
     .variable = "KAIROS_PROCESS_SAMPLING",
     .type = boolean,
     .default_value = "on",
     .category = process_sampling,
     .description = "sample the process on a thread of kairos's own: memory, CPU use in total and per "
                    "thread, context switches, page faults, I/O bytes, the frequency of its cores, "
                    "GPU power, temperature, utilization and memory (kairos-avail --process-metrics "
                    "says what this machine offers)"},
    {.name = "process_sampling_period",
     .variable = "KAIROS_PROCESS_SAMPLING_PERIOD",
     .type = number,
     .default_value = "0.05",
     .category = process_sampling,
     .description = "seconds between two samples of the process",
     .minimum = 0.005,
     .maximum = 3600},
    {.name = "process_sampling_metrics",
     .variable = "KAIROS_PROCESS_SAMPLING_METRICS",
     .type = list,
     .default_value = "all",
     .category = process_sampling,
     .description = "what process sampling reads, by metric name; all: every one this machine offers",
     .choices = process_metric_choices},
    {.name = "process_sampling_cpu_root",
     .variable = "KAIROS_PROCESS_SAMPLING_CPU_ROOT",
     .type = path,
     .default_value = "/sys/devices/system/cpu",
     .category = process_sampling,
     .description = "directory of the cores' cpu<N>/cpufreq/scaling_cur_freq files (the kernel's; "
                    "another one for tests)"},
    // annotations (docs/openmp.md)
    {.name = "openmp",
     .variable = "KAIROS_OPENMP",
     .type = text,
     .default_value = "auto",
     .category = annotations,
     .description = "OpenMP regions, waits and each thread's work and wait per parallel region: auto "
                    "is libomp's OMPT tool and wraps libgomp's entry points where it is loaded, off "
                    "neither (a program that is not OpenMP pays nothing either way)",
     .choices = "auto,off"},
    {.name = "annotations",
     .variable = "KAIROS_ANNOTATIONS",
     .type = list,
     .default_value = "nvtx,kokkos,roctx",
     .category = annotations,
     .description = "the annotations for other tools that become kairos regions: NVTX ranges and "
                    "marks (kairos-run sets NVTX_INJECTION64_PATH where the program carries NVTX), "
                    "Kokkos Tools' kernels and regions (KOKKOS_TOOLS_LIBS, or Kokkos 3's KOKKOS_PROFILE_LIBRARY, "
                    "where it uses Kokkos), "
                    "ROCTx ranges and marks (its functions wrapped where libroctx64 is loaded)",
     .choices = "nvtx,kokkos,roctx"},
    // causal (docs/causal.md; kairos-causal sets them)
    {.name = "causal",
     .variable = "KAIROS_CAUSAL",
     .type = boolean,
     .default_value = "false",
     .category = causal,
     .description = "run causal experiments (virtual speedups) and record them; kairos-causal "
                    "turns it on"},
    {.name = "causal_scope",
     .variable = "KAIROS_CAUSAL_SCOPE",
     .type = text,
     .default_value = "line",
     .category = causal,
     .description = "what an experiment speeds up: a source line, or a whole function",
     .choices = "line,function"},
    {.name = "causal_select",
     .variable = "KAIROS_CAUSAL_SELECT",
     .type = text,
     .default_value = "",
     .category = causal,
     .description = "only locations (\"file:line\", or a function's name) matching this regular "
                    "expression are sped up; empty: any location in scope, as often as it is "
                    "sampled",
     .check = &check_regex},
    {.name = "causal_speedups",
     .variable = "KAIROS_CAUSAL_SPEEDUPS",
     .type = text,
     .default_value = "",
     .category = causal,
     .description = "speedups to try, percent (e.g. 0,25,50), one drawn per experiment; empty: "
                    "0..100 in steps of 5 with 0 drawn 8 times in 28, as coz does",
     .check = &check_speedups},
    {.name = "causal_include",
     .variable = "KAIROS_CAUSAL_INCLUDE",
     .type = text,
     .default_value = "",
     .category = causal,
     .description = "only code whose source file or function matches this regular expression is "
                    "in scope",
     .check = &check_regex},
    {.name = "causal_exclude",
     .variable = "KAIROS_CAUSAL_EXCLUDE",
     .type = text,
     .default_value = "",
     .category = causal,
     .description = "leave out code whose source file or function matches this regular expression",
     .check = &check_regex},
    {.name = "causal_binaries",
     .variable = "KAIROS_CAUSAL_BINARIES",
     .type = text,
     .default_value = "",
     .category = causal,
     .description = "binaries in scope: those whose path matches this regular expression; empty: "
                    "the main program only",
     .check = &check_regex},
    {.name = "causal_experiment",
     .variable = "KAIROS_CAUSAL_EXPERIMENT",
     .type = number,
     .default_value = "0.5",
     .category = causal,
     .description = "seconds an experiment lasts at first; doubled while a progress point sees "
                    "fewer than 5 visits in one (up to 16 times)",
     .minimum = 0.01,
     .maximum = 3600},
    // internal: set by kairos-run and the runtime to tie the processes of one launch together
    {.name = "launch_pid",
     .variable = "KAIROS_LAUNCH_PID",
     .type = integer,
     .default_value = "0",
     .category = internal,
     .description = "pid of the launched process (set by kairos-run); others are children",
     .minimum = 0,
     .maximum = 4194304},
    {.name = "launch_date",
     .variable = "KAIROS_LAUNCH_DATE",
     .type = text,
     .default_value = "",
     .category = internal,
     .description = "launch time shared by a launch's processes (%launch_date%)"},
    {.name = "launch_id",
     .variable = "KAIROS_LAUNCH_ID",
     .type = text,
     .default_value = "",
     .category = internal,
     .description = "id shared by the ranks of one MPI launch, from the launcher's environment"},
    {.name = "exec_generation",
     .variable = "KAIROS_EXEC_GENERATION",
     .type = text,
     .default_value = "",
     .category = internal,
     .description = "PID:N:STEM, how many execs the process PID has gone through and the stem of its exec "
                    "chain's profile"},
};

// The Chrome trace's writer falls back on the same limit for a database that does not say it.
constexpr bool trace_limit_agrees() {
  std::string_view text = definitions[static_cast<std::size_t>(setting::trace_max_bytes)].default_value;
  std::int64_t value = 0;
  for (const char digit : text) value = value * 10 + (digit - '0');
  return value == database::default_trace_max_bytes;
}
static_assert(trace_limit_agrees(), "KAIROS_TRACE_MAX_BYTES' default and database::default_trace_max_bytes disagree");

// Row i is enumerator i of enum class setting (settings.hpp), the name code reads it by; and its
// variable is the name in capitals after "KAIROS_", so a name is never spelt two ways.
constexpr bool variable_is_named_after(const setting_definition& row) {
  constexpr std::string_view prefix = "KAIROS_";
  if (row.variable.size() != prefix.size() + row.name.size() || !row.variable.starts_with(prefix)) return false;
  for (std::size_t i = 0; i < row.name.size(); ++i) {
    const char c = row.name[i];
    const char upper = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    if (row.variable[prefix.size() + i] != upper) return false;
  }
  return true;
}

constexpr bool rows_match_names() {
  for (const auto& row : definitions)
    if (!variable_is_named_after(row)) return false;
  return rows_name_enumerators<setting>(definitions);
}
static_assert(rows_match_names(), "enum class setting (settings.hpp) and the table disagree");

}  // namespace

std::span<const setting_definition> setting_definitions() { return definitions; }

const setting_definition& definition_of(setting which) { return definitions[static_cast<std::size_t>(which)]; }

std::span<const setting_category_definition> setting_categories() { return categories; }

const setting_category_definition& definition_of(setting_category category) {
  return categories[static_cast<std::size_t>(category)];
}

}  // namespace kairos::runtime
