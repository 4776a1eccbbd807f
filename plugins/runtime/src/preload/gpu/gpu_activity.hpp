#pragma once
// Producer: GPU activity (kairos::gpu, plugins/gpu). Under KAIROS_GPU=auto the collector observes
// the GPU runtimes loaded in the program (at init, and every half second after for runtimes loaded
// later, by dlopen); what completed is taken in batches by the pipeline. The batch type is the
// plugin's own, gpu::activity_batch.
#include <cstdint>
#include <string>
#include <vector>

#include <kairos/plugins/gpu/activity.hpp>

namespace kairos::runtime {

// At init: starts observing (when `wanted`), with each launch's call stack when `stacks`; the notes
// say what was found.
std::vector<std::string> start_gpu(bool wanted, bool stacks);
// The service thread's tick: picks up runtimes loaded since, resolves completed work.
void gpu_tick();
// What completed since the last take, into `batch` (whose storage the collector reuses).
void take_gpu_activity(gpu::activity_batch& batch);
// Finalize: waits up to `timeout_ns` for kairos's own events of launched work, then stops.
void stop_gpu(std::int64_t timeout_ns);
bool gpu_observed() noexcept;
// Records the GPU runtime dropped before kairos took them (lost data, said at exit).
std::uint64_t gpu_records_dropped();
// fork child (async-signal-safe): the parent's launched work is forgotten.
void gpu_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
