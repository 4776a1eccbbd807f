#pragma once
// The sampler: every thread of the program is sampled, by CPU time (on by default) and/or by
// real time, with kairos's own threads left out. See docs/runtime.md ("Sampling") for the design.
//
// CPU time: a perf_event task-clock sampling event per thread whose overflow signal is routed to
// that thread (F_SETOWN_EX F_OWNER_TID, O_ASYNC, F_SETSIG); without perf, a POSIX timer on the
// thread's CPU clock (timer_create + SIGEV_THREAD_ID, tick-limited). Each sample's weight is the
// thread's CPU time since its previous sample, read in the handler, so estimates are right with
// either source whatever the delivered rate.
//
// Real time: no thread is ever signalled by a clock that runs while it waits (a signal ends
// nanosleep/sleep early with EINTR, whatever SA_RESTART says). While a thread runs, its own
// task-clock event at the real-time frequency samples it (user mode only: exclude_kernel, so the
// signal never lands inside a system call); while it waits, kairos's control thread, ticking at the
// real-time frequency and reading /proc/self/task/<tid>/stat, writes a "waiting" sample at the
// site of its blocking system call (/proc/self/task/<tid>/syscall).
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <string>

#include "preload/sampling/sample_buffer.hpp"

namespace kairos::runtime {

class settings;
struct sample_writer;

struct thread_sampler {
  thread_record* thread = nullptr;
  sample_writer* writer = nullptr;
  sample_buffer* buffers[2] = {nullptr, nullptr};
  int current = 0;               // the buffer being filled (handler only)
  std::int64_t last_cpu_ns = 0;  // the thread's CPU time at its previous CPU-time sample
  // Arming (under the samplers' mutex).
  int perf_fd = -1;
  timer_t timer{};
  bool has_timer = false;
  bool cpu_armed = false;
  bool realtime_armed = false;
  int realtime_perf_fd = -1;  // real-time sampler: task-clock event at its frequency (running thread)
  int stat_fd = -1;     // /proc/self/task/<tid>/stat, kept open (real-time sampler)
  int syscall_fd = -1;  // /proc/self/task/<tid>/syscall
  std::atomic<bool> finished{false};  // the thread ended: no more samples; the writer frees it
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> dropped{0};
};

struct sampling_summary {
  bool enabled = false;
  std::string cpu_source;  // "perf task-clock", "POSIX CPU timer", "" when off
  int signal_number = 0;
  std::uint64_t delivered = 0;
  std::uint64_t dropped = 0;
};

// At init, after the settings: installs the handler, starts the control thread. Returns false
// (with one "[kairos] ..." line in `problem`) when sampling cannot run; kairos goes on without it.
bool start_sampling(const settings& values, std::string& problem, std::string& note);
bool sampling_enabled() noexcept;

// On every program thread as it starts (after registration) and as it ends.
void sampling_thread_started() noexcept;
void sampling_thread_ending() noexcept;

// Finalize (or exec): disarm every thread, let the writers drain every buffer into the database.
void stop_sampling() noexcept;
sampling_summary sampling_totals() noexcept;

// fork: the samplers' lock is held across fork; in a child, what the parent armed is closed.
void sampling_lock_for_fork() noexcept;
void sampling_unlock_after_fork_in_parent() noexcept;
void sampling_after_fork_in_child(bool followed) noexcept;

}  // namespace kairos::runtime
