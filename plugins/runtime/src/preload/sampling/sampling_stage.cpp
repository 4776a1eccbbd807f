// The sampling stage: the sampler's start from its settings, its end, what it lost and counted.
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/pipeline/delivery.hpp"
#include "preload/process/stages.hpp"
#include "preload/sampling/python_frames.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/sink/profile_database.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/signal_name.hpp"

namespace kairos::runtime {
namespace {

namespace key = database::metadata_key;

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

stage_start start(start_context& context) {
  const auto& values = context.run.values;
  auto& facts = context.run.facts;
  stage_start started;
  if (const auto rejected = values.rejection_of(setting_category::sampling)) {
    facts.sampling_off = fmt::format("sampling was off: {} is not valid", *rejected);
    // Said by the refused value's line, by the process that speaks for the launch.
    facts.sampling_off_said = context.speaks_for_launch;
    return started;
  }
  if (!context.database_wanted) return started;
  auto sampling = start_sampling(values, &deliver_samples, writers_allowed());
  started.problems = {sampling.failure, sampling.note, sampling.python};
  set_named_frames(&named_frame);
  if (sampling.failure)
    facts.sampling_off = "sampling could not start (said above)";
  else if (!sampling_wanted(values))
    facts.sampling_off =
        "sampling was off: KAIROS_SAMPLING_CPUTIME and "
        "KAIROS_SAMPLING_REALTIME are both false";
  return started;
}

void add_losses(losses& lost) {
  const auto sampling = sampling_totals();
  lost.samples += sampling.dropped;
  lost.unsampled_cpu_ns += sampling.coverage.blocked_ns;
  lost.threads_blocking += sampling.coverage.blocked_threads;
  lost.lost_cpu_ns += sampling.lost_cpu_ns;
}

void add_metadata(const run_facts&) {
  // Known only now: the CPU-time source turns from perf to the timer if the kernel refuses perf.
  const auto sampling = sampling_totals();
  add_stage_metadata(key::sampling_cpu_source, sampling.cpu_source);
  add_stage_metadata(key::sampling_signal, sampling.signal_number ? signal_name(sampling.signal_number) : "");
  add_stage_metadata_number(key::sampling_unwound_by_tables, sampling.unwound_by_tables);
  add_stage_metadata_number(key::sampling_threads_by_ring, sampling.threads_by_ring);
  add_stage_metadata_number(key::dropped_samples, sampling.dropped);
  add_stage_metadata_number(key::lost_cpu_ns, sampling.lost_cpu_ns);
  add_stage_metadata_number(key::sampling_cut_stacks, sampling.cut_stacks);
  add_stage_metadata_number(key::sampling_chained_stacks, sampling.chained_stacks);
  const auto& coverage = sampling.coverage;
  add_stage_metadata_number(key::unsampled_cpu_ns, coverage.blocked_ns);
  add_stage_metadata_number(key::unsampled_threads, coverage.blocked_threads);
  // The whole the CPU-time samples are a share of, and what they do not stand for (every report
  // states their coverage).
  if (!sampling.cpu_source.empty()) {
    add_stage_metadata_number(key::program_cpu_ns, coverage.program_cpu_ns);
    add_stage_metadata_number(key::before_sampling_cpu_ns, coverage.before_sampling_ns);
    add_stage_metadata_number(key::paused_cpu_ns, coverage.paused_ns);
    add_stage_metadata_number(key::after_last_sample_cpu_ns, coverage.after_last_sample_ns);
    add_stage_metadata_number(key::signal_handler_cpu_ns, coverage.handler_ns);
    add_stage_metadata_number(key::weights_shortfall_ns, coverage.weights_shortfall_ns());
    add_stage_metadata_number(key::ring_count_excess_ns, coverage.ring_excess_ns);
  }
  const auto own_work = own_work_in_samples();
  add_stage_metadata_number(key::kairos_own_samples, own_work.samples);
  add_stage_metadata_number(key::kairos_own_cpu_ns, own_work.cpu_ns);
  add_stage_metadata_number(key::kairos_own_real_ns, own_work.real_ns);
  if (sampling.python_version.empty()) return;
  add_stage_metadata(key::python_version, sampling.python_version);
  if (!sampling.python_note.empty()) add_stage_metadata(key::python_note, sampling.python_note);
  const auto python = python_frames_counts();
  add_stage_metadata_number(key::python_samples, python.samples);
  add_stage_metadata_number(key::python_unmatched_samples, python.unmatched);
  add_stage_metadata_number(key::python_torn_samples, python.torn);
  add_stage_metadata_number(key::python_read_safely_samples, python.read_safely);
  add_stage_metadata_number(key::python_unreadable_code, python.unreadable);
}

}  // namespace

extern constexpr stage sampling_stage{
    .name = "sampling",
    .start = &start,
    .recorded = [] { return sampling_enabled(); },
    .stop = [] { stop_sampling(); },
    .add_losses = &add_losses,
    .add_metadata = &add_metadata,
    .lock_for_fork = [] { sampling_lock_for_fork(); },
    .unlock_in_parent = [] { sampling_unlock_after_fork_in_parent(); },
    // A child is not sampled (docs/runtime.md).
    .in_child = []() noexcept { sampling_forget_after_fork_in_child(); },
    .thread_started =
        [](bool kairos_owned, bool active) noexcept {
          if (!kairos_owned && active) sampling_thread_started();
        },
    .thread_ending = []() noexcept { sampling_thread_ending(); },
    .signal_mask_changed = [](const sigset_t& mask) noexcept { sampling_signal_mask_changed(mask); },
    .window_edge = []() noexcept { sampling_windows_changed(); },
};

}  // namespace kairos::runtime
