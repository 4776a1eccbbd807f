#pragma once
// The time windows' control (docs/windows.md): one thread, "kairos-windows", walks the plan one
// window at a time, waiting for each edge on the window's own clock with a POSIX timer (wall and
// CPU clocks) or a perf overflow (instructions) that signals it alone, and publishes the state
// producers read (window_state.hpp). After each edge it calls `on_edge`, which lifecycle points at
// the sampler (arm or disarm every thread). What each window planned and did goes to the database
// through take_window_changes(). It knows no other stage.
#include <cstdint>
#include <string>
#include <vector>

#include <kairos/runtime/time_windows.hpp>

#include "preload/support/problems.hpp"

namespace kairos::runtime {

// A window as the database's window table records it; amounts in its clock's units, counted from
// the process's start.
struct window_record {
  std::int64_t ordinal = 0;
  std::string spec;
  window_clock clock = window_clock::realtime;
  std::int64_t planned_start = 0, planned_end = 0;
  bool opened = false;  // false: never opened (its time had passed)
  bool closed = false;
  std::int64_t actual_start = 0, actual_end = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC
};

struct windows_start {
  bool started = false;
  std::vector<problem> notes;  // said once, the program runs on (no PMU for instructions, ...)
};

using window_edge_callback = void (*)() noexcept;

// Init, on the main thread (the thread_cputime clock is its CPU time; instruction counting starts
// here and follows the threads created later). Nothing is collected until the first window opens.
windows_start start_windows(window_plan plan, window_edge_callback on_edge);
// Finalize: the open window closes now; the thread stops (bounded wait).
void stop_windows() noexcept;
// The records opened, closed or skipped since the last call (the delivery's flush).
std::vector<window_record> take_window_changes();

struct windows_summary {
  std::int64_t opened = 0;
  std::int64_t skipped = 0;  // planned, never opened
  std::int64_t edge_ns = 0;  // spent arming and disarming at the edges (on_edge), all of them
};
windows_summary windows_totals() noexcept;

// In a fork child (async-signal-safe): there is no windows thread; the child collects nothing
// more until it execs (a new image reads its own plan).
void windows_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
