// What the causal toys share: their progress point (kairos's, or coz.h's in the builds
// benchmarks/causal makes for coz), their unit of work, and their rates per CPU second.
//
// The toys' second rate: progress per CPU second of their busiest thread. Each toy's critical
// thread computes without waiting (the others wait for it), so on a machine with a core per
// thread its CPU time is the run's length; on a loaded machine, waits for a core lengthen the
// run but not the CPU time, and the toy's speedups still come out as on an idle one
// (tests/causal_tests.py holds predictions against this rate). A thread that spins while it
// waits (std::barrier) would count its spinning: barrier_rounds prints it for its condvar mode.
// A toy whose threads take turns (pipe_round_trips) has no thread busy throughout: its CPU time of
// all threads together is its run's length on an idle machine, and that is the rate it prints.
// And how long the toy's threads waited for a core, runnable (the kernel's schedstat): a profile
// run that waited long did not have the cores its predictions assume.
#pragma once

#include <time.h>

#ifdef KAIROS_TOY_FOR_COZ
#include <coz.h>
#define mark_progress(name) COZ_PROGRESS_NAMED(name)
#else
#include <kairos/user.h>
#define mark_progress(name) kairos_progress(name)
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace causal_toy {

// `units` of work, `iterations_per_unit` each. Not inlined, so that a function-scope experiment
// finds its caller on the stack; two_threads and pipeline keep their own copy, so that every line
// their line-scope tests see sampled is in their own source.
[[gnu::noinline]] inline unsigned long work(double units, long iterations_per_unit) {
  unsigned long state = 12345;
  const auto count = static_cast<long>(units * static_cast<double>(iterations_per_unit));
  for (long i = 0; i < count; ++i) {
    state = state * 6364136223846793005ul + 1442695040888963407ul;
    asm volatile("" : "+r"(state));
  }
  return state;
}

inline std::atomic<long> busiest_thread_cpu_ns{0};
inline std::atomic<long long> threads_cpu_ns{0};
inline std::atomic<long long> threads_ran_ns{0}, threads_waited_ns{0};

// Called by each of the toy's threads as it ends.
inline void note_thread_cpu() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  const long ns = now.tv_sec * 1'000'000'000L + now.tv_nsec;
  long seen = busiest_thread_cpu_ns.load();
  while (seen < ns && !busiest_thread_cpu_ns.compare_exchange_weak(seen, ns)) {
  }
  threads_cpu_ns += ns;
  long long ran = 0, waited = 0;
  if (FILE* schedstat = std::fopen("/proc/thread-self/schedstat", "r")) {
    if (std::fscanf(schedstat, "%lld %lld", &ran, &waited) == 2) {
      threads_ran_ns += ran;
      threads_waited_ns += waited;
    }
    std::fclose(schedstat);
  }
}

inline double busiest_thread_cpu_seconds() { return static_cast<double>(busiest_thread_cpu_ns.load()) * 1e-9; }

inline double waited_for_a_core_percent() {
  const double ran = static_cast<double>(threads_ran_ns.load());
  return ran > 0 ? 100.0 * static_cast<double>(threads_waited_ns.load()) / ran : 0.0;
}

// The second line every toy prints: its rate per CPU second of the busiest thread, and how long
// its threads waited for a core, in percent of the time they ran.
inline void print_cpu_rates(const char* progress, long count) {
  std::printf(
      "%s per CPU second of the busiest thread: %.3f (its threads waited for a core %.1f%% of the time "
      "they ran)\n",
      progress, static_cast<double>(count) / busiest_thread_cpu_seconds(), waited_for_a_core_percent());
}

// The same for a toy whose threads take turns: per CPU second of its threads together.
inline void print_cpu_rates_of_turns(const char* progress, long count) {
  std::printf(
      "%s per CPU second of its threads together: %.3f (its threads waited for a core %.1f%% of the time "
      "they ran)\n",
      progress, static_cast<double>(count) / (static_cast<double>(threads_cpu_ns.load()) * 1e-9),
      waited_for_a_core_percent());
}

}  // namespace causal_toy
