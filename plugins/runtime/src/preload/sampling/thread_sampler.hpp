#pragma once
// One sampled thread's state, shared by the signal handler (fills its buffers), the sampler
// (arms and disarms its clock) and its writer (drains the buffers and, once `finished`, frees it).
#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "preload/sampling/perf_ring.hpp"
#include "preload/sampling/sample_buffer.hpp"
#include "preload/support/private_descriptor.hpp"

namespace kairos::runtime {

struct thread_record;
struct sample_writer;

struct thread_sampler {
  thread_record* thread = nullptr;
  sample_writer* writer = nullptr;
  sample_buffer* buffers[2] = {nullptr, nullptr};
  int current = 0;               // the buffer being filled (handler only)
  std::int64_t last_cpu_ns = 0;  // the thread's CPU time as its previous CPU-time sample's handler returned
  // The perf signal's random periods (sampler.cpp: restart_perf_period; handler only): its samples
  // weigh the mean period.
  std::uint64_t period_state = 0;
  bool perf_weighted = false;              // a perf overflow was sampled: later ones weigh the mean period
  std::int64_t period_started_cpu_ns = 0;  // the thread's CPU time when the current period began
  std::int64_t period_ns = 0;              // its length (0: none drawn yet)
  // Arming: under `arming` (the control thread takes it inside the samplers' mutex; the thread
  // itself as it starts). The descriptors are also read by the thread's own signal-mask wrapper,
  // hence atomic numbers.
  std::mutex arming;
  owned_descriptor perf_event;
  std::atomic<int> perf_fd{-1};
  timer_t timer{};
  bool has_timer = false;
  std::int64_t perf_upgrade_due_ns = 0;  // on the timer until then (sampler.cpp: arm_cpu)
  std::int64_t started_ns = 0;           // steady clock
  bool cpu_armed = false;
  bool realtime_armed = false;
  owned_descriptor realtime_perf_event;  // real-time sampler: task-clock event (running thread)
  std::atomic<int> realtime_perf_fd{-1};
  owned_descriptor stat_file;     // /proc/self/task/<tid>/stat, kept open (real-time sampler)
  owned_descriptor syscall_file;  // /proc/self/task/<tid>/syscall
  // The thread blocks the sampling signal (it inherited a full mask, or called pthread_sigmask):
  // its clocks are paused, so signals never queue up against RLIMIT_SIGPENDING (the kernel then
  // falls back to SIGIO, which kills the program), and its CPU time meanwhile is counted as
  // unsampled. Written by the thread itself.
  std::atomic<bool> signal_blocked{false};
  // Coverage (sampler.cpp, "coverage"): the thread's CPU clock at each edge of what was sampled,
  // -1 outside the stretch. Its own mask changes race with arming, hence the atomics.
  std::atomic<std::int64_t> armed_since_cpu_ns{-1};    // CPU-time sampling on
  std::atomic<std::int64_t> blocked_since_cpu_ns{-1};  // blocking the signal, no ring
  std::int64_t unarmed_since_cpu_ns = 0;               // under `arming` (a thread's clock starts at 0)
  std::int64_t ring_since_cpu_ns = -1;                 // under `arming`: its ring counting
  std::int64_t end_cpu_ns = -1;                        // under `arming`: sampling ended for it
  bool ever_armed = false;                             // under `arming`
  std::int64_t before_sampling_ns = 0, paused_ns = 0, ring_clock_ns = 0;  // under `arming`
  std::atomic<std::int64_t> blocked_ns{0}, after_last_sample_ns{0}, handler_ns{0}, weights_ns{0};
  // Such a thread, once 20 ms old, is sampled without a signal for the rest of its life: a perf
  // ring buffer (perf_ring.hpp) that its writer drains. Opened by the control thread under
  // `arming`; `sampled_by_ring` is published after `ring`, and then `ring` belongs to the writer.
  perf_ring ring;
  std::atomic<bool> sampled_by_ring{false};
  std::atomic<bool> finished{false};  // the thread ended: no more samples; the writer frees it
  // Signal samples (a ring's are counted by the writers: sample_writer.hpp).
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> unwound_by_tables{0};  // of those delivered (unwind_tables.hpp)
  std::atomic<std::uint64_t> dropped{0};
  // The CPU time that dropped or lost samples stood for: counted as lost, never added to another
  // sample (one heavy sample made a function's share twenty times what it was).
  std::atomic<std::int64_t> lost_cpu_ns{0};
};

// The writer is about to free a finished thread's sampler, its ring drained for good: the ring's
// part of the process's coverage (sampler.cpp).
void ring_drained_for_good(const thread_sampler& sampler) noexcept;

}  // namespace kairos::runtime
