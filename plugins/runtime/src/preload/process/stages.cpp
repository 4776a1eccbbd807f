#include "preload/process/stages.hpp"

#include <array>
#include <string>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/annotations/openmp.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/annotations/roctx.hpp"
#include "preload/causal/blocking_calls.hpp"
#include "preload/causal/causal.hpp"
#include "preload/gpu/gpu_activity.hpp"
#include "preload/mpi/mpi_calls.hpp"
#include "preload/pipeline/delivery.hpp"
#include "preload/process/children.hpp"
#include "preload/process_sampling/process_sampling.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/regions.hpp"
#include "preload/sampling/python_frames.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/signal_name.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/windows.hpp"

namespace kairos::runtime {
namespace {

namespace key = database::metadata_key;

// At the end, how long kairos waits for its own events of GPU work still running.
constexpr std::int64_t gpu_drain_timeout_ns = 2'000'000'000;

void add(std::string_view name, std::string value) { add_database_metadata(std::string{name}, std::move(value)); }
template <class Number>
void add_number(std::string_view name, Number value) {
  add(name, std::to_string(value));
}

void sampling_metadata(const run_facts&) {
  // Known only now: the CPU-time source turns from perf to the timer if the kernel refuses perf.
  const auto sampling = sampling_totals();
  add(key::sampling_cpu_source, sampling.cpu_source);
  add(key::sampling_signal, sampling.signal_number ? signal_name(sampling.signal_number) : "");
  add_number(key::sampling_unwound_by_tables, sampling.unwound_by_tables);
  add_number(key::sampling_threads_by_ring, sampling.threads_by_ring);
  add_number(key::dropped_samples, sampling.dropped);
  add_number(key::lost_cpu_ns, sampling.lost_cpu_ns);
  add_number(key::sampling_cut_stacks, sampling.cut_stacks);
  add_number(key::sampling_chained_stacks, sampling.chained_stacks);
  const auto& coverage = sampling.coverage;
  add_number(key::unsampled_cpu_ns, coverage.blocked_ns);
  add_number(key::unsampled_threads, coverage.blocked_threads);
  // The whole the CPU-time samples are a share of, and what they do not stand for (every report
  // states their coverage).
  if (!sampling.cpu_source.empty()) {
    add_number(key::program_cpu_ns, coverage.program_cpu_ns);
    add_number(key::before_sampling_cpu_ns, coverage.before_sampling_ns);
    add_number(key::paused_cpu_ns, coverage.paused_ns);
    add_number(key::after_last_sample_cpu_ns, coverage.after_last_sample_ns);
    add_number(key::signal_handler_cpu_ns, coverage.handler_ns);
    add_number(key::weights_shortfall_ns, coverage.weights_shortfall_ns());
    add_number(key::ring_count_excess_ns, coverage.ring_excess_ns);
  }
  const auto own_work = own_work_in_samples();
  add_number(key::kairos_own_samples, own_work.samples);
  add_number(key::kairos_own_cpu_ns, own_work.cpu_ns);
  add_number(key::kairos_own_real_ns, own_work.real_ns);
  if (sampling.python_version.empty()) return;
  add(key::python_version, sampling.python_version);
  if (!sampling.python_note.empty()) add(key::python_note, sampling.python_note);
  const auto python = python_frames_counts();
  add_number(key::python_samples, python.samples);
  add_number(key::python_unmatched_samples, python.unmatched);
  add_number(key::python_torn_samples, python.torn);
  add_number(key::python_read_safely_samples, python.read_safely);
  add_number(key::python_unreadable_code, python.unreadable);
}

void causal_metadata(const run_facts& facts) {
  if (!facts.causal_wanted) return;
  const auto causal = causal_totals();
  add_number(key::causal_experiments, causal.experiments);
  add_number(key::causal_experiments_too_few_visits, causal.experiments_too_few_visits);
  add_number(key::causal_delay_ns, causal.delay_ns);
  add_number(key::causal_overslept_ns, causal.overslept_ns);
  add_number(key::causal_core_share_permille, causal.core_share_permille);
  add_number(key::causal_addresses_unresolved, causal.addresses_unresolved);
  add_number(key::causal_wakeups_credited, causal.wakeups_credited);
  add_number(key::causal_pipe_wakeups_credited, pipe_wakeups_credited());
}

void windows_metadata(const run_facts& facts) {
  if (!facts.windows_planned) return;
  const auto windows = windows_totals();
  add_number(key::windows_opened, windows.opened);
  add_number(key::windows_skipped, windows.skipped);
  add_number(key::windows_edge_ns, windows.edge_ns);
}

void function_trace_metadata(const run_facts&) {
  add_number(key::dropped_region_rows, traced_rows_dropped());
  add_number(key::traced_events, traced_events());
}

void process_sampling_metadata(const run_facts&) {
  const auto totals = process_sampling_totals_now();
  if (!totals.running) return;
  add_number(key::process_sampling_period_ns, totals.period_ns);
  add_number(key::process_sampling_periods, totals.periods);
  add(key::process_sampling_metrics, totals.metrics);
  add_number(key::dropped_process_samples, totals.rows_dropped);
}

void annotations_metadata(const run_facts&) {
  if (openmp_observed()) {
    add(key::openmp_runtime, openmp_runtime());
    add_number(key::openmp_parallel_regions, openmp_parallel_regions());
  }
  std::string attached;
  if (nvtx_attached()) attached = "nvtx";
  if (kokkos_attached()) attached += attached.empty() ? "kokkos" : ",kokkos";
  if (roctx_attached()) attached += attached.empty() ? "roctx" : ",roctx";
  if (!attached.empty()) add(key::annotations_attached, attached);
  if (const auto dropped = annotation_ranges_dropped(); dropped > 0)
    add_number(key::dropped_annotation_ranges, dropped);
}

void children_metadata(const run_facts&) {
  const auto children = unprofiled_children_now();
  if (children.by_name.empty()) return;
  add_number(key::children_unprofiled_processes, children.processes);
  add_number(key::children_unprofiled_cpu_ns, children.cpu_ns);
  std::string lines;
  for (const auto& group : children.by_name)
    lines += group.name + '\t' + std::to_string(group.processes) + '\t' + std::to_string(group.cpu_ns) + '\n';
  add(key::children_unprofiled_by_name, std::move(lines));
}

void tick_reporting(const char* what, void (*work)()) { report(capture_problem(what, work)); }

constexpr std::array rows{
    stage{.name = "causal",
          .stop = [] { stop_causal(); },
          .add_metadata = &causal_metadata,
          .in_child = [](thread_record*) noexcept { causal_forget_after_fork_in_child(); }},
    stage{.name = "windows",
          .stop = [] { stop_windows(); },
          .add_metadata = &windows_metadata,
          .in_child = [](thread_record*) noexcept { windows_forget_after_fork_in_child(); }},
    stage{.name = "sampling",
          .stop = [] { stop_sampling(); },
          .add_metadata = &sampling_metadata,
          .lock_for_fork = [] { sampling_lock_for_fork(); },
          .unlock_in_parent = [] { sampling_unlock_after_fork_in_parent(); },
          // A child is not sampled (docs/runtime.md).
          .in_child = [](thread_record*) noexcept { sampling_forget_after_fork_in_child(); }},
    stage{.name = "gpu",
          .stop = [] { stop_gpu(gpu_drain_timeout_ns); },
          .add_metadata =
              [](const run_facts&) {
                if (gpu_observed()) add_number(key::dropped_gpu_records, gpu_records_dropped());
              },
          .tick = [] { tick_reporting("observing the GPU failed", &gpu_tick); },
          .in_child = [](thread_record*) noexcept { gpu_forget_after_fork_in_child(); }},
    stage{.name = "mpi",
          .add_metadata =
              [](const run_facts&) {
                if (mpi_observed()) add_number(key::dropped_mpi_calls, mpi_calls_dropped());
              },
          .tick = [] { tick_reporting("observing MPI failed", &mpi_tick); },
          .in_child = [](thread_record*) noexcept { mpi_forget_after_fork_in_child(); }},
    // The children kairos does not profile: named at ticks, counted at the end.
    stage{.name = "children",
          .add_metadata = &children_metadata,
          .tick = [] { tick_reporting("naming the child processes failed", &children_tick); },
          .in_child = [](thread_record*) noexcept { children_forget_after_fork_in_child(); }},
    // Its thread holds no lock a fork could leave taken: the child only forgets it.
    stage{.name = "process_sampling",
          .stop = [] { stop_process_sampling(); },
          .add_metadata = &process_sampling_metadata,
          .in_child = [](thread_record*) noexcept { process_sampling_forget_after_fork_in_child(); }},
    stage{.name = "delivery",
          .tick = [] { tick_reporting("writing the profile database failed", [] { flush_to_database(false); }); },
          .lock_for_fork = [] { delivery_lock_for_fork(); },
          .unlock_in_parent = [] { delivery_unlock_after_fork_in_parent(); },
          .in_child = [](thread_record*) noexcept { delivery_forget_after_fork_in_child(); }},
    stage{.name = "database",
          .lock_for_fork = [] { database_lock_for_fork(); },
          .unlock_in_parent = [] { database_unlock_after_fork_in_parent(); },
          .in_child = [](thread_record*) noexcept { database_forget_after_fork_in_child(); }},
    // OpenMP, NVTX, Kokkos and ROCTx: their regions go through the traced calls (stopped below).
    // After delivery and the database in the lock order: the flush takes the annotations' locks
    // (their ranges, names and sums) while it holds its own.
    stage{.name = "annotations",
          .stop =
              [] {
                stop_openmp();
                stop_annotations();
              },
          .add_metadata = &annotations_metadata,
          .tick =
              [] {
                tick_reporting("observing OpenMP failed", &openmp_tick);
                tick_reporting("observing ROCTx failed", &roctx_tick);
              },
          .lock_for_fork =
              [] {
                annotated_regions_lock_for_fork();
                openmp_lock_for_fork();
                annotation_ranges_lock_for_fork();
              },
          .unlock_in_parent =
              [] {
                annotation_ranges_unlock_after_fork();
                openmp_unlock_after_fork();
                annotated_regions_unlock_after_fork();
              },
          .in_child =
              [](thread_record*) noexcept {
                annotation_ranges_unlock_after_fork();
                openmp_unlock_after_fork();
                annotated_regions_unlock_after_fork();
                annotation_ranges_forget_after_fork_in_child();
                openmp_forget_after_fork_in_child();
                annotated_regions_forget_after_fork_in_child();
              }},
    stage{.name = "regions",
          .lock_for_fork = [] { regions_lock_for_fork(); },
          .unlock_in_parent = [] { regions_unlock_after_fork(); },
          .in_child =
              [](thread_record*) noexcept {
                regions_unlock_after_fork();
                regions_forget_after_fork_in_child();
              }},
    // Last of the producers to stop: the calls still open are closed once nothing runs.
    stage{.name = "function_trace",
          .stop = [] { process_function_events(true); },
          .add_metadata = &function_trace_metadata,
          .lock_for_fork = [] { function_trace_lock_for_fork(); },
          .unlock_in_parent = [] { function_trace_unlock_after_fork(); },
          .in_child =
              [](thread_record*) noexcept {
                function_trace_unlock_after_fork();
                function_trace_forget_after_fork_in_child();
              }},
    // The thread registry, which every stage uses: locked last, released and adopted first.
    stage{.name = "threads",
          .lock_for_fork = [] { threads().lock_for_fork(); },
          .unlock_in_parent = [] { threads().unlock_after_fork_in_parent(); },
          .in_child = [](thread_record* survivor) noexcept { threads().adopt_after_fork_in_child(survivor); }},
};

}  // namespace

std::span<const stage> runtime_stages() noexcept { return rows; }

}  // namespace kairos::runtime
