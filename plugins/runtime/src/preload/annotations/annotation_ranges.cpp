#include "preload/annotations/annotation_ranges.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "preload/support/clock.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

constexpr std::size_t max_waiting_rows = 1'000'000;

struct open_range {
  const char* name;
  region_kind kind;
  thread_record* thread;
  std::int64_t start_ns;
  std::int32_t window;
};

struct ranges_state {
  std::mutex mutex;
  std::uint64_t next_id = 1;
  std::unordered_map<std::uint64_t, open_range> open;
  std::vector<annotation_range_row> ended;
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<bool> forget_parent{false};
};
ranges_state* state = new ranges_state;  // never destroyed: ranges may end until the process ends

// Under the lock.
void forget_parent_if_forked() {
  if (!state->forget_parent.exchange(false)) return;
  state->open.clear();
  state->ended.clear();
}

}  // namespace

std::uint64_t begin_annotation_range(const char* name, region_kind kind) noexcept {
  if (inside_kairos || !inside_window()) return 0;
  const char* copy = intern_annotated_name(name, kind);
  if (copy == nullptr) return 0;
  const auto start_ns = steady_now_ns();
  reentry_guard guard;
  auto& thread = current_thread();
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  const auto id = state->next_id++;
  state->open.emplace(id, open_range{copy, kind, &thread, start_ns, current_window()});
  return id;
}

void end_annotation_range(std::uint64_t id) noexcept {
  if (id == 0 || inside_kairos) return;
  const auto end_ns = steady_now_ns();
  reentry_guard guard;
  auto& thread = current_thread();
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  const auto found = state->open.find(id);
  if (found == state->open.end()) return;
  const auto range = found->second;
  state->open.erase(found);
  if (state->ended.size() >= max_waiting_rows) {
    state->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  state->ended.push_back({range.name, range.kind, range.thread, &thread, range.start_ns, end_ns, range.window});
}

void take_annotation_ranges(annotation_range_batch& batch) {
  batch.rows.clear();
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  batch.rows.swap(state->ended);
}

std::uint64_t annotation_ranges_dropped() noexcept { return state->dropped.load(std::memory_order_relaxed); }

void annotation_ranges_lock_for_fork() { state->mutex.lock(); }
void annotation_ranges_unlock_after_fork() noexcept { state->mutex.unlock(); }
void annotation_ranges_forget_after_fork_in_child() noexcept { state->forget_parent.store(true); }

}  // namespace kairos::runtime
