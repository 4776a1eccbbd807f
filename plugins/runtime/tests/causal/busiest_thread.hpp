// The toys' second rate: progress per CPU second of their busiest thread. Each toy's critical
// thread computes without waiting (the others wait for it), so on a machine with a core per
// thread its CPU time is the run's length; on a loaded machine, waits for a core lengthen the
// run but not the CPU time, and the toy's speedups still come out as on an idle one
// (tests/causal_tests.py holds predictions against this rate). A thread that spins while it
// waits (std::barrier) would count its spinning: barrier_rounds prints it for its condvar mode.
#pragma once

#include <time.h>

#include <algorithm>
#include <atomic>

namespace causal_toy {

inline std::atomic<long> busiest_thread_cpu_ns{0};

// Called by each of the toy's threads as it ends.
inline void note_thread_cpu() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  const long ns = now.tv_sec * 1'000'000'000L + now.tv_nsec;
  long seen = busiest_thread_cpu_ns.load();
  while (seen < ns && !busiest_thread_cpu_ns.compare_exchange_weak(seen, ns)) {
  }
}

inline double busiest_thread_cpu_seconds() { return static_cast<double>(busiest_thread_cpu_ns.load()) * 1e-9; }

}  // namespace causal_toy
