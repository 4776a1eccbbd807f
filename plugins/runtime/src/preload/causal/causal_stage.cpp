// The causal stage: experiments from KAIROS_CAUSAL_* (docs/causal.md).
#include <string>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/causal/blocking_calls.hpp"
#include "preload/causal/causal.hpp"
#include "preload/pipeline/delivery.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {
namespace {

namespace key = database::metadata_key;

// Before the sampler (the table's start order): its first samples already find the experiments'
// state.
stage_start start(start_context& context) {
  auto& values = context.run.values;
  stage_start started;
  context.run.facts.causal_wanted = context.database_wanted && values.category_usable(setting_category::causal) &&
                                    values.category_usable(setting_category::sampling) &&
                                    values.boolean(setting::causal);
  if (!context.run.facts.causal_wanted) return started;
  // Experiments need samples from the start, and finer ones than a profile does (coz's 1 kHz).
  // A sample's delay is a quantum: rounds shorter than a period are predicted better at 5 kHz
  // (tests/causal/barrier_rounds.cpp), but the sampler's own cost, which is not sped up, then
  // put two_threads' critical thread 2-5 points low (docs/causal.md, "Limits").
  if (values.at(setting::sampling_delay).source == setting_source::default_value)
    values.set(setting::sampling_delay, "0", setting_source::default_value);
  if (values.at(setting::sampling_freq).source == setting_source::default_value)
    values.set(setting::sampling_freq, "1000", setting_source::default_value);
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
    started.problems.push_back(std::move(failure));
    return started;
  }
  if (auto note = wrap_blocking_calls()) started.problems.emplace_back(std::move(*note));
  return started;
}

void add_metadata(const run_facts& facts) {
  if (!facts.causal_wanted) return;
  const auto causal = causal_totals();
  add_stage_metadata_number(key::causal_experiments, causal.experiments);
  add_stage_metadata_number(key::causal_experiments_too_few_visits, causal.experiments_too_few_visits);
  add_stage_metadata_number(key::causal_delay_ns, causal.delay_ns);
  add_stage_metadata_number(key::causal_overslept_ns, causal.overslept_ns);
  add_stage_metadata_number(key::causal_core_share_permille, causal.core_share_permille);
  add_stage_metadata_number(key::causal_addresses_unresolved, causal.addresses_unresolved);
  add_stage_metadata_number(key::causal_wakeups_credited, causal.wakeups_credited);
  add_stage_metadata_number(key::causal_pipe_wakeups_credited, pipe_wakeups_credited());
}

}  // namespace

extern constexpr stage causal_stage{
    .name = "causal",
    .start = &start,
    .stop = [] { stop_causal(); },
    .add_metadata = &add_metadata,
    .in_child = []() noexcept { causal_forget_after_fork_in_child(); },
    // Before a join can return: the joiner is credited with what this thread paid.
    .thread_ending = []() noexcept { causal_catch_up(); },
};

}  // namespace kairos::runtime
