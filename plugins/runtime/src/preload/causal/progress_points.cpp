#include "preload/causal/progress_points.hpp"

#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>

namespace kairos::runtime {
namespace {

constexpr std::size_t max_points = 1024;

struct progress_point {
  std::string name;
  progress_kind kind;
  progress_counter visits;  // throughput visits, or latency begins
  progress_counter ends;
};

// A name's address to its counter, filled as call sites are first seen. Insert-only open
// addressing, so a reader needs no lock: a key is published after its value.
struct pointer_cache {
  static constexpr std::size_t slots = 4096;
  struct slot {
    std::atomic<const char*> name{nullptr};
    std::atomic<progress_counter*> counter{nullptr};
  };
  slot table[slots];

  static std::size_t first_slot(const char* name, int which) noexcept {
    auto key = reinterpret_cast<std::uintptr_t>(name) * 0x9e3779b97f4a7c15ull + static_cast<unsigned>(which);
    return static_cast<std::size_t>(key >> 52) % slots;
  }
};

struct progress_state {
  std::mutex mutex;                   // creating a point and reading them all
  std::deque<progress_point> points;  // never moves a point: counters are handed out by address
  std::atomic<std::uint64_t> refused{0};
  pointer_cache cache[3];  // throughput, latency begins, latency ends
};
progress_state* state = new progress_state;  // never destroyed: points may be bumped until the end

progress_counter* create_or_find(progress_kind kind, bool end, std::string_view name) {
  std::lock_guard lock{state->mutex};
  for (auto& point : state->points)
    if (point.kind == kind && point.name == name) return end ? &point.ends : &point.visits;
  if (state->points.size() == max_points) {
    state->refused.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto& point = state->points.emplace_back();
  point.name = name;
  point.kind = kind;
  return end ? &point.ends : &point.visits;
}

progress_counter* cached_counter(progress_kind kind, bool end, const char* name) noexcept {
  const int which = kind == progress_kind::throughput ? 0 : end ? 2 : 1;
  auto& cache = state->cache[which];
  auto index = pointer_cache::first_slot(name, which);
  for (std::size_t probe = 0; probe < pointer_cache::slots; ++probe, index = (index + 1) % pointer_cache::slots) {
    auto& slot = cache.table[index];
    const char* key = slot.name.load(std::memory_order_acquire);
    if (key == name) return slot.counter.load(std::memory_order_relaxed);
    if (key != nullptr) continue;
    auto* counter = progress_counter_for(kind, end, name);
    if (!counter) return nullptr;
    // Another thread may claim the slot first; it caches the same counter, so either is right.
    std::lock_guard lock{state->mutex};
    if (slot.name.load(std::memory_order_relaxed) == nullptr) {
      slot.counter.store(counter, std::memory_order_relaxed);
      slot.name.store(name, std::memory_order_release);
    }
    return counter;
  }
  return progress_counter_for(kind, end, name);  // the cache is full: found by contents each time
}

void bump(progress_kind kind, bool end, const char* name) noexcept {
  if (!name) return;
  if (auto* counter = cached_counter(kind, end, name)) counter->count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

progress_counter* progress_counter_for(progress_kind kind, bool end, const char* name) noexcept {
  if (!name) return nullptr;
  try {
    return create_or_find(kind, end, std::string_view{name, ::strnlen(name, 256)});
  } catch (...) {  // out of memory: the point is not counted
    state->refused.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
}

void progress_visit(const char* name) noexcept { bump(progress_kind::throughput, false, name); }
void progress_begin(const char* name) noexcept { bump(progress_kind::latency, false, name); }
void progress_end(const char* name) noexcept { bump(progress_kind::latency, true, name); }

std::vector<progress_reading> read_progress_points() {
  std::vector<progress_reading> readings;
  std::lock_guard lock{state->mutex};
  readings.reserve(state->points.size());
  for (const auto& point : state->points)
    readings.push_back({point.name, point.kind,
                        static_cast<std::int64_t>(point.visits.count.load(std::memory_order_relaxed)),
                        static_cast<std::int64_t>(point.ends.count.load(std::memory_order_relaxed))});
  return readings;
}

std::uint64_t progress_points_refused() noexcept { return state->refused.load(std::memory_order_relaxed); }

}  // namespace kairos::runtime

// coz.h's entry point (coz's counter types: 1 throughput, 2 a latency point's begin, 3 its end).
extern "C" __attribute__((visibility("default"))) kairos::runtime::progress_counter* _coz_get_counter(
    int type, const char* name) {
  using kairos::runtime::progress_kind;
  switch (type) {
    case 1:
      return kairos::runtime::progress_counter_for(progress_kind::throughput, false, name);
    case 2:
      return kairos::runtime::progress_counter_for(progress_kind::latency, false, name);
    case 3:
      return kairos::runtime::progress_counter_for(progress_kind::latency, true, name);
    default:
      return nullptr;
  }
}
