// The children stage: the child processes kairos does not profile, named at ticks, counted at the
// end (children.hpp).
#include <string>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/process/children.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {
namespace {

// Followed children are profiled (their own outputs); the others are counted and named.
stage_start start(start_context& context) {
  if (context.database_wanted && !context.run.values.boolean(setting::follow_children)) start_children_accounting();
  return {};
}

void add_metadata(const run_facts&) {
  namespace key = database::metadata_key;
  const auto children = unprofiled_children_now();
  if (children.by_name.empty()) return;
  add_stage_metadata_number(key::children_unprofiled_processes, children.processes);
  add_stage_metadata_number(key::children_unprofiled_cpu_ns, children.cpu_ns);
  std::string lines;
  for (const auto& group : children.by_name)
    lines += group.name + '\t' + std::to_string(group.processes) + '\t' + std::to_string(group.cpu_ns) + '\n';
  add_stage_metadata(key::children_unprofiled_by_name, std::move(lines));
}

}  // namespace

extern constexpr stage children_stage{
    .name = "children",
    .start = &start,
    .add_metadata = &add_metadata,
    .tick = [] { tick_reporting("naming the child processes failed", &children_tick); },
    // Takes no lock: the parent may have children from now on.
    .lock_for_fork = [] { children_may_run(); },
    .in_child = []() noexcept { children_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
