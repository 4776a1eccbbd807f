#pragma once
// The adapters between producers and the sink: the one place that knows both a producer's batch
// type and the database's rows. The sampler's batches arrive through deliver_samples (lifecycle
// hands the sampler this function); regions, instrumented calls and threads are pulled by flush_to_database, which
// lifecycle's service thread calls every tick and finalize calls last.
#include <cstdint>

#include <kairos/plugins/database/writer.hpp>

#include "preload/causal/causal_batch.hpp"
#include "preload/sampling/sample_batch.hpp"

namespace kairos::runtime {

// Each sample's stack is folded first (support/own_frames.hpp): kairos's frames leave it, its own
// work becomes the `[kairos]` leaf.
void deliver_samples(const sample_batch& batch);
// The sink's named frames (set_named_frames): the frames the sampler put in its stacks under
// synthetic addresses: an interpreter's, `[kairos]` and the mark of a cut stack, `[stack cut]`.
bool named_frame(std::uint64_t address, database::frame_info& frame);
// What the samples delivered so far charged to `[kairos]`: kairos's own work on the program's
// threads, for the metadata.
struct own_work_totals {
  std::uint64_t samples = 0;
  std::int64_t cpu_ns = 0;   // CPU-time samples' weights
  std::int64_t real_ns = 0;  // real-time (running and waiting) samples' weights
};
own_work_totals own_work_in_samples();
// The causal experiments' records (lifecycle hands the experiments these functions).
void deliver_causal_experiment(const causal_experiment_record& experiment);
void deliver_causal_samples(const std::vector<causal_location_samples>& locations);
// Finished regions and new or ended threads into the database; commits when the flush interval
// has passed (always with `force`).
void flush_to_database(bool force);
// Every traced thread's calls counted (function_trace's call trees) into the database: once, at
// the end, after the last calls were closed and before the last flush.
void deliver_call_trees();
// The annotations' summaries (docs/openmp.md): each annotated region name's kind and OpenMP's
// per-thread work and wait sums; once, at the end, after the last regions were flushed.
void deliver_annotation_summaries();
// fork: the lock is held across fork; in a child (async-signal-safe) the parent's threads and
// cursors are forgotten at the child's first flush.
void delivery_lock_for_fork();
void delivery_unlock_after_fork_in_parent();
void delivery_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
