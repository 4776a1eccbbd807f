// The windows stage: the time windows of KAIROS_TRACE_PERIODS and KAIROS_TRACE_WINDOWS_FILE.
#include <utility>
#include <vector>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/runtime/time_windows.hpp>

#include "preload/process/stages.hpp"
#include "preload/windows/windows.hpp"

namespace kairos::runtime {
namespace {

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

// Before the sampler (the table's start order): no thread is armed until the first window opens.
stage_start start(start_context& context) {
  auto& values = context.run.values;
  stage_start started;
  auto windows = planned_windows(values);
  context.run.facts.windows_planned = !windows.empty();
  if (!context.run.facts.windows_planned) return started;
  // Windows say when sampling runs: the default delay would only cut into the first one.
  if (values.at(setting::sampling_delay).source == setting_source::default_value)
    values.set(setting::sampling_delay, "0", setting_source::default_value);
  started.problems = start_windows(std::move(windows), context.window_edge).notes;
  return started;
}

void add_metadata(const run_facts& facts) {
  namespace key = database::metadata_key;
  if (!facts.windows_planned) return;
  const auto windows = windows_totals();
  add_stage_metadata_number(key::windows_opened, windows.opened);
  add_stage_metadata_number(key::windows_skipped, windows.skipped);
  add_stage_metadata_number(key::windows_edge_ns, windows.edge_ns);
}

}  // namespace

extern constexpr stage windows_stage{
    .name = "windows",
    .start = &start,
    .stop = [] { stop_windows(); },
    .add_metadata = &add_metadata,
    .in_child = []() noexcept { windows_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
