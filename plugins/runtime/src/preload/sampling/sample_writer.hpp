#pragma once
// Writer ("allocator") threads: one per KAIROS_SAMPLING_ALLOCATOR_SIZE sampled threads. A writer
// takes full buffers from its lock-free hand-off stack (woken by sem_post, which is
// async-signal-safe) and, every pass, the committed prefix of its threads' filling buffers; it
// symbolizes and inserts them through the profile database, or with KAIROS_USE_TEMPORARY_FILES
// appends them to its own unnamed temporary file (O_TMPFILE: no name, gone with the process even
// after SIGKILL) and ingests that file into the database every flush interval, so a slow
// database (symbolizing new addresses) never makes a thread's buffers overflow.
#include "preload/sampling/sample_buffer.hpp"

namespace kairos::runtime {

struct thread_sampler;
struct sample_writer;

void configure_writers(int threads_per_writer, bool temporary_files, std::int64_t flush_interval_ns);
// Assigns a writer to a newly sampled thread (creating the writer thread when needed).
sample_writer* assign_writer(thread_sampler* sampler);
// From the signal handler: hands a full buffer over and wakes the writer.
void hand_over_full_buffer(sample_writer* writer, sample_buffer* buffer) noexcept;
// Final pass: stops every writer thread and drains everything into the database.
void stop_writers_and_drain();
// fork child: the parent's writer threads do not exist here; forget them.
void forget_writers_after_fork();
void writers_lock_for_fork();
void writers_unlock_after_fork_in_parent();

}  // namespace kairos::runtime
