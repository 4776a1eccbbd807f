#include "preload/pipeline/delivery.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

#include "preload/regions/regions.hpp"
#include "preload/sink/profile_database.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/windows.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t counter_interval_ns = 100'000'000;

struct delivery_state {
  std::mutex mutex;  // the service thread and finalize may flush at once
  std::size_t thread_cursor = 0;            // threads of the registry seen so far
  std::vector<thread_record*> unfinished;   // threads whose end is not in the database yet
  std::unordered_map<const thread_record*, std::int64_t> last_counter_ns;
  bool forget_parent = false;  // set in a fork child; done by the child's first flush
};
delivery_state* state = new delivery_state;  // never destroyed: used until the process ends

sample_clock clock_of(sample_source source) {
  return source == sample_source::cpu_time ? sample_clock::cpu_time : sample_clock::real_time;
}

// Under the mutex.
void forget_parent_if_forked() {
  if (!state->forget_parent) return;
  state->forget_parent = false;
  state->thread_cursor = 0;
  state->unfinished.clear();
  state->last_counter_ns.clear();
}

database_window database_row(const window_record& window) {
  database_window row{window.ordinal, window.spec, clock_name(window.clock), window.planned_start,
                      window.planned_end, {}, {}, {}, {}};
  if (window.opened) {
    row.actual_start = window.actual_start;
    row.start_ns = window.start_ns;
  }
  if (window.closed) {
    row.actual_end = window.actual_end;
    row.end_ns = window.end_ns;
  }
  return row;
}

}  // namespace

void deliver_samples(const sample_batch& batch) {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  database_batch rows;
  for (const auto& sample : batch) {
    rows.add_sample(*sample.thread, clock_of(sample.source), sample.time_ns, sample.weight_ns,
                    {sample.addresses, sample.frame_count}, sample.window);
    // The thread's CPU time as a counter track, at most every 100 ms per thread.
    if (sample.source != sample_source::cpu_time) continue;
    auto& last = state->last_counter_ns[sample.thread];
    if (last != 0 && sample.time_ns - last < counter_interval_ns) continue;
    last = sample.time_ns;
    rows.add_counter(*sample.thread, sample.time_ns, "thread_cpu_time_ns",
                     static_cast<double>(sample.thread_cpu_ns), sample.window);
  }
  rows.commit(false);
}

void flush_to_database(bool force) {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  threads().for_each_new(state->thread_cursor, [](thread_record& thread) {
    if (!thread.kairos_owned) state->unfinished.push_back(&thread);
  });
  database_batch rows;
  for_each_region_log([&](thread_record& thread, region_log& log) {
    log.drain([&](const region_row& region) {
      rows.add_region(thread, *region.name, region.start_ns, region.end_ns, region.depth, region.window,
                      region.clipped);
    });
  });
  for (const auto& window : take_window_changes()) rows.add_window(database_row(window));
  // Threads get their rows once the database exists (it is created by the first sample or
  // region); until then they wait here, so a thread that ended early is still listed.
  if (rows.has_file()) {
    std::erase_if(state->unfinished, [&](thread_record* thread) {
      rows.add_thread(*thread);
      if (thread->running.load(std::memory_order_acquire)) return false;
      rows.end_thread(*thread);
      return true;
    });
  }
  rows.commit(force);
}

void delivery_lock_for_fork() { state->mutex.lock(); }
void delivery_unlock_after_fork_in_parent() { state->mutex.unlock(); }
void delivery_forget_after_fork_in_child() noexcept {
  state->forget_parent = true;
  state->mutex.unlock();  // taken by this thread in delivery_lock_for_fork
}

}  // namespace kairos::runtime
