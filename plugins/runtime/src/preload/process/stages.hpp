#pragma once
// A runtime stage is one object: a row of hooks the lifecycle calls at each event of the run (its
// start, the service thread's ticks, a fork, a thread's start and end, a window's edge, the end)
// and what it adds to the database's metadata and to the exit line's losses. lifecycle.cpp walks
// the rows and names no stage; stages.cpp lists the rows, and their order there is the order of
// the stop, of the ticks and of the locks taken for a fork. A new stage is its folder and one row
// (docs/contributing.md, "A runtime stage").
//
// A row of function pointers, not a class with virtual members: a row is a constant, initialized
// before any code runs (the constructor may run before the runtime's dynamic initializers), and
// calling a hook reads no vtable, takes no lock and allocates nothing, which the hooks that must
// be async-signal-safe (in_child, off_in_child, thread_started, thread_ending,
// signal_mask_changed, window_edge) rely on. A stage's state lives in its own files.
#include <signal.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/problem.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/process/run.hpp"

namespace kairos::runtime {

// What a stage says once it started: problems are said by the process that speaks for the launch
// (the first image of the launched process, rank 0 of an MPI launch); notes by it with
// KAIROS_VERBOSE only. `disables` turns kairos off for the run (the problems say why).
struct stage_start {
  std::vector<problem> problems;
  std::vector<problem> notes;
  bool disables = false;
};

// What a stage's start reads: the run's settings (a stage may set the default of a later stage's
// setting: windows and causal move sampling's delay), and what the run decided.
struct start_context {
  process_run& run;
  bool database_wanted = false;              // KAIROS_OUTPUT_FORMATS names a format: the producers run
  bool speaks_for_launch = false;            // this process says the launch's problems (stage_start)
  void (*window_edge)() noexcept = nullptr;  // calls every stage's window_edge
};

// What was lost, for the exit line: each stage adds its own (its metadata holds the same counts).
struct losses {
  std::uint64_t samples = 0;      // sample buffers full
  std::uint64_t region_rows = 0;  // the logs of regions and instrumented calls full
  std::uint64_t rows = 0;         // database inserts that failed
  std::int64_t unsampled_cpu_ns = 0;
  std::uint64_t threads_blocking = 0;
  std::uint64_t gpu_records = 0;  // dropped by the GPU runtime (CUPTI's buffers full)
  std::uint64_t mpi_calls = 0;    // a thread's MPI call log full
  std::int64_t lost_cpu_ns = 0;   // what the lost samples stood for
};

// Every member may be null: the stage does nothing at that event.
struct stage {
  std::string_view name;
  // At init, in the start order (the table's `start_step`, stages.cpp): reads its own settings.
  stage_start (*start)(start_context& context) = nullptr;
  // Once the process is active (the user API records), in the start order.
  stage_start (*activate)(start_context& context) = nullptr;
  // When finalize begins: no more user-API records, in the table's order.
  void (*deactivate)() noexcept = nullptr;
  // Whether it recorded, or records, anything: a process where no stage did (a fork child that
  // runs and _exits) writes nothing at its end, and does nothing that could take a lock.
  bool (*recorded)() = nullptr;
  // When finalize goes on to write: waits (bounded) until no thread is inside its calls.
  void (*quiesce)() = nullptr;
  // At the end of the run (or before an exec), in the table's order: the producers first, so the
  // last experiment ends before the samples that drive it stop, and sampling stops before the
  // GPU's events are drained.
  void (*stop)() = nullptr;
  // What it lost, once stopped.
  void (*add_losses)(losses& lost) = nullptr;
  // The keys it adds to the database's metadata once stopped (database::metadata_key).
  void (*add_metadata)(const run_facts& facts) = nullptr;
  // The service thread's tick, in the table's order (the database's flush comes after the
  // producers that feed it).
  void (*tick)() = nullptr;
  // fork: the prepare handler takes the locks in the table's order (the one lock order,
  // everywhere); the parent releases them in reverse; the child (async-signal-safe code only)
  // unlocks and forgets what the parent collected, in reverse too; a child that is not followed
  // then turns the stage off, in the table's order.
  void (*lock_for_fork)() = nullptr;
  void (*unlock_in_parent)() = nullptr;
  void (*in_child)() noexcept = nullptr;
  void (*off_in_child)() noexcept = nullptr;
  // A thread of the process starts (in reverse: the registry first; `active`: the process is
  // collecting) or ends (in the table's order: the registry last); async-signal-safe.
  void (*thread_started)(bool kairos_owned, bool active) noexcept = nullptr;
  void (*thread_ending)() noexcept = nullptr;
  // The calling thread changed its signal mask (async-signal-safe).
  void (*signal_mask_changed)(const sigset_t& mask) noexcept = nullptr;
  // A time window opened or closed (windows/window_state.hpp), on the windows' thread.
  void (*window_edge)() noexcept = nullptr;
};

// For add_metadata: one key of the database's metadata (database::metadata_key).
void add_stage_metadata(std::string_view key, std::string value);
template <class Number>
void add_stage_metadata_number(std::string_view key, Number value) {
  add_stage_metadata(key, std::to_string(value));
}
// For tick: runs `work`, and says what it threw, prefixed with `what`.
void tick_reporting(const char* what, void (*work)());

// The rows, in the order of the stop, the ticks and the fork's locks.
std::span<const stage* const> runtime_stages() noexcept;
// The same rows in the order they start.
std::span<const stage* const> runtime_stages_by_start() noexcept;

// Calls the member `hook` of every row that has one, in the table's order, or in reverse.
template <auto hook, class... Args>
void for_each_stage(Args&&... args) {
  for (const auto* row : runtime_stages())
    if (row->*hook) (row->*hook)(args...);
}
template <auto hook, class... Args>
void for_each_stage_reversed(Args&&... args) {
  const auto rows = runtime_stages();
  for (auto row = rows.rbegin(); row != rows.rend(); ++row)
    if ((*row)->*hook) ((*row)->*hook)(args...);
}

}  // namespace kairos::runtime
