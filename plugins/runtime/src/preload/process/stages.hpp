#pragma once
// The runtime's stages as rows: what each does when the run ends, around a fork, at each of the
// service thread's ticks, and what it adds to the profile database's metadata. lifecycle.cpp
// walks the rows and names no stage for these events, so a new stage is one row here
// (docs/contributing.md, "A runtime stage"). Starting stays in lifecycle's start_stages(): each
// stage takes its own settings there, and says its own problems.
#include <span>
#include <string_view>

#include "preload/sink/profile_database.hpp"

namespace kairos::runtime {

struct thread_record;

// What lifecycle decided at init that the rows need at the end.
struct run_facts {
  bool causal_wanted = false;    // KAIROS_CAUSAL: experiments were started
  bool windows_planned = false;  // KAIROS_TRACE_PERIODS or KAIROS_TRACE_WINDOWS_FILE
};

// Every member may be null: the stage does nothing at that event.
struct stage {
  std::string_view name;
  // At the end of the run (or before an exec), in the rows' order: the producers first, so the
  // last experiment ends before the samples that drive it stop, and sampling stops before the
  // GPU's events are drained.
  void (*stop)() = nullptr;
  // The keys it adds to the database's metadata once stopped (database::metadata_key).
  void (*add_metadata)(const run_facts& facts) = nullptr;
  // The service thread's tick, in the rows' order (the database's flush comes after the
  // producers that feed it).
  void (*tick)() = nullptr;
  // fork: the prepare handler takes the locks in the rows' order (the one lock order, everywhere);
  // the parent releases them in reverse; the child (async-signal-safe code only) unlocks and
  // forgets what the parent collected, in reverse too.
  void (*lock_for_fork)() = nullptr;
  void (*unlock_in_parent)() = nullptr;
  void (*in_child)(thread_record* survivor) noexcept = nullptr;
};

std::span<const stage> runtime_stages() noexcept;

}  // namespace kairos::runtime
