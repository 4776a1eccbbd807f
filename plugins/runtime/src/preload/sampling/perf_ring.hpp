#pragma once
// Sampling a thread without a signal: a perf task-clock event on the thread whose samples the
// kernel writes into a ring buffer mapped by kairos, each with the thread's user registers
// (PERF_SAMPLE_REGS_USER: ip, sp, bp), a copy of the top of its user stack
// (PERF_SAMPLE_STACK_USER), the return addresses of its frame-pointer chain as the kernel reads
// them (PERF_SAMPLE_CALLCHAIN, user part: unbounded by the copy), its task-clock count
// (PERF_SAMPLE_READ: the weight is the count's growth since the previous sample) and its time. A
// writer thread drains the ring and unwinds each copy with kairos's unwind tables
// (kairos::walk_copied_stack), going on with the chain where the copy ends, off the sampled
// thread: the thread itself never runs a line of kairos's, so it may block every signal (liblzma's
// workers do).
//
// The ring is opened, enabled and disabled under the thread's arming lock (sampler.cpp), read by
// the writer alone (sample_writer.cpp), and closed by whoever frees the thread's sampler.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "preload/sampling/sample_batch.hpp"
#include "preload/support/private_descriptor.hpp"

namespace kairos::runtime {

struct thread_record;

struct perf_ring {
  owned_descriptor event;
  void* mapping = nullptr;  // the metadata page, then the data pages
  std::size_t mapping_size = 0;
  bool counts_kernel = false;
  std::int64_t period_ns = 0;
  std::uint64_t last_count = 0;       // the task-clock count at the previous sample (ns)
  bool unseen_since_sample = false;   // samples lost, throttled or unreadable since the previous one
  std::int64_t weights_ns = 0;        // the count's growth over its samples, lost time included (the writer's)
  std::int64_t cpu_at_open_ns = 0;    // the thread's CPU time when the count started
  std::vector<unsigned char> record;  // a record that wraps around the ring's end, made whole
};

// Opens a disabled ring on thread `tid` sampling every `period_ns` of its CPU time, counting the
// kernel where the kernel allows it. False with errno set when the kernel refuses.
bool open_perf_ring(perf_ring& ring, pid_t tid, std::int64_t period_ns);
void set_perf_ring_running(perf_ring& ring, bool running) noexcept;
// Async-signal-safe (a fork child closes its copies with it).
void close_perf_ring(perf_ring& ring) noexcept;
// What the ring counted after its last sample drained: once disabled for good and drained.
std::int64_t perf_ring_tail_ns(const perf_ring& ring) noexcept;

struct ring_drain {
  std::uint64_t samples = 0;            // appended to the batch
  std::uint64_t unwound_by_tables = 0;  // of those, with frames walked (the rest: the leaf alone)
  std::uint64_t cut_stacks = 0;         // of those, stopped before the outermost frame ([stack cut])
  std::uint64_t chained_stacks = 0;     // of those, gone on with the kernel's frame-pointer chain
  std::uint64_t lost = 0;               // the kernel's LOST records' samples: the ring was full
  std::int64_t lost_ns = 0;             // the CPU time no sample was kept for (lost, throttled, unreadable)
};
// Appends the ring's samples since the last drain to `batch` (writer thread).
ring_drain drain_perf_ring(perf_ring& ring, thread_record* thread, sample_batch& batch);

}  // namespace kairos::runtime
