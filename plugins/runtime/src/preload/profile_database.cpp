#include "preload/profile_database.hpp"

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbolizer.hpp>
#include <kairos/plugins/database/writer.hpp>

#include "preload/regions.hpp"
#include "preload/thread_registry.hpp"

namespace kairos::runtime {
namespace {

// On the heap, never destroyed: finalize may run after static destructors.
struct profile_database_state {
  std::mutex mutex;
  std::string path;
  std::unique_ptr<database::profile_writer> writer;
  std::unique_ptr<backtrace_symbolizer> symbols;  // created on first use, on a writer thread
  std::int64_t process_id = -1;
  std::int64_t flush_interval_ns = 1'000'000'000;
  std::int64_t last_commit_ns = 0;
  database_counts counts;
};
profile_database_state* state = nullptr;

constexpr std::int64_t counter_interval_ns = 100'000'000;

database::frame_info symbolize(std::uint64_t address) {
  if (!state->symbols) state->symbols = std::make_unique<backtrace_symbolizer>();
  const auto& symbol = state->symbols->resolve(static_cast<std::uintptr_t>(address));
  database::frame_info frame;
  frame.address = address;
  frame.module = symbol.module == "[unknown]" ? std::string{} : symbol.module;
  frame.offset = symbol.module_offset;
  frame.function = symbol.function;
  frame.file = symbol.file;
  frame.line = static_cast<std::uint32_t>(symbol.line > 0 ? symbol.line : 0);
  return frame;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Under state->mutex.
std::int64_t thread_row(thread_record& thread) {
  if (thread.database_id < 0) {
    database::thread_info info;
    info.internal_id = static_cast<std::int64_t>(thread.internal_id);
    info.sequent_id = static_cast<std::int64_t>(thread.sequent_id);
    info.tid = thread.tid;
    info.name = thread.name_text();
    info.start_ns = thread.start_ns;
    thread.database_id = state->writer->add_thread(state->process_id, info);
  }
  return thread.database_id;
}

struct counter_clock {
  thread_record* thread;
  std::int64_t last_ns;
};
std::deque<counter_clock>* counter_clocks = nullptr;  // under state->mutex

bool counter_due(thread_record* thread, std::int64_t now_ns) {
  if (!counter_clocks) counter_clocks = new std::deque<counter_clock>;
  for (auto& clock : *counter_clocks)
    if (clock.thread == thread) {
      if (now_ns - clock.last_ns < counter_interval_ns) return false;
      clock.last_ns = now_ns;
      return true;
    }
  counter_clocks->push_back({thread, now_ns});
  return true;
}

void sync_locked(bool force) {
  if (!state->writer) return;
  threads().for_each([](thread_record& thread) {
    if (thread.kairos_owned) return;
    const auto row = thread_row(thread);
    if (auto* finished = finished_regions(thread)) {
      finished->drain([row](const region_row& region) {
        state->writer->add_region(row, *region.name, region.start_ns, region.end_ns, region.depth);
        ++state->counts.regions;
      });
    }
    if (!thread.database_end_written && !thread.running.load(std::memory_order_acquire)) {
      state->writer->end_thread(row, thread.end_ns.load(std::memory_order_relaxed));
      thread.database_end_written = true;
    }
  });
  const auto now = steady_now_ns();
  if (force || now - state->last_commit_ns >= state->flush_interval_ns) {
    state->writer->commit();
    state->last_commit_ns = now;
  }
}

}  // namespace

bool open_profile_database(const std::string& path, std::string& problem) {
  if (!state) state = new profile_database_state;
  std::lock_guard lock{state->mutex};
  try {
    std::error_code ignored;
    const auto directory = std::filesystem::path{path}.parent_path();
    if (!directory.empty()) std::filesystem::create_directories(directory, ignored);
    state->writer = std::make_unique<database::profile_writer>(path, &symbolize);
    state->path = path;
    database::process_info process;
    process.pid = getpid();
    process.ppid = getppid();
    process.hostname = host_name();
    process.start_ns = steady_now_ns();
    state->process_id = state->writer->add_process(process);
    state->writer->set_metadata("host", process.hostname);
    state->writer->set_metadata("kairos_version", KAIROS_VERSION);
    state->writer->commit();
    state->last_commit_ns = steady_now_ns();
    state->counts = {};
    return true;
  } catch (const std::exception& error) {
    state->writer.reset();
    problem = fmt::format("[kairos] cannot write the profile database {}: {}", path, error.what());
    return false;
  }
}

bool profile_database_open() noexcept { return state && state->writer; }

const std::string& profile_database_path() {
  static const std::string none;
  return state ? state->path : none;
}

void database_set_metadata(std::string_view key, std::string_view value) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  if (state->writer) state->writer->set_metadata(key, value);
}

void database_add_samples(const std::vector<pending_sample>& samples) {
  if (!state || samples.empty()) return;
  std::lock_guard lock{state->mutex};
  if (!state->writer) return;
  for (const auto& sample : samples) {
    const auto thread = thread_row(*sample.thread);
    const auto stack = state->writer->add_stack({sample.addresses, sample.frame_count});
    if (sample.source == sample_source::cpu_time) {
      state->writer->add_sample(thread, sample.time_ns, sample.weight_ns, stack);
      ++state->counts.samples;
      if (counter_due(sample.thread, sample.time_ns))
        state->writer->add_counter(thread, sample.time_ns, "thread_cpu_time_ns",
                                   static_cast<double>(sample.thread_cpu_ns));
    } else {
      state->writer->add_realtime_sample(thread, sample.time_ns, sample.weight_ns, stack);
      ++state->counts.realtime_samples;
    }
  }
  const auto now = steady_now_ns();
  if (now - state->last_commit_ns >= state->flush_interval_ns) sync_locked(true);
}

void database_sync(bool force) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  sync_locked(force);
}

void set_flush_interval_ns(std::int64_t interval_ns) {
  if (!state) state = new profile_database_state;
  state->flush_interval_ns = interval_ns;
}

void database_finish(std::string_view end_reason) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  if (!state->writer) return;
  state->writer->set_metadata("end_reason", end_reason);
  state->writer->end_process(state->process_id, steady_now_ns());
  sync_locked(true);
}

database_counts database_counts_written() {
  if (!state) return {};
  std::lock_guard lock{state->mutex};
  return state->counts;
}

void close_profile_database() {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  if (state->writer) {
    sync_locked(true);
    try {  // one self-contained file: readers opened afterwards leave no -wal/-shm beside it
      state->writer->database().execute("PRAGMA journal_mode = DELETE");
    } catch (...) {
    }
  }
  state->writer.reset();
}

void database_lock_for_fork() {
  if (state) state->mutex.lock();
}
void database_unlock_after_fork_in_parent() {
  if (state) state->mutex.unlock();
}

void forget_profile_database_after_fork() {
  if (!state) return;
  // The mutexes may have been held by threads that do not exist in the child; the connection is
  // the parent's. Both are abandoned (leaked), never touched again.
  (void)state->writer.release();
  (void)state->symbols.release();
  state = nullptr;
  counter_clocks = nullptr;
}

}  // namespace kairos::runtime
