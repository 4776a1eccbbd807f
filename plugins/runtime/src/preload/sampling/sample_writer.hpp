#pragma once
// Writer threads, sized by the threads that are alive: a sampled thread is served by the writer
// with the fewest live threads, a new writer starts only when every writer serves
// KAIROS_SAMPLING_ALLOCATOR_SIZE live threads, and a writer left with no thread retires (one
// stays). A program that churns 100,000 short threads, 8 at a time, keeps one writer.
// A writer takes full buffers from its lock-free hand-off stack (woken by sem_post, which is
// async-signal-safe) and, every pass, the committed prefix of its threads' filling buffers, and
// hands them on as sample batches; with KAIROS_USE_TEMPORARY_FILES it first appends them to its
// own unnamed temporary file (O_TMPFILE: no name, gone with the process even after SIGKILL) and
// delivers that file every flush interval, so a slow database (symbolizing new addresses) never
// makes a thread's buffers overflow.
#include <cstdint>

#include "preload/sampling/sample_batch.hpp"
#include "preload/sampling/sample_buffer.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct thread_sampler;
struct sample_writer;

// `max_writers`: at most that many writer threads (a program near its RLIMIT_NPROC).
void configure_writers(int threads_per_writer, int max_writers, bool temporary_files, std::int64_t flush_interval_ns,
                       sample_delivery deliver);
// A newly sampled thread gets its writer (a new writer thread when every one is full); nullptr
// when no writer thread can be started.
sample_writer* assign_writer(thread_sampler* sampler);
// An ended thread that was never sampled (most short threads) gives its buffers back at once
// and its sampler is freed; false when the writer must deliver what it holds (or is busy).
bool release_if_never_sampled(sample_writer* writer, thread_sampler* sampler) noexcept;
// The control thread, under the thread's arming lock: the thread leaves its perf ring (an
// interpreter started: sampler.cpp). The ring is disabled, what it holds appended to `batch`,
// and it is closed, between two of the writer's passes.
void take_back_ring(sample_writer* writer, thread_sampler* sampler, sample_batch& batch);
// The sampled thread has ended: one live thread fewer.
void writer_thread_ended(sample_writer* writer) noexcept;
// From the signal handler: hands a full buffer over and wakes the writer.
void hand_over_full_buffer(sample_writer* writer, sample_buffer* buffer) noexcept;
// Final pass: stops every writer thread and delivers everything.
void stop_writers_and_drain();
// How many writer threads run now (the churn benchmark and tests check the bound).
int running_writers() noexcept;
// What the writers learnt as they drained (perf rings' samples and losses, the stacks they marked
// cut), whichever thread the samples were of: counted here, since a thread's own counts are
// summed when it ends, before its writer's last pass.
struct writer_counts {
  std::uint64_t ring_samples = 0, ring_unwound_by_tables = 0, ring_lost = 0;
  std::int64_t ring_lost_ns = 0;
  std::uint64_t cut_stacks = 0, chained_stacks = 0;
};
writer_counts writers_counts() noexcept;
// The first problem a writer met (a spill file that could not be written); later ones counted.
problem writers_problem();
// fork.
void writers_lock_for_fork();
void writers_unlock_after_fork_in_parent();
void writers_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
