// Init before main, finalize once on every path, fork and exec (docs/runtime.md tells the story).
//
// Init: a constructor of libkairos.so. A preloaded library's constructors run after those of
// the libraries it needs (libc, libstdc++) and before the program's own constructors and main,
// so every static object of the program and every thread it makes is seen.
//
// Finalize, exactly once, whichever way the process ends:
//   return from main, exit() from any thread: an atexit handler registered by the constructor. It
//     was registered before the program's own, so it runs after them, on the exiting thread.
//   _exit/_Exit: the wrapper, before the real one.
//   SIGINT, SIGTERM at their default: the service thread (termination.hpp).
//   exec: what this image collected goes into the database, which the next image goes on with
//     (one profile per exec chain, docs/runtime.md); the next image writes the outputs.
//
// fork: the prepare handler takes every stage's lock (in the order below) and builds what a
// child needs; the child handler runs only async-signal-safe code (another thread of the parent
// may have held any libc lock at the fork: __exit_funcs_lock, the environment's); what a followed
// child must build (its database, its stem) is built later, in ordinary code, on first use.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>
#include <kairos/runtime/time_windows.hpp>

#include "common/proc_file.hpp"
#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/annotations/openmp.hpp"
#include "preload/annotations/roctx.hpp"
#include "preload/causal/blocking_calls.hpp"
#include "preload/causal/causal.hpp"
#include "preload/gpu/gpu_activity.hpp"
#include "preload/mpi/mpi_calls.hpp"
#include "preload/outputs/report.hpp"
#include "preload/pipeline/delivery.hpp"
#include "preload/process/children.hpp"
#include "preload/process/lifecycle.hpp"
#include "preload/process/stages.hpp"
#include "preload/process/termination.hpp"
#include "preload/process_sampling/process_sampling.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/regions.hpp"
#include "preload/sampling/sample_writer.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/sink/profile_database.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/file_size_signal.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/support/signal_name.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/windows.hpp"

extern char** environ;

