#pragma once
// The sampler: every thread of the program is sampled, by CPU time (on by default) and/or by
// real time, with kairos's own threads left out. See docs/runtime.md ("Sampling") for the design.
//
// CPU time: by default a perf task-clock event that counts the kernel and writes its samples
// (user registers, a stack copy) into a ring buffer that the thread's writer unwinds: no signal
// (perf_ring.hpp). Else, or for a thread's first 20 ms, a POSIX timer on the thread's CPU clock
// (timer_create + SIGEV_THREAD_ID, tick-limited), or on request the task-clock event's overflow
// signal routed to that thread (F_SETOWN_EX F_OWNER_TID, O_ASYNC, F_SETSIG). Each charges a
// system call's CPU time to the call. A signal sample's weight is the thread's CPU time since its
// previous sample, read in the handler; a ring sample's, the task-clock count's growth: so
// estimates are right whatever the delivered rate.
//
// Real time: no thread is ever signalled by a clock that runs while it waits (a signal ends
// nanosleep/sleep early with EINTR, whatever SA_RESTART says). While a thread runs, its own
// task-clock event at the real-time frequency samples it (user mode only); while it waits,
// kairos's control thread, ticking at the real-time frequency and reading
// /proc/self/task/<tid>/stat, takes a "waiting" sample at the site of its blocking system call
// (/proc/self/task/<tid>/syscall).
//
// A thread that blocks the sampling signal is not signalled at all (see thread_sampler.hpp); once
// it is 20 ms old, it is sampled without a signal for the rest of its life, through a perf ring
// buffer its writer drains and unwinds (perf_ring.hpp). Its CPU time while blocked before that,
// or where the kernel refuses the ring, is reported as unsampled.
//
// Coverage: each thread's CPU clock is read at every edge of what was sampled (sampling on or
// off, the signal blocked or not, a ring opened, each signal sample's handler entered and left),
// so what the samples do not stand for is measured part by part (cpu_coverage).
#include <signal.h>

#include <cstdint>
#include <string>

#include "preload/sampling/sample_batch.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

class settings;

// The program's threads' CPU time from their start to the end of sampling, split by what CPU-time
// sampling saw of it (docs/runtime.md, "What the samples cover"). The parts and the weights add
// up to `program_cpu_ns`; the weights' shortfall is what is left (negative: they exceed it).
struct cpu_coverage {
  std::int64_t program_cpu_ns = 0;
  std::int64_t before_sampling_ns = 0;    // before a thread's sampling first began (the delay, a first window)
  std::int64_t paused_ns = 0;             // while it was off after that (the duration, between windows)
  std::int64_t blocked_ns = 0;            // while on, blocking the signal without a ring
  std::uint64_t blocked_threads = 0;      // threads with such time
  std::int64_t after_last_sample_ns = 0;  // from each sampled stretch's last sample to its end
  std::int64_t handler_ns = 0;            // in kairos's signal handler (no weight stands for it)
  std::int64_t ring_excess_ns = 0;        // perf rings' task-clock counts beyond their threads' clocks
  std::int64_t weights_ns = 0;            // the samples' weights, lost samples' included

  std::int64_t weights_shortfall_ns() const {
    return program_cpu_ns - before_sampling_ns - paused_ns - blocked_ns - after_last_sample_ns - handler_ns -
           weights_ns;
  }
  cpu_coverage& operator+=(const cpu_coverage& other);
};

struct sampling_summary {
  bool enabled = false;
  std::string cpu_source;  // "perf ring buffer", "perf task-clock", "POSIX CPU timer", "" when off
  int signal_number = 0;
  std::string python_version;  // the CPython loaded in the process ("" without one)
  std::string python_note;     // why its frames are not read ("" when they are, or no Python)
  std::uint64_t delivered = 0;
  std::uint64_t unwound_by_tables = 0;      // of those delivered: kairos's unwind tables, not libgcc
  std::int64_t unwind_table_functions = 0;  // the functions whose unwind tables were compiled
  std::int64_t unwind_table_rows = 0;       // and their rows
  std::uint64_t dropped = 0;                // buffers or rings full: the writer fell behind
  std::int64_t lost_cpu_ns = 0;             // the CPU time no kept sample stands for (dropped, lost, throttled)
  std::uint64_t cut_stacks = 0;             // of those delivered: unwound short of the outermost frame
  std::uint64_t chained_stacks = 0;         // ring samples gone on with the kernel's frame-pointer chain
  std::uint64_t threads_by_ring = 0;        // sampled through a perf ring
  cpu_coverage coverage;                    // the whole the samples' weights are a share of, and why not all
};

// KAIROS_SAMPLING_CPUTIME or KAIROS_SAMPLING_REALTIME is on.
bool sampling_wanted(const settings& values);

// Sampling runs when it is wanted and nothing failed.
struct sampling_start {
  problem failure;  // why sampling does not run although wanted
  problem note;     // something the user should know although it runs
  problem python;   // why a CPython in the process has its frames left out
};

// At init: installs the handler, starts the control thread. Batches go to `deliver`; at most
// `max_writers` writer threads. Does nothing when sampling is not wanted.
sampling_start start_sampling(const settings& values, sample_delivery deliver, int max_writers);
bool sampling_enabled() noexcept;
// A time window opened or closed (window_state.hpp): every thread is armed or disarmed now, not
// at the control thread's next tick.
void sampling_windows_changed() noexcept;

// On every program thread as it starts (after registration) and as it ends.
void sampling_thread_started() noexcept;
void sampling_thread_ending() noexcept;
// After the calling thread's signal mask changed (the sigmask wrappers): pauses its clocks while
// the sampling signal is blocked. Async-signal-safe.
void sampling_signal_mask_changed(const sigset_t& mask) noexcept;

// Finalize (or exec): disarm every thread, let the writers deliver every buffer.
void stop_sampling() noexcept;
sampling_summary sampling_totals() noexcept;

// fork: the samplers' lock is held across fork; in a child (async-signal-safe), what the parent
// armed is closed where it is still kairos's, and the child is not sampled.
void sampling_lock_for_fork() noexcept;
void sampling_unlock_after_fork_in_parent() noexcept;
void sampling_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
