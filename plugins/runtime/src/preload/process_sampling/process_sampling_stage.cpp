// The process-sampling stage: the process's metrics at a period (KAIROS_PROCESS_SAMPLING_*).
#include <algorithm>
#include <cstdint>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/process/stages.hpp"
#include "preload/process_sampling/process_sampling.hpp"

namespace kairos::runtime {
namespace {

stage_start start(start_context& context) {
  const auto& values = context.run.values;
  stage_start started;
  if (!context.database_wanted || !values.category_usable(setting_category::process_sampling) ||
      !values.boolean(setting::process_sampling))
    return started;
  const auto names = values.list(setting::process_sampling_metrics);
  auto begun = start_process_sampling(
      {.period_ns = static_cast<std::int64_t>(values.number(setting::process_sampling_period) * 1e9),
       .metrics = chosen_process_metrics(names),
       .metrics_named = std::find(names.begin(), names.end(), "all") == names.end(),
       .cpu_root = values.text(setting::process_sampling_cpu_root)});
  for (auto& line : begun.problems) started.problems.emplace_back(std::move(line));
  for (auto& note : begun.notes) started.notes.emplace_back(std::move(note));
  return started;
}

void add_metadata(const run_facts&) {
  namespace key = database::metadata_key;
  const auto totals = process_sampling_totals_now();
  if (!totals.running) return;
  add_stage_metadata_number(key::process_sampling_period_ns, totals.period_ns);
  add_stage_metadata_number(key::process_sampling_periods, totals.periods);
  add_stage_metadata(key::process_sampling_metrics, totals.metrics);
  add_stage_metadata_number(key::dropped_process_samples, totals.rows_dropped);
}

}  // namespace

// Its thread holds no lock a fork could leave taken: the child only forgets it.
extern constexpr stage process_sampling_stage{
    .name = "process_sampling",
    .start = &start,
    .stop = [] { stop_process_sampling(); },
    .add_metadata = &add_metadata,
    .in_child = []() noexcept { process_sampling_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
