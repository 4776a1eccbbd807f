// The GPU stage: CUDA's and HIP's activity, from KAIROS_GPU and KAIROS_GPU_STACKS.
#include <cstdint>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/gpu/gpu_activity.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {
namespace {

// At the end, how long kairos waits for its own events of GPU work still running.
constexpr std::int64_t gpu_drain_timeout_ns = 2'000'000'000;

stage_start start(start_context& context) {
  const auto& values = context.run.values;
  stage_start started;
  if (!context.database_wanted || !values.category_usable(setting_category::gpu)) return started;
  for (auto& note : start_gpu(values.text(setting::gpu) == "auto", values.boolean(setting::gpu_stacks)))
    started.notes.emplace_back(std::move(note));
  return started;
}

}  // namespace

extern constexpr stage gpu_stage{
    .name = "gpu",
    .start = &start,
    .stop = [] { stop_gpu(gpu_drain_timeout_ns); },
    .add_losses = [](losses& lost) { lost.gpu_records += gpu_records_dropped(); },
    .add_metadata =
        [](const run_facts&) {
          if (gpu_observed())
            add_stage_metadata_number(database::metadata_key::dropped_gpu_records, gpu_records_dropped());
        },
    .tick = [] { tick_reporting("observing the GPU failed", &gpu_tick); },
    .in_child = []() noexcept { gpu_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