namespace kairos::runtime {
namespace {

constexpr std::chrono::milliseconds user_api_wait{200};
constexpr int stem_suffixes_tried = 1000;
constexpr std::int64_t unsampled_worth_saying_ns = 20'000'000;
constexpr const char* mpi_default_output_path = "kairos-output/%exe%-%launch_date%-%launch_id%/rank%rank%";

std::atomic<runtime_state> state{runtime_state::loading};

struct process_identity {
  pid_t pid = 0;
  bool launched = false;   // the process kairos-run started (possibly after execs)
  long generation = 0;     // execs this process has gone through before this image
  std::string chain_stem;  // the stem the earlier images of this exec chain write under ("": none)
};

// Set once by the constructor, then read. On the heap and never destroyed: finalize may run after
// static destructors, and the constructor may run before this file's dynamic initializers.
struct runtime_globals {
  process_identity identity;
  settings values;
  std::vector<std::string> formats;
  std::string command_line;
  // The stem this process writes under: claimed (no output of that name exists) on first use.
  pid_t stem_pid = 0;
  std::string stem;
  bool stopped_for_exec = false;   // the stages stopped before an exec (that failed: the image went on)
  std::string failed_exec;         // why that exec failed
  bool windows_planned = false;    // KAIROS_TRACE_PERIODS or KAIROS_TRACE_WINDOWS_FILE
  bool causal_wanted = false;      // KAIROS_CAUSAL: experiments run (docs/causal.md)
  std::string sampling_off;        // why sampling never ran (empty: it was started)
  bool sampling_off_said = false;  // by the refused value's own line, at the start
  std::int64_t started_ns = 0;     // steady clock, at init
  launch_identity launch;          // the MPI launch this process is a rank of, if any
};
runtime_globals* globals = nullptr;

std::atomic<bool> finalize_started{false};
std::atomic<bool> finalize_done{false};
std::atomic<pid_t> finalizing_thread{0};
std::atomic<bool> database_left_for_exec{false};

std::string read_command_line() {
  auto text = read_proc_file("/proc/self/cmdline").value_or("");
  for (auto& c : text)
    if (c == '\0') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// "PID:N[:STEM]" → N and STEM when PID is this process, else 0 and "".
std::pair<long, std::string> generation_of(pid_t pid) {
  const auto value = environment_value(setting::exec_generation);
  const auto colon = value.find(':');
  if (colon == std::string::npos || value.substr(0, colon) != std::to_string(pid)) return {0, {}};
  char* end = nullptr;
  const long generation = std::strtol(value.c_str() + colon + 1, &end, 10);
  return {generation, *end == ':' ? std::string{end + 1} : std::string{}};
}

std::string plural(std::uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

// KAIROS_OUTPUT_PATH expanded for this image, made absolute.
std::string stem_base() {
  auto values = path_values::of_this_process();
  if (auto date = kairos_variable(setting::launch_date); date && !date->empty()) values.launch_date = *date;
  auto expanded = expand_path(globals->values.text(setting::output_path), values);
  auto base = expanded.has_value() ? std::move(expanded).value() : std::string{};
  if (base.empty() || base.back() == '/') {
    // "%env{UNSET}%", "dir/": no file name; never hidden files named ".db", ".txt".
    report(fmt::format("KAIROS_OUTPUT_PATH=\"{}\" gives no file name; writing {}{}-{}.* instead",
                       globals->values.text(setting::output_path), base, values.exe, values.pid));
    base += fmt::format("{}-{}", values.exe, values.pid);
  }
  std::error_code error;
  if (!base.empty() && base.front() != '/') base = (std::filesystem::current_path(error) / base).string();
  return base;
}

// `base`, or base-1, base-2, ...: the first that names no output.
std::string free_stem(const std::string& base) {
  auto formats = globals->formats;
  formats.push_back("db");
  auto stem = base;
  for (int suffix = 1; suffix <= stem_suffixes_tried && !stem_is_free(stem, formats); ++suffix)
    stem = fmt::format("{}-{}", base, suffix);
  return stem;
}

// The output stem of this process (a fork child computes its own): KAIROS_OUTPUT_PATH expanded,
// made absolute, with "-1", "-2", ... appended when files of that name exist: kairos never
// overwrites a file.
const std::string& claimed_stem() {
  if (globals->stem_pid == getpid()) return globals->stem;
  globals->stem_pid = getpid();
  // The images of an exec chain write one profile, under the stem the first of them claimed.
  if (!globals->identity.chain_stem.empty() && globals->identity.pid == getpid()) {
    globals->stem = globals->identity.chain_stem;
    return globals->stem;
  }
  globals->stem = free_stem(stem_base());
  return globals->stem;
}

std::string database_path_of_this_process() { return claimed_stem() + ".db"; }

bool wants_format(std::string_view format) {
  for (const auto& wanted : globals->formats)
    if (wanted == format) return true;
  return false;
}

void remove_database_files(const std::string& path) {
  std::error_code error;
  for (const char* suffix : {"", "-journal"}) std::filesystem::remove(path + suffix, error);
}

std::size_t program_threads() {
  std::size_t count = 0;
  threads().for_each([&](const thread_record& record) { count += !record.kairos_owned; });
  return count;
}

// What was lost, for the summary line and the database's metadata.
struct losses {
  std::uint64_t samples = 0;      // sample buffers full
  std::uint64_t region_rows = 0;  // the logs of regions and instrumented calls full
  std::uint64_t rows = 0;         // database inserts that failed
  std::int64_t unsampled_cpu_ns = 0;
  std::uint64_t threads_blocking = 0;
  std::uint64_t gpu_records = 0;  // dropped by the GPU runtime (CUPTI's buffers full)
  std::uint64_t mpi_calls = 0;    // a thread's MPI call log full
  std::int64_t lost_cpu_ns = 0;   // what the lost samples stood for
};

// MPI_Init's rank and size, else the launcher's; none outside a launch.
std::optional<mpi_world> mpi_rank_and_size() {
  if (auto world = mpi_world_from_mpi()) return world;
  const auto& launch = globals->launch;
  if (!launch.rank) return std::nullopt;
  return mpi_world{*launch.rank, launch.size.value_or(1)};
}

// The variable that gives a sampler its value of a sampling setting (its own, else the common one),
// and the value.
std::pair<std::string_view, std::string> sampler_value(setting own, setting common) {
  const auto& values = globals->values;
  const auto& chosen = values.text(own).empty() ? values.at(common) : values.at(own);
  return {chosen.definition->variable, chosen.text};
}

std::string why_nothing_was_recorded() {
  if (!globals->sampling_off.empty()) return globals->sampling_off;
  if (globals->windows_planned) {
    const auto windows = windows_totals();
    if (windows.opened == 0) return "no time window opened before the end";
    return fmt::format("{} opened; nothing ran in them", plural(windows.opened, "time window"));
  }
  const auto& values = globals->values;
  const bool cpu = values.boolean(setting::sampling_cputime);
  const auto [delay_variable, delay] = cpu ? sampler_value(setting::sampling_cputime_delay, setting::sampling_delay)
                                           : sampler_value(setting::sampling_realtime_delay, setting::sampling_delay);
  const double ran_s = static_cast<double>(steady_now_ns() - globals->started_ns) * 1e-9;
  if (ran_s < std::strtod(delay.c_str(), nullptr))
    return fmt::format("the program ended {:.2f} s after its start, before sampling began ({}={} s)", ran_s,
                       delay_variable, delay);
  if (!cpu)
    return fmt::format("sampling by real time from {}={} s saw no thread of the program", delay_variable, delay);
  timespec used{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  const double cpu_ms = static_cast<double>(to_ns(used)) * 1e-6;
  const auto [frequency_variable, frequency] = sampler_value(setting::sampling_cputime_freq, setting::sampling_freq);
  return fmt::format(
      "no thread used a sampling period of CPU time while sampled (one sample per {:.3g} ms "
      "of CPU time, {}={}; the process used {:.3g} ms in all, kairos's start included)",
      1e3 / std::strtod(frequency.c_str(), nullptr), frequency_variable, frequency, cpu_ms);
}

std::string describe(const losses& lost, int signal_number) {
  std::string text;
  if (globals->windows_planned) {
    const auto windows = windows_totals();
    text += fmt::format("; {} opened", plural(windows.opened, "time window"));
    if (windows.skipped) text += fmt::format(", {} skipped (their time had passed)", windows.skipped);
  }
  if (lost.samples)
    text += fmt::format("; {} lost ({:.3f} s of CPU time; the writers fell behind)", plural(lost.samples, "sample"),
                        static_cast<double>(lost.lost_cpu_ns) * 1e-9);
  if (lost.region_rows)
    text += fmt::format("; {} of regions and instrumented calls lost (the database fell behind)",
                        plural(lost.region_rows, "row"));
  if (lost.rows) text += fmt::format("; {} could not be written", plural(lost.rows, "database row"));
  if (lost.gpu_records)
    text += fmt::format("; {} dropped by the GPU runtime", plural(lost.gpu_records, "GPU activity record"));
  if (lost.mpi_calls)
    text += fmt::format("; {} not recorded (a thread's log was full)", plural(lost.mpi_calls, "MPI call"));
  // Shells block every signal for a moment around their critical sections: only a stretch worth
  // at least two sampling periods is worth a sentence (the exact figure is in the database).
  if (lost.unsampled_cpu_ns >= unsampled_worth_saying_ns)
    text += fmt::format("; {} blocked the sampling signal ({}) for {:.3f} s of CPU time, not sampled",
                        plural(lost.threads_blocking, "thread"), signal_name(signal_number),
                        static_cast<double>(lost.unsampled_cpu_ns) / 1e9);
  return text;
}

// "; 2 child processes not profiled used 2.310 s of CPU time (gzip 2.301 s, sh 0.009 s): ...", over
// the images of the exec chain; "" when none ran.
std::string children_text(std::int64_t program_cpu_ns) {
  namespace key = database::metadata_key;
  auto children = unprofiled_children_now();
  std::istringstream earlier{earlier_images_metadata(key::children_unprofiled_by_name)};
  std::string name, processes, cpu_ns;
  while (std::getline(earlier, name, '\t') && std::getline(earlier, processes, '\t') && std::getline(earlier, cpu_ns)) {
    const auto group = std::ranges::find(children.by_name, name, &child_group::name);
    auto& merged = group != children.by_name.end() ? *group : children.by_name.emplace_back(child_group{name});
    merged.processes += std::stoull(processes);
    merged.cpu_ns += std::stoll(cpu_ns);
    children.processes += std::stoull(processes);
    children.cpu_ns += std::stoll(cpu_ns);
  }
  if (children.by_name.empty()) return {};
  std::ranges::stable_sort(children.by_name, std::greater{}, &child_group::cpu_ns);
  constexpr std::size_t named = 3;
  std::string names;
  for (std::size_t i = 0; i < std::min(named, children.by_name.size()); ++i)
    names += fmt::format("{}{} {:.3f} s", i ? ", " : "", children.by_name[i].name,
                         static_cast<double>(children.by_name[i].cpu_ns) * 1e-9);
  if (children.by_name.size() > named) names += fmt::format(", {} more", children.by_name.size() - named);
  const auto share = program_cpu_ns > 0 ? fmt::format(", {:.0f}% of the CPU time of the program and its children",
                                                      100.0 * static_cast<double>(children.cpu_ns) /
                                                          static_cast<double>(children.cpu_ns + program_cpu_ns))
                                        : std::string{};
  const auto count = children.processes == 0   ? std::string{"child processes"}
                     : children.processes == 1 ? std::string{"1 child process"}
                                               : fmt::format("{} child processes", children.processes);
  return fmt::format("; {} not profiled used {:.3f} s of CPU time{} ({}): kairos-run --follow-children profiles them",
                     count, static_cast<double>(children.cpu_ns) * 1e-9, share, names);
}

// ", N causal experiments", and why there are none when there are none.
std::string causal_summary_text(const causal_summary& causal) {
  if (!globals->causal_wanted) return {};
  if (causal.experiments > 0) return ", " + plural(causal.experiments, "causal experiment");
  if (causal.experiments_too_few_visits > 0)
    return fmt::format(
        ", no causal experiment kept ({} saw a progress point fewer than 5 times: a longer run, "
        "or a longer KAIROS_CAUSAL_EXPERIMENT)",
        causal.experiments_too_few_visits);
  switch (causal.idle) {
    case causal_idle::nothing_selected:
      return fmt::format(", no causal experiment (no sampled location matched KAIROS_CAUSAL_SELECT=\"{}\")",
                         globals->values.text(setting::causal_select));
    case causal_idle::no_progress_point:
      return ", no causal experiment (no progress point was visited: add kairos_progress(\"name\") where work "
             "completes)";
    default:
      return ", no causal experiment (no sample landed in the scope: see KAIROS_CAUSAL_BINARIES and _INCLUDE)";
  }
}

// The CPU time of this image's threads other than the calling one, whose clock goes on after an
// exec (the kernel keeps a task's CPU time across exec; the other threads end with the image).
std::int64_t cpu_ns_ending_with_image(const sampling_summary& sampling) {
  timespec own{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &own);
  return std::max<std::int64_t>(sampling.coverage.program_cpu_ns - to_ns(own), 0);
}

// A chain's profile is named by the program at its end (KAIROS_OUTPUT_PATH's %exe%), not by the
// wrapper that began it: the database moves to this image's stem when that differs.
std::string stem_of_chain_end(std::string stem, std::string& database_path) {
  const auto base = stem_base();
  if (stem.starts_with(base) || database_path.empty()) return stem;
  const auto own = free_stem(base);
  std::error_code error;
  std::filesystem::rename(database_path, own + ".db", error);
  if (error) return stem;
  database_path = own + ".db";
  return own;
}

// Stops the producers, delivers everything, closes the database; writes the outputs under `stem`
// and says what was written. Nothing recorded: nothing written. Before an exec, the database is
// left for the next image, which goes on with it and writes the outputs (one profile per chain).
void write_everything(const std::string& end_reason, bool before_exec) {
  std::optional<own_cost_timer> cost{own_cost::stopping};
  // After an exec that failed, the stages stopped before it and their rows are in the database.
  const bool stopped_already = globals->stopped_for_exec;
  if (!stopped_already)
    for (const auto& stage : runtime_stages())
      if (stage.stop) stage.stop();
  globals->stopped_for_exec = before_exec;
  const auto sampling = sampling_totals();
  const losses lost{sampling.dropped,
                    traced_rows_dropped(),
                    0,
                    sampling.coverage.blocked_ns,
                    sampling.coverage.blocked_threads,
                    gpu_records_dropped(),
                    mpi_calls_dropped(),
                    sampling.lost_cpu_ns};
  if (!before_exec && verbosity() > 0 && sampling.delivered > 0) {
    report(fmt::format(
        "unwinding: {} of {} samples with kairos's unwind tables ({} compiled, {} rows), "
        "the rest with libgcc; {} went on with the kernel's frame-pointer chain; {} cut short ([stack cut])",
        sampling.unwound_by_tables, sampling.delivered,
        plural(static_cast<std::uint64_t>(sampling.unwind_table_functions), "function"), sampling.unwind_table_rows,
        sampling.chained_stacks, sampling.cut_stacks));
  }
  const auto causal = causal_totals();
  if (!stopped_already) {
    const run_facts facts{globals->causal_wanted, globals->windows_planned};
    for (const auto& stage : runtime_stages())
      if (stage.add_metadata) stage.add_metadata(facts);
    cost.emplace(own_cost::database_end);
    deliver_call_trees();
    flush_to_database(true);
    deliver_annotation_summaries();
  }
  if (before_exec) {
    // One line an image in exec_chain.images: a command's own newlines and tabs become spaces.
    auto command = globals->command_line;
    std::ranges::replace_if(
        command, [](char c) { return c == '\n' || c == '\t'; }, ' ');
    end_image_before_exec(fmt::format("{}\t{}", globals->identity.generation + 1, command),
                          cpu_ns_ending_with_image(sampling));
  }
  auto database_path = finish_profile_database(end_reason);
  close_profile_database();
  if (before_exec) {
    database_left_for_exec.store(!database_path.empty());
    return;
  }
  // The streamed samples' packets go into the Perfetto trace, if one is written; gone either way.
  const auto streamed = streamed_perfetto_samples();
  struct removed_at_return {
    std::string path;
    ~removed_at_return() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } streamed_file{streamed.path};
  cost.reset();
  if (const auto symbols = symbol_cache_used(); verbosity() > 0 && symbols.addresses > 0)
    report(fmt::format("symbols: {} address{}, {} from the symbol cache{}{}", symbols.addresses,
                       symbols.addresses == 1 ? "" : "es", symbols.from_cache,
                       symbols.directory.empty() ? " (off)" : " in " + symbols.directory,
                       symbols.not_saved ? "; " + symbols.not_saved.text() : ""));
  const auto counts = database_counts_written();
  const auto regions = regions_recorded() + function_calls_recorded();
  const auto gpu_work = counts.gpu_kernels + counts.gpu_copies;
  if (sampling.delivered == 0 && regions == 0 && gpu_work == 0 && counts.mpi_calls == 0 && counts.earlier_images == 0) {
    if (!database_path.empty()) remove_database_files(database_path);
    // A refused value said at the start why ("sampling is disabled"): one line, not two.
    if (globals->identity.launched && !globals->sampling_off_said)
      report(fmt::format("0 samples, 0 regions on {}; outputs: none (nothing was recorded: {}){}{}",
                         plural(program_threads(), "thread"), why_nothing_was_recorded(),
                         describe(lost, sampling.signal_number), children_text(sampling.coverage.program_cpu_ns)));
    return;
  }
  const auto samples = database_path.empty() ? sampling.delivered : counts.samples + counts.realtime_samples;
  if (database_path.empty() && database_problem()) {  // said when it happened; the rest would fail alike
    report(fmt::format("{}, {} on {}; outputs: none", plural(samples, "sample"), plural(regions, "region"),
                       plural(program_threads(), "thread")));
    return;
  }
  threads().refresh_running_names();
  auto stem = claimed_stem();
  if (!globals->identity.chain_stem.empty()) stem = stem_of_chain_end(stem, database_path);
  report_request request{stem,          globals->formats, globals->command_line, end_reason,
                         database_path, regions,          mismatched_pops()};
  if (streamed.whole) request.perfetto_samples_path = streamed.path;
  for_each_annotated_name([&](std::string_view name, region_kind kind) {
    request.region_kinds.emplace(std::string{name}, std::string{name_of(kind)});
  });
  const auto written = [&] {
    own_cost_timer outputs_cost{own_cost::outputs};
    return write_report(request);
  }();
  if (!written.database_path.empty() && !wants_format("db")) remove_database_files(written.database_path);
  report(written.failure);
  if (!written.note.empty()) report(written.note);
  auto with_rows = lost;
  with_rows.rows = counts.rows_lost;
  if (written.files.empty() && !with_rows.rows && !with_rows.samples && !with_rows.gpu_records && !with_rows.mpi_calls)
    return;
  // One line per launch, not one per rank: rank 0 names where every rank writes and how to merge;
  // the other ranks speak only when they lost data.
  const auto rank = mpi_rank_and_size();
  const bool lost_data =
      with_rows.rows || with_rows.samples || with_rows.region_rows || with_rows.gpu_records || with_rows.mpi_calls;
  if (rank && rank->size > 1 && rank->rank != 0 && !lost_data && verbosity() == 0) return;
  std::string files;
  for (const auto& file : written.files) files += (files.empty() ? "" : ", ") + file;
  const auto gpu = gpu_work == 0 ? std::string{}
                                 : fmt::format(", {}, {} GPU cop{}", plural(counts.gpu_kernels, "GPU kernel"),
                                               counts.gpu_copies, counts.gpu_copies == 1 ? "y" : "ies");
  const auto mpi = counts.mpi_calls == 0 ? std::string{} : ", " + plural(counts.mpi_calls, "MPI call");
  std::string launch;
  if (rank && rank->size > 1) {
    const auto directory = std::filesystem::path{stem}.parent_path().string();
    launch = fmt::format(
        "; rank {} of {}: every rank writes to {}; merge them with kairos-merge -o {}/merged.db "
        "{}/*.db",
        rank->rank, rank->size, directory, directory, directory);
  }
  std::string chain;
  if (const auto before = static_cast<std::uint64_t>(globals->identity.generation); counts.earlier_images > 0) {
    const auto images = before == 1 ? std::string{"image"} : fmt::format("{} images", before);
    chain = counts.earlier_images == before
                ? fmt::format("; with the {} before the last exec (threads marked [image N])", images)
                : fmt::format(
                      "; with {} of the {} before the last exec (threads marked [image N]; the others "
                      "recorded nothing)",
                      counts.earlier_images, images);
  }
  if (!globals->failed_exec.empty())
    chain += fmt::format("; not sampled after an exec that failed ({})", globals->failed_exec);
  report(fmt::format("{}, {}{}{}{} on {}; outputs: {}{}{}{}{}", plural(samples, "sample"), plural(regions, "region"),
                     gpu, mpi, causal_summary_text(causal), plural(program_threads(), "thread"),
                     files.empty() ? "none" : files, describe(with_rows, sampling.signal_number), chain,
                     children_text(sampling.coverage.program_cpu_ns), launch));
}

void finalize(const std::string& end_reason) {
  if (finalize_started.exchange(true)) {
    // Another path (exit on another thread, a signal) is finalizing: let it finish, bounded.
    if (finalizing_thread.load() != gettid()) wait_until([] { return finalize_done.load(); }, finalize_timeout);
    return;
  }
  reentry_guard guard;
  finalizing_thread.store(gettid());
  state.store(runtime_state::finalizing, std::memory_order_seq_cst);
  set_regions_accepting(false);
  set_function_trace_accepting(false);
  // A fork child that recorded nothing (the usual fork-then-_exit) does nothing at all here:
  // another thread of its parent may have held a libc lock at the fork.
  const bool recorded = regions_recorded() > 0 || traced_anything() || sampling_enabled() || globals->identity.launched;
  if (recorded) {
    wait_for_user_api_calls(user_api_wait);
    file_size_signal_guard quota;
    report(capture_problem("writing the outputs failed; the program is unaffected",
                           [&] { write_everything(end_reason, false); }));
    if (verbosity() > 0) report("own time, wall/CPU: " + own_costs_text());
  }
  state.store(runtime_state::finalized, std::memory_order_seq_cst);
  finalize_done.store(true);
}

void finalize_at_exit() {
  if (state.load() == runtime_state::active) finalize("exit");
}

void finalize_on_signal(int signal_number) {
  const auto now = state.load();
  if (now == runtime_state::active || now == runtime_state::finalizing)
    finalize(fmt::format("signal {}", signal_name(signal_number)));
  else
    finalize_done.store(true);
}

void flush_on_tick() {
  if (state.load() != runtime_state::active) return;
  for (const auto& stage : runtime_stages())
    if (stage.tick) stage.tick();
}

bool finished() { return finalize_done.load(); }
bool finalizing_here() { return finalizing_thread.load() == gettid(); }

// --- fork ------------------------------------------------------------------------------------

// The stages' rows give the one lock order (stages.hpp).
void before_fork() {
  if (state.load() != runtime_state::active) return;
  children_may_run();
  prepare_child_environment();
  for (const auto& stage : runtime_stages())
    if (stage.lock_for_fork) stage.lock_for_fork();
}
void after_fork_in_parent() {
  if (state.load() != runtime_state::active) return;
  const auto stages = runtime_stages();
  for (auto stage = stages.rbegin(); stage != stages.rend(); ++stage)
    if (stage->unlock_in_parent) stage->unlock_in_parent();
}
// Async-signal-safe only (see the top of this file).
void after_fork_in_child() {
  if (state.load() != runtime_state::active) return;
  auto* survivor = current_thread_if_registered();
  const auto stages = runtime_stages();
  for (auto stage = stages.rbegin(); stage != stages.rend(); ++stage)
    if (stage->in_child) stage->in_child(survivor);
  globals->identity.launched = false;
  globals->identity.generation = 0;
  if (!globals->values.boolean(setting::follow_children)) {
    // Not followed: the child runs as without kairos, and so do its descendants.
    state.store(runtime_state::off);
    set_regions_accepting(false);
    function_trace_off_in_child();
    restore_default_termination_handlers();
    remove_kairos_from_environment_in_child();
    release_stderr();
    return;
  }
  // Followed: its database and stem come with its first row (ordinary code). The parent's
  // service thread does not exist here: SIGINT/SIGTERM end a followed child without outputs.
  restore_default_termination_handlers();
  finalize_started.store(false);
  finalize_done.store(false);
  globals->identity.pid = getpid();
}

// --- init ------------------------------------------------------------------------------------

void connect_user_api() {
  auto attach = reinterpret_cast<void (*)(const kairos_entry_points*)>(dlsym(RTLD_DEFAULT, "kairos_user_attach"));
  if (attach) attach(&user_entry_points());
}

// kairos must never take the last threads a program may start (RLIMIT_NPROC counts the user's
// threads across processes). Near the limit, kairos keeps to one writer and says so. The
// machine's task count (/proc/loadavg) bounds the user's from above: cheap, and silent when
// there is room.
int writers_allowed() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NPROC, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  long running = 0, tasks = 0;
  if (std::FILE* file = std::fopen("/proc/loadavg", "re")) {
    if (std::fscanf(file, "%*s %*s %*s %ld/%ld", &running, &tasks) != 2) tasks = 0;
    std::fclose(file);
  }
  constexpr long room_wanted = 64;
  if (tasks > 0 && static_cast<rlim_t>(tasks + room_wanted) < limit.rlim_cur) return 1 << 20;
  report(
      fmt::format("RLIMIT_NPROC (ulimit -u) is {} and {} tasks run here: kairos keeps to three "
                  "threads of its own (one writer) so that the program's threads can start",
                  limit.rlim_cur, tasks));
  return 1;
}

metadata_list run_metadata() {
  metadata_list metadata{{"command", globals->command_line}};
  for (const auto& value : globals->values.values())
    metadata.emplace_back(fmt::format("setting.{}", value.definition->variable), value.text);
  return metadata;
}

// Where symbolized addresses are kept between runs: KAIROS_SYMBOL_CACHE, else the default place.
symbol_cache_choice symbol_cache_place(const settings& values) {
  const auto& named = values.text(setting::symbol_cache);
  if (named == "off") return {};
  if (named.empty()) return {symbol_cache::default_directory(), false};
  return {std::filesystem::path{named}, true};
}

// The time windows the settings ask for (both were checked when loaded).
window_plan planned_windows(const settings& values) {
  auto periods = parse_periods(values.text(setting::trace_periods));
  std::vector<period_spec> specs;
  if (periods.has_value()) specs = std::move(periods).value();
  std::vector<fixed_window> fixed;
  if (const auto& file = values.text(setting::trace_windows_file); !file.empty())
    if (auto windows = load_windows_file(file); windows.has_value()) fixed = std::move(windows).value();
  return window_plan{std::move(specs), std::move(fixed)};
}

void on_window_edge() noexcept {
  sampling_windows_changed();
  function_trace_windows_changed();
}

void start_causal_experiments(bool speaks_for_launch) {
  const auto& values = globals->values;
  causal_options options;
  options.scope = values.text(setting::causal_scope);
  options.select = values.text(setting::causal_select);
  for (const auto& percent : values.list(setting::causal_speedups)) options.speedups.push_back(std::stoi(percent));
  options.include = values.text(setting::causal_include);
  options.exclude = values.text(setting::causal_exclude);
  options.binaries = values.text(setting::causal_binaries);
  options.experiment_ns = static_cast<std::int64_t>(values.number(setting::causal_experiment) * 1e9);
  options.cooloff_ns = 10'000'000;
  if (auto failure = start_causal(options, {&deliver_causal_experiment, &deliver_causal_samples})) {
    if (speaks_for_launch) report(failure);
    return;
  }
  if (auto note = wrap_blocking_calls(); note && speaks_for_launch) report(*note);
}

void start_stages() {
  reentry_guard guard;
  prepare_private_descriptors();
  prepare_environment_editing();
  globals = new runtime_globals{};
  globals->started_ns = steady_now_ns();
  globals->identity.pid = getpid();
  const auto launch_pid = environment_value(setting::launch_pid);
  if (launch_pid.empty()) {
    // Preloaded by hand, not through kairos-run: this process is the launched one.
    set_environment_value(setting::launch_pid, std::to_string(globals->identity.pid));
    globals->identity.launched = true;
  } else {
    globals->identity.launched = launch_pid == std::to_string(globals->identity.pid);
  }
  std::tie(globals->identity.generation, globals->identity.chain_stem) = generation_of(globals->identity.pid);

  globals->values = settings::load(environ);
  set_verbosity(static_cast<int>(globals->values.integer(setting::verbose)));
  measure_own_costs(verbosity() > 0);
  globals->formats = globals->values.list(setting::output_formats);
  globals->launch = launch_of_this_process();
  // Problems and notes are said once per launch: by the first image of the launched process, and
  // of an MPI launch's processes by rank 0 only (every rank reads the same settings).
  const bool speaks_for_launch =
      globals->identity.launched && globals->identity.generation == 0 && globals->launch.rank.value_or(0) == 0;

  if (!globals->identity.launched && !globals->values.boolean(setting::follow_children)) {
    // A child of the launched process (spawned, or forked before this exec): left alone.
    state.store(runtime_state::off);
    return;
  }
  if (speaks_for_launch)
    for (const auto& line : globals->values.problems()) report(line);
  if (!globals->values.usable() || !globals->values.boolean(setting::enabled)) {
    state.store(runtime_state::off);
    return;
  }
  export_launch_variables(false);
  globals->command_line = read_command_line();
  // The ranks of one launch write side by side, in a directory of their own (docs/mpi.md).
  if (globals->launch.size.value_or(1) > 1 &&
      globals->values.at(setting::output_path).source == setting_source::default_value)
    globals->values.set(setting::output_path, mpi_default_output_path, setting_source::default_value);
  // An output directory that cannot be made is said at the start, not at the end (or never, for a
  // run that records nothing). kairos-run checked before the exec; this is for LD_PRELOAD alone.
  if (speaks_for_launch && !globals->formats.empty())
    if (auto blocked = check_output_directory(globals->values.text(setting::output_path))) {
      report(blocked.text() + "; kairos is disabled for this run");
      state.store(runtime_state::off);
      return;
    }

  const bool database_wanted = !globals->formats.empty();
  if (auto failure = configure_regions(globals->values.list(setting::components), database_wanted)) {
    if (speaks_for_launch) report(failure);
    state.store(runtime_state::off);
    return;
  }
  {
    // Traced calls: instrumented functions (off when a KAIROS_INSTRUMENT_* value was refused: said
    // above) and the default user-API regions.
    const auto& values = globals->values;
    function_trace_options options;
    if (values.category_usable(setting_category::instrument))
      options = {values.boolean(setting::instrument),
                 values.text(setting::instrument_include),
                 values.text(setting::instrument_exclude),
                 values.text(setting::instrument_file_include),
                 values.text(setting::instrument_file_exclude),
                 values.boolean(setting::instrument_system),
                 static_cast<std::int64_t>(values.number(setting::instrument_min_duration) * 1e9)};
    else
      options.hooks = false;
    if (database_wanted) options.request_drain = &request_early_tick;
    if (auto failure = configure_function_trace(options); failure && speaks_for_launch) report(failure);
  }
  keep_stderr();
  current_thread();  // the main thread is the program's thread 0
  if (database_wanted) {
    const auto& lines = globals->values.text(setting::source_lines);
    configure_profile_database(&database_path_of_this_process, globals->command_line, run_metadata(),
                               static_cast<std::int64_t>(globals->values.number(setting::flush_interval) * 1e9),
                               lines == "all"   ? source_lines::all
                               : lines == "off" ? source_lines::off
                                                : source_lines::own,
                               symbol_cache_place(globals->values), wants_format("perfetto"));
    if (globals->launch.in_launch())
      set_database_launch(globals->launch.rank, globals->launch.size, environment_value(setting::launch_id));
    if (!globals->identity.chain_stem.empty()) continue_profile_database_after_exec(false);
  }
  auto windows = planned_windows(globals->values);
  globals->windows_planned = !windows.empty();
  // Windows say when sampling runs: the default delay would only cut into the first one.
  if (globals->windows_planned && globals->values.at(setting::sampling_delay).source == setting_source::default_value)
    globals->values.set(setting::sampling_delay, "0", setting_source::default_value);
  // Before the sampler: no thread is armed until the first window opens.
  if (globals->windows_planned) {
    auto started = start_windows(std::move(windows), &on_window_edge);
    if (speaks_for_launch)
      for (const auto& note : started.notes) report(note);
  }
  // Before the sampler: its first samples already find the experiments' state.
  globals->causal_wanted = database_wanted && globals->values.category_usable(setting_category::causal) &&
                           globals->values.category_usable(setting_category::sampling) &&
                           globals->values.boolean(setting::causal);
  if (globals->causal_wanted) {
    // Experiments need samples from the start, and finer ones than a profile does (coz's 1 kHz).
    // A sample's delay is a quantum: rounds shorter than a period are predicted better at 5 kHz
    // (tests/causal/barrier_rounds.cpp), but the sampler's own cost, which is not sped up, then
    // put two_threads' critical thread 2-5 points low (docs/causal.md, "Limits").
    if (globals->values.at(setting::sampling_delay).source == setting_source::default_value)
      globals->values.set(setting::sampling_delay, "0", setting_source::default_value);
    if (globals->values.at(setting::sampling_freq).source == setting_source::default_value)
      globals->values.set(setting::sampling_freq, "1000", setting_source::default_value);
    start_causal_experiments(speaks_for_launch);
  }
  if (const auto rejected = globals->values.rejection_of(setting_category::sampling)) {
    globals->sampling_off = fmt::format("sampling was off: {} is not valid", *rejected);
    globals->sampling_off_said = speaks_for_launch;
  } else if (database_wanted) {
    auto sampling = start_sampling(globals->values, &deliver_samples, writers_allowed());
    if (speaks_for_launch) report(sampling.failure);
    if (speaks_for_launch) report(sampling.note);
    if (speaks_for_launch) report(sampling.python);
    set_named_frames(&named_frame);
    if (sampling.failure)
      globals->sampling_off = "sampling could not start (said above)";
    else if (!sampling_wanted(globals->values))
      globals->sampling_off =
          "sampling was off: KAIROS_SAMPLING_CPUTIME and "
          "KAIROS_SAMPLING_REALTIME are both false";
  }
  if (database_wanted && globals->values.category_usable(setting_category::gpu)) {
    const auto notes =
        start_gpu(globals->values.text(setting::gpu) == "auto", globals->values.boolean(setting::gpu_stacks));
    if (speaks_for_launch && verbosity() > 0)
      for (const auto& note : notes) report(note);
  }
  if (database_wanted && globals->values.category_usable(setting_category::mpi)) {
    const auto note = start_mpi(globals->values.text(setting::mpi) == "auto");
    if (note && speaks_for_launch && verbosity() > 0) report(*note);
  }
  if (database_wanted && globals->values.category_usable(setting_category::process_sampling) &&
      globals->values.boolean(setting::process_sampling)) {
    const auto names = globals->values.list(setting::process_sampling_metrics);
    auto started = start_process_sampling(
        {.period_ns = static_cast<std::int64_t>(globals->values.number(setting::process_sampling_period) * 1e9),
         .metrics = chosen_process_metrics(names),
         .metrics_named = std::find(names.begin(), names.end(), "all") == names.end(),
         .cpu_root = globals->values.text(setting::process_sampling_cpu_root)});
    if (speaks_for_launch) {
      for (const auto& line : started.problems) report(line);
      if (verbosity() > 0)
        for (const auto& note : started.notes) report(note);
    }
  }
  // Annotations make regions (the user API's functions): they start with them, below.
  const bool annotations_usable = globals->values.category_usable(setting_category::annotations);
  std::optional<std::string> openmp_note;
  if (annotations_usable) {
    const auto sources = globals->values.list(setting::annotations);
    const auto named = [&](std::string_view source) { return std::ranges::find(sources, source) != sources.end(); };
    start_annotations({named("nvtx"), named("kokkos"), named("roctx")});
  }
  // Followed children are profiled (their own outputs); the others are counted and named.
  if (database_wanted && !globals->values.boolean(setting::follow_children)) start_children_accounting();
  atexit(&finalize_at_exit);
  pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
  if (!start_termination_handling({&finalize_on_signal, &flush_on_tick, &finished, &finalizing_here}) &&
      verbosity() > 0)
    report("could not start the service thread; SIGINT/SIGTERM end the program without outputs");
  state.store(runtime_state::active, std::memory_order_release);
  set_regions_accepting(true);
  set_function_trace_accepting(true);
  if (annotations_usable) openmp_note = start_openmp(globals->values.text(setting::openmp) == "auto");
  if (openmp_note && speaks_for_launch && verbosity() > 0) report(*openmp_note);
  if (annotations_usable) {
    const auto roctx_note = wrap_roctx_if_loaded();
    if (roctx_note && speaks_for_launch && verbosity() > 0) report(*roctx_note);
  }
  connect_user_api();
  if (verbosity() > 0)
    report(fmt::format(
        "profiling pid {} ({}{})", globals->identity.pid,
        globals->identity.launched ? "launched process" : "followed child",
        globals->identity.generation ? fmt::format(", exec {}", globals->identity.generation) : std::string{}));
}

void initialize() {
  start_stages();
  // kairos's variables leave the program's environment once read (docs/reliability.md), and come
  // back for the execs it follows. With children followed they stay: a child that system(),
  // popen() or posix_spawn starts reads them with no wrapper of kairos's in between.
  if (!globals->values.boolean(setting::follow_children)) remove_kairos_from_environment();
}

__attribute__((constructor)) void initialize_before_main() {
  own_cost_timer cost{own_cost::start_up};
  if (auto failure = capture_problem("initialization failed", [] { initialize(); })) {
    state.store(runtime_state::off);
    report(failure.text() + "; the program runs without kairos");
  }
}

}  // namespace

runtime_state current_state() noexcept { return state.load(std::memory_order_acquire); }

void on_thread_start(bool kairos_owned) noexcept {
  if (state.load() == runtime_state::off) return;
  {
    reentry_guard guard;
    register_current_thread(kairos_owned);
  }
  if (!kairos_owned && state.load() == runtime_state::active) sampling_thread_started();
}

void on_thread_end() noexcept {
  causal_catch_up();  // before a join can return: the joiner is credited with what this thread paid
  sampling_thread_ending();
  mark_current_thread_ended();
}

void on_signal_mask_changed(const sigset_t& mask) noexcept { sampling_signal_mask_changed(mask); }

exec_environment environment_for_exec(char* const* environment) {
  if (!globals) return {};
  const auto now = state.load();
  const bool vfork_child = getpid() != globals->identity.pid;  // a vfork child shares our memory
  if (vfork_child) return {};
  const bool profiled = now == runtime_state::active || (globals->identity.launched && now != runtime_state::loading);
  const bool strip = now == runtime_state::off && !globals->identity.launched;
  // The next image goes on with this image's profile, under the chain's one stem.
  const auto chain_stem = now == runtime_state::active && !globals->formats.empty() ? ":" + claimed_stem() : "";
  return environment_for_exec(
      environment, profiled, strip,
      fmt::format("{}:{}{}", globals->identity.pid, globals->identity.generation + 1, chain_stem));
}

void before_exec() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  file_size_signal_guard quota;
  report(capture_problem("writing the profile before exec failed", [] { write_everything("exec", true); }));
}

void before_exit_without_handlers() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  finalize("_exit");
}

void after_failed_exec(int error) {
  // The image goes on, unsampled (its stages stopped before the exec): its profile, in the
  // database, is continued at exit and its outputs written then. A later exec continues it too.
  if (!globals || !globals->stopped_for_exec || getpid() != globals->identity.pid) return;
  globals->failed_exec = std::strerror(error);
  if (!database_left_for_exec.exchange(false)) return;
  continue_profile_database_after_exec(true);
  add_database_metadata(std::string{database::metadata_key::exec_chain_failed_exec}, globals->failed_exec);
}

}  // namespace kairos::runtime
