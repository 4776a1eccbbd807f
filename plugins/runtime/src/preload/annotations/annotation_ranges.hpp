#pragma once
// Ranges that need not nest (NVTX's nvtxRangeStart/End, which may end on another thread or out
// of order): not regions of a thread's call graph, but rows of their own (the annotation_range
// table), each with the thread that started it and the one that ended it. The program's threads
// add them under one lock (such ranges mark phases, not inner loops); the pipeline takes them
// every tick. Memory is bounded: past a million rows waiting, ranges are counted, not kept.
#include <cstdint>
#include <string_view>
#include <vector>

#include "preload/annotations/annotated_regions.hpp"

namespace kairos::runtime {

struct thread_record;

struct annotation_range_row {
  const char* name;  // an interned name (annotated_regions.hpp): lives until the process ends
  region_kind kind;
  thread_record* start_thread;
  thread_record* end_thread;
  std::int64_t start_ns, end_ns;
  std::int32_t window;  // the window at its start (0: no windows)
};
struct annotation_range_batch {
  std::vector<annotation_range_row> rows;
};

// A range begins on this thread; its id (never 0) ends it, from any thread. 0: not recorded.
std::uint64_t begin_annotation_range(const char* name, region_kind kind) noexcept;
void end_annotation_range(std::uint64_t id) noexcept;
// Ranges ended since the last take (the batch is cleared first).
void take_annotation_ranges(annotation_range_batch& batch);
std::uint64_t annotation_ranges_dropped() noexcept;
// fork (async-signal-safe in the child): the parent's ranges are forgotten.
void annotation_ranges_lock_for_fork();
void annotation_ranges_unlock_after_fork() noexcept;
void annotation_ranges_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
