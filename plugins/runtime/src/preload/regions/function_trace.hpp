#pragma once
// Traced calls (a producer): instrumented functions and user-API regions; with
// KAIROS_COMPONENTS=wall_clock (the default) the regions whole, else their rows only (see
// push_region_row). Functions come through the -finstrument-functions hooks,
// __cyg_profile_func_enter and _exit, exported by libkairos.so, or XRay's handler for a program
// built with XRay (its sleds patched at run time, see kairos_xray_attach); regions through
// push_traced_region and pop_traced_region. The hot path writes a (ticks, what) event into the
// calling thread's ring and nothing else. Events become rows later, in batches, on whichever thread
// holds the ring's processing flag: the service thread every tick, finalize at the end, or the
// thread itself when its ring is full (so nothing is ever dropped and memory stays bounded). A
// batch matches enters with exits on a shadow stack, applies the filters (decided once per
// function) and the minimum duration, and appends each call that passes to the thread's
// region_log as a row that names the function by address (the sink symbolizes it) or the region by
// name. Every call the filters pass, short or not, is also counted in the thread's call_tree,
// which reaches the database at the end: the call graphs' counts are exact. A traced user-API region also goes into the
// thread's core call graph (the region report), with its wall time; no region is left out for being short.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "preload/regions/call_tree.hpp"
#include "preload/regions/region_log.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct thread_record;

struct function_trace_options {
  bool hooks = true;  // KAIROS_INSTRUMENT: off, the hooks return at once (user-API regions stay traced)
  // POSIX extended regular expressions searched in the demangled function name and in its source
  // file; an empty include matches everything, an empty exclude nothing.
  std::string include, exclude, file_include, file_exclude;
  bool system = false;               // also the standard library's functions (std::, __gnu_cxx::, ...)
  std::int64_t min_duration_ns = 0;  // shorter calls stay in their caller's time, without a row
  // Asks the rows' consumer to drain now (false: no consumer will): a thread whose rows pile up
  // faster than the consumer's ticks take them calls it, then waits (bounded) instead of dropping
  // rows. Null: rows past the bound are dropped.
  bool (*request_drain)() noexcept = nullptr;
};

// Checks the options (a problem names the bad expression: the hooks are then off) and takes them.
// The tick clock is calibrated later, by the first thread that traces.
problem configure_function_trace(const function_trace_options& options);

// Whether user-API regions can be traced (configure_function_trace was called).
bool traced_regions_available() noexcept;
// The user API's functions for traced regions: a pop that names no open region is reported and
// ignored, as with stored regions; disabling a thread makes its later pushes and pops no-ops.
void push_traced_region(const char* name);
void pop_traced_region(const char* name);
void disable_traced_thread();
void enable_traced_thread();
// The row of a stored region (regions.cpp, KAIROS_COMPONENTS beyond wall_clock): made here, in the
// thread's order with its instrumented functions, with no call-graph node (the bundle has the
// region's statistics). Called only for pushes and pops regions.cpp accepted.
void push_region_row(const char* name);
void pop_region_row(const char* name);
// Whether the hooks record (lifecycle: on once init is done, off when finalize starts). A program
// built with XRay has its sleds patched while on, unpatched (nops) while off.
void set_function_trace_accepting(bool accepting) noexcept;
// A time window opened or closed: XRay's sleds are patched only inside windows.
void function_trace_windows_changed() noexcept;

// Every thread's pending events into rows. With `closing`, calls still open are closed now (their
// rows end here, marked clipped 2) and a thread busy with its own batch is waited for, bounded.
void process_function_events(bool closing);

// Rows recorded by this process image (instrumented calls and traced regions), and the events
// (entries, exits, pushes, pops) its batches read: every call that reached a hook, row or not.
std::uint64_t function_calls_recorded();
std::uint64_t traced_events();
// Whether this process image traced anything: rows made, or events waiting for their batch.
bool traced_anything();
// Rows of regions and instrumented calls dropped because the database fell behind (region_log's
// bound).
std::uint64_t traced_rows_dropped();

// Every thread with instrumented calls, with its log of rows (for the consumer).
void for_each_function_log(const std::function<void(thread_record&, region_log&)>& visit);
// Every traced thread's calls counted, short ones too (call_tree.hpp): at the end, once
// process_function_events(true) has closed every call.
void for_each_call_tree(const std::function<void(thread_record&, std::span<const call_tree_row>)>& visit);

// fork: the list's lock is held across fork. In a child (async-signal-safe) the parent's events and
// open calls are dropped at once; its rows and region report are forgotten at the child's first
// traced call, which also resumes tracing (before exit, whose thread_local destructors end the
// main thread's region report). An unfollowed child then turns tracing off for good.
void function_trace_lock_for_fork();
void function_trace_unlock_after_fork() noexcept;
void function_trace_forget_after_fork_in_child() noexcept;
void function_trace_off_in_child() noexcept;

}  // namespace kairos::runtime
