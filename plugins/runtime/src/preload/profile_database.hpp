#pragma once
// The process's profile database (plugins/database): created at init as <stem>.db, filled by the
// writer threads (samples) and by periodic syncs (threads, user-API regions drained from each
// thread's lock-free region log), committed every
// KAIROS_FLUSH_INTERVAL so a killed program leaves a valid database up to the last commit, and
// the source of every derived output at finalize. One profile_writer behind one mutex: writer
// threads symbolize and insert in turn (SQLite has one writer per database anyway).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "preload/sampling/sample_buffer.hpp"

namespace kairos::runtime {

struct thread_record;

// One sample as a writer drained it (copied out of the signal-time buffer).
struct pending_sample {
  thread_record* thread = nullptr;
  std::int64_t time_ns = 0;
  std::int64_t weight_ns = 0;
  std::int64_t thread_cpu_ns = 0;
  sample_source source = sample_source::cpu_time;
  std::uint16_t frame_count = 0;
  std::uint64_t addresses[sample_stack_depth] = {};  // lookup addresses, leaf first
};

struct database_counts {
  std::uint64_t samples = 0;
  std::uint64_t realtime_samples = 0;
  std::uint64_t regions = 0;
};

// Creates <path> (must not exist). Returns false with a "[kairos] ..." problem when it cannot.
bool open_profile_database(const std::string& path, std::string& problem);
bool profile_database_open() noexcept;
const std::string& profile_database_path();

// Metadata rows (settings, command line, host, version, sampler facts).
void database_set_metadata(std::string_view key, std::string_view value);
void database_add_samples(const std::vector<pending_sample>& samples);
// Threads and their finished user-API regions (each thread's region_log) into the database; commits when the flush interval has passed
// (always with `force`).
void database_sync(bool force);
void set_flush_interval_ns(std::int64_t interval_ns);
// The process's end time, a last sync and commit; the database stays open for reading.
void database_finish(std::string_view end_reason);
database_counts database_counts_written();
// Closes the writer (before exec, or at the very end). Afterwards every call is a no-op.
void close_profile_database();
// fork: the database's lock is held across fork (taken before the thread registry's), so a
// followed child never starts with SQLite or the symbolizer half-way through an update.
void database_lock_for_fork();
void database_unlock_after_fork_in_parent();
// In a forked child: the parent's connection must not be used (nor closed): forget it.
void forget_profile_database_after_fork();

}  // namespace kairos::runtime
