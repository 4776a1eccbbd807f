#include "preload/process/run_end.hpp"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/causal/causal.hpp"
#include "preload/mpi/mpi_calls.hpp"
#include "preload/outputs/report.hpp"
#include "preload/pipeline/delivery.hpp"
#include "preload/process/children.hpp"
#include "preload/process/output_stem.hpp"
#include "preload/process/run.hpp"
#include "preload/process/stages.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/regions.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/sink/profile_database.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/signal_name.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/windows.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t unsampled_worth_saying_ns = 20'000'000;

bool wants_format(std::string_view format) {
  for (const auto& wanted : this_run().formats)
    if (wanted == format) return true;
  return false;
}

std::string plural(std::uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
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

// MPI_Init's rank and size, else the launcher's; none outside a launch.
std::optional<mpi_world> mpi_rank_and_size() {
  if (auto world = mpi_world_from_mpi()) return world;
  const auto& launch = this_run().launch;
  if (!launch.rank) return std::nullopt;
  return mpi_world{*launch.rank, launch.size.value_or(1)};
}

// The variable that gives a sampler its value of a sampling setting (its own, else the common one),
// and the value.
std::pair<std::string_view, std::string> sampler_value(setting own, setting common) {
  const auto& values = this_run().values;
  const auto& chosen = values.text(own).empty() ? values.at(common) : values.at(own);
  return {chosen.definition->variable, chosen.text};
}

std::string why_nothing_was_recorded() {
  if (!this_run().facts.sampling_off.empty()) return this_run().facts.sampling_off;
  if (this_run().facts.windows_planned) {
    const auto windows = windows_totals();
    if (windows.opened == 0) return "no time window opened before the end";
    return fmt::format("{} opened; nothing ran in them", plural(windows.opened, "time window"));
  }
  const auto& values = this_run().values;
  const bool cpu = values.boolean(setting::sampling_cputime);
  const auto [delay_variable, delay] = cpu ? sampler_value(setting::sampling_cputime_delay, setting::sampling_delay)
                                           : sampler_value(setting::sampling_realtime_delay, setting::sampling_delay);
  const double ran_s = static_cast<double>(steady_now_ns() - this_run().started_ns) * 1e-9;
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
  if (this_run().facts.windows_planned) {
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
  if (!this_run().facts.causal_wanted) return {};
  if (causal.experiments > 0) return ", " + plural(causal.experiments, "causal experiment");
  if (causal.experiments_too_few_visits > 0)
    return fmt::format(
        ", no causal experiment kept ({} saw a progress point fewer than 5 times: a longer run, "
        "or a longer KAIROS_CAUSAL_EXPERIMENT)",
        causal.experiments_too_few_visits);
  switch (causal.idle) {
    case causal_idle::nothing_selected:
      return fmt::format(", no causal experiment (no sampled location matched KAIROS_CAUSAL_SELECT=\"{}\")",
                         this_run().values.text(setting::causal_select));
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

// What the exit line is made of, once the outputs are written.
struct exit_facts {
  const sampling_summary& sampling;
  const database_counts& counts;
  const losses& lost;  // with the rows the database lost
  const causal_summary& causal;
  std::uint64_t samples = 0;
  std::uint64_t regions = 0;
  const std::vector<std::string>& files;
  const std::string& stem;
};

// "N samples, M regions[, GPU work][, MPI calls][, causal] on T threads; outputs: ...": the one
// line a run ends with.
void say_exit_line(const exit_facts& facts) {
  const auto& run = this_run();
  const auto& counts = facts.counts;
  const auto& with_rows = facts.lost;
  const auto& sampling = facts.sampling;
  // One line per launch, not one per rank: rank 0 names where every rank writes and how to merge;
  // the other ranks speak only when they lost data.
  const auto rank = mpi_rank_and_size();
  const bool lost_data =
      with_rows.rows || with_rows.samples || with_rows.region_rows || with_rows.gpu_records || with_rows.mpi_calls;
  if (rank && rank->size > 1 && rank->rank != 0 && !lost_data && verbosity() == 0) return;
  std::string files;
  for (const auto& file : facts.files) files += (files.empty() ? "" : ", ") + file;
  const auto gpu = counts.gpu_kernels + counts.gpu_copies == 0
                       ? std::string{}
                       : fmt::format(", {}, {} GPU cop{}", plural(counts.gpu_kernels, "GPU kernel"), counts.gpu_copies,
                                     counts.gpu_copies == 1 ? "y" : "ies");
  const auto mpi = counts.mpi_calls == 0 ? std::string{} : ", " + plural(counts.mpi_calls, "MPI call");
  std::string launch;
  if (rank && rank->size > 1) {
    const auto directory = std::filesystem::path{facts.stem}.parent_path().string();
    launch = fmt::format(
        "; rank {} of {}: every rank writes to {}; merge them with kairos-merge -o {}/merged.db "
        "{}/*.db",
        rank->rank, rank->size, directory, directory, directory);
  }
  std::string chain;
  if (const auto before = static_cast<std::uint64_t>(run.identity.generation); counts.earlier_images > 0) {
    const auto images = before == 1 ? std::string{"image"} : fmt::format("{} images", before);
    chain = counts.earlier_images == before
                ? fmt::format("; with the {} before the last exec (threads marked [image N])", images)
                : fmt::format(
                      "; with {} of the {} before the last exec (threads marked [image N]; the others "
                      "recorded nothing)",
                      counts.earlier_images, images);
  }
  if (!run.failed_exec.empty()) chain += fmt::format("; not sampled after an exec that failed ({})", run.failed_exec);
  report(fmt::format(
      "{}, {}{}{}{} on {}; outputs: {}{}{}{}{}", plural(facts.samples, "sample"), plural(facts.regions, "region"), gpu,
      mpi, causal_summary_text(facts.causal), plural(program_threads(), "thread"), files.empty() ? "none" : files,
      describe(with_rows, sampling.signal_number), chain, children_text(sampling.coverage.program_cpu_ns), launch));
}

// The outputs of a run whose database is finished (its path, "" when it has none), and the exit
// line. Nothing recorded: nothing written.
void write_outputs(const std::string& end_reason, std::string database_path, const sampling_summary& sampling,
                   const losses& lost, const causal_summary& causal) {
  auto& run = this_run();
  // The streamed samples' packets go into the Perfetto trace, if one is written; gone either way.
  const auto streamed = streamed_perfetto_samples();
  struct removed_at_return {
    std::string path;
    ~removed_at_return() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } streamed_file{streamed.path};
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
    if (run.identity.launched && !run.facts.sampling_off_said)
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
  if (!run.identity.chain_stem.empty()) stem = stem_of_chain_end(stem, database_path);
  report_request request{stem, run.formats, run.command_line, end_reason, database_path, regions, mismatched_pops()};
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
  say_exit_line({sampling, counts, with_rows, causal, samples, regions, written.files, stem});
}

}  // namespace

bool write_everything(const std::string& end_reason, bool before_exec) {
  std::optional<own_cost_timer> cost{own_cost::stopping};
  auto& run = this_run();
  // After an exec that failed, the stages stopped before it and their rows are in the database.
  const bool stopped_already = run.stopped_for_exec;
  if (!stopped_already) for_each_stage<&stage::stop>();
  run.stopped_for_exec = before_exec;
  const auto sampling = sampling_totals();
  losses lost;
  for_each_stage<&stage::add_losses>(lost);
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
    for_each_stage<&stage::add_metadata>(run.facts);
    cost.emplace(own_cost::database_end);
    deliver_call_trees();
    flush_to_database(true);
    deliver_annotation_summaries();
  }
  if (before_exec) {
    // One line an image in exec_chain.images: a command's own newlines and tabs become spaces.
    auto command = run.command_line;
    std::ranges::replace_if(
        command, [](char c) { return c == '\n' || c == '\t'; }, ' ');
    end_image_before_exec(fmt::format("{}\t{}", run.identity.generation + 1, command),
                          cpu_ns_ending_with_image(sampling));
  }
  auto database_path = finish_profile_database(end_reason);
  close_profile_database();
  if (before_exec) return !database_path.empty();
  cost.reset();
  write_outputs(end_reason, std::move(database_path), sampling, lost, causal);
  return false;
}

void continue_after_failed_exec() {
  continue_profile_database_after_exec(true);
  add_database_metadata(std::string{database::metadata_key::exec_chain_failed_exec}, this_run().failed_exec);
}

}  // namespace kairos::runtime
