#pragma once
// Causal profiling (docs/causal.md): virtual speedups, as Coz does them (Curtsinger & Berger,
// SOSP 2015). While an experiment "speeds up" a location (a source line, or a function) by s,
// each CPU-time sample of a thread inside it (anywhere on its stack) stands for s x the sample's
// CPU time saved, and every other thread is delayed by that much; the change in the progress
// points' rates then predicts what really making the location faster would gain.
//
// Delay accounting: a global count of delays owed (ns) and one per thread. A thread sampled in
// the selected location adds to its own count and to the global one, released to the others at
// the pace its thread incurred it (over its next running time as long as the sample's CPU time);
// a thread whose count is behind what is released sleeps the difference in its signal handler
// (nanosleep: async-signal-safe) or before it blocks, and catches up. A thread woken by another
// (mutex, condition variable, join, barrier, semaphore: futex, pipe: blocking_calls.cpp) is
// credited with the delays released while it waited, since its waker paid them before waking
// it; a thread pays what it owes before it wakes another.
//
// Locations are known by address: the handler looks each frame up in an insert-only table that
// the experiments' thread fills in (symbolizing off the hot path), so the handler never
// symbolizes, allocates or locks.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "preload/causal/causal_batch.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct causal_options {
  std::string scope = "line";      // "line" or "function"
  std::string select;              // regex: only these locations are experimented on ("": any sampled)
  std::vector<int> speedups;       // percent, multiples of 5 ({}: coz's schedule, 0..100 with 0 weighted)
  std::string include, exclude;    // regexes over a location's source file or function
  std::string binaries;            // regex over module paths ("": the main program)
  std::int64_t experiment_ns = 0;  // an experiment's first length (doubled while too few visits)
  std::int64_t cooloff_ns = 0;
};

// At init, before sampling starts: the experiments' thread. A problem when it cannot run.
problem start_causal(const causal_options& options, causal_delivery deliver);
bool causal_running() noexcept;
// Finalize: ends the experiment under way (kept when its progress points were visited enough)
// and hands over the samples per location.
void stop_causal() noexcept;
// fork: a child runs no experiments and owes no delays.
void causal_forget_after_fork_in_child() noexcept;

// The sampling signal handler, after a CPU-time sample of a program thread: `addresses` are the
// stack's lookup addresses, leaf first; `weight_ns` the CPU time the sample stands for;
// `running_cpu_ns` the CPU time the thread ran since its previous sample's handler ended.
// Async-signal-safe; it may sleep the thread (the delays).
void causal_on_sample(const std::uint64_t* addresses, std::size_t count, std::int64_t weight_ns,
                      std::int64_t running_cpu_ns) noexcept;

// Around the program's blocking calls (blocking_calls.cpp) and as a thread ends.
void causal_before_blocking() noexcept;
// Whether the wake-up was credited (an experiment was under way and another thread ended the wait).
bool causal_after_blocking(bool woken_by_another_thread) noexcept;
void causal_catch_up() noexcept;

// Why no experiment ran, when none did.
enum class causal_idle : std::uint8_t { ran, no_samples_in_scope, nothing_selected, no_progress_point };

struct causal_summary {
  causal_idle idle = causal_idle::ran;
  std::uint64_t experiments = 0;
  std::uint64_t experiments_too_few_visits = 0;
  std::int64_t delay_ns = 0;      // delays inserted, all experiments
  std::int64_t overslept_ns = 0;  // beyond what was asked (nanosleep's granularity)
  // Of the wall time the program's threads ran or were ready to run during experiments (between
  // samples, outside waits), the share they had a core: the rest went to other processes or, in a
  // VM, to the hypervisor's other guests. 0: not measured.
  std::int64_t core_share_permille = 0;
  std::uint64_t locations = 0;             // distinct locations in scope seen
  std::uint64_t addresses_unresolved = 0;  // the address table was full
  std::uint64_t wakeups_credited = 0;      // waits that another thread ended, during experiments
};
causal_summary causal_totals() noexcept;

}  // namespace kairos::runtime
