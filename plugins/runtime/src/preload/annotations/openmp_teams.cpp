#include "preload/annotations/openmp_teams.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {

struct openmp_region {
  std::string name;
  struct thread_sums {
    std::uint64_t instances = 0;
    std::int64_t work_ns = 0, wait_ns = 0;
  };
  std::mutex mutex;  // the sums: one lock per instance's end, by its encountering thread
  std::vector<thread_sums> threads;
};

namespace {

struct teams_state {
  std::mutex mutex;  // the regions' map
  std::unordered_map<const void*, openmp_region*> regions;
  std::deque<openmp_region> storage;  // never moves an element: names and sums stay put
  std::atomic<std::uint64_t> instances{0};
  std::atomic<bool> forget_parent{false};
};
teams_state* state = new teams_state;  // never destroyed: runtimes call until the process ends
std::atomic<bool> recording{false};
std::atomic<const char*> runtime{nullptr};

// A thread's last regions by code address: a parallel construct seen again costs a compare.
struct recent_region {
  const void* code = nullptr;
  openmp_region* region = nullptr;
};
[[gnu::tls_model("initial-exec")]] thread_local std::array<recent_region, 16> recent_regions{};

// A thread's teams, by the depth of the parallel regions it encountered (nested ones go deeper).
struct team_pool {
  std::vector<std::unique_ptr<openmp_team>> teams;
  std::size_t depth = 0;
};
thread_local team_pool* this_thread_pool = nullptr;  // made at the thread's first region

// Under the map's lock.
void forget_parent_if_forked() {
  if (!state->forget_parent.exchange(false)) return;
  for (auto& region : state->storage) {
    std::lock_guard lock{region.mutex};
    region.threads.clear();
  }
  state->instances.store(0);
}

}  // namespace

bool openmp_recording() noexcept { return recording.load(std::memory_order_relaxed); }
void set_openmp_recording(bool on) noexcept { recording.store(on, std::memory_order_release); }
void set_openmp_runtime(const char* name) noexcept { runtime.store(name, std::memory_order_release); }
const char* openmp_runtime_name() noexcept { return runtime.load(std::memory_order_acquire); }

openmp_region* find_openmp_region(const void* code, bool function_entry, const void* caller) {
  auto& recent = recent_regions[(reinterpret_cast<std::uintptr_t>(code) >> 4) % recent_regions.size()];
  if (recent.code == code && recent.region != nullptr) [[likely]]
    return recent.region;
  reentry_guard guard;
  {
    std::lock_guard lock{state->mutex};
    if (const auto found = state->regions.find(code); found != state->regions.end()) {
      recent = {code, found->second};
      return found->second;
    }
  }
  // Named outside the lock: the first lookup may load the symbolizer (milliseconds).
  auto name = "omp parallel " + code_location(code, function_entry, caller);
  std::lock_guard lock{state->mutex};
  auto& region = state->regions[code];
  if (region == nullptr) {
    region = &state->storage.emplace_back();
    region->name = std::move(name);
  }
  recent = {code, region};
  return region;
}

const char* name_of(const openmp_region& region) noexcept { return region.name.c_str(); }

openmp_team* begin_openmp_team(openmp_region* region, std::uint32_t threads) {
  if (this_thread_pool == nullptr) [[unlikely]] {
    reentry_guard guard;
    this_thread_pool = new team_pool;  // kept until the process ends, like every thread's data
  }
  auto& pool = *this_thread_pool;
  if (pool.depth == pool.teams.size()) [[unlikely]] {
    reentry_guard guard;
    pool.teams.push_back(std::make_unique<openmp_team>());
  }
  auto* team = pool.teams[pool.depth++].get();
  team->region = region;
  threads = std::max<std::uint32_t>(threads, 1);
  if (team->capacity < threads) [[unlikely]] {
    reentry_guard guard;
    team->members = std::make_unique<openmp_member[]>(threads);
    team->capacity = threads;
  }
  return team;  // every member's slot was cleared at the team's last end
}

void end_openmp_team(openmp_team* team, std::int64_t end_ns) {
  auto& pool = *this_thread_pool;
  if (pool.depth > 0) --pool.depth;
  auto& region = *team->region;
  reentry_guard guard;
  if (state->forget_parent.load(std::memory_order_relaxed)) [[unlikely]] {
    std::lock_guard lock{state->mutex};
    forget_parent_if_forked();
  }
  std::lock_guard lock{region.mutex};
  for (std::uint32_t index = 0; index < team->capacity; ++index) {
    auto& member = team->members[index];
    const auto start = member.start_ns.load(std::memory_order_acquire);
    if (start == 0) continue;
    const auto arrival = member.arrival_ns.load(std::memory_order_acquire);
    const auto ended = member.end_ns.load(std::memory_order_acquire);
    const auto stop = arrival != 0 ? arrival : ended != 0 ? std::min(ended, end_ns) : end_ns;
    const auto tasks = member.tasks_after_arrival_ns.load(std::memory_order_acquire);
    const auto waits = member.wait_ns.load(std::memory_order_acquire);
    if (region.threads.size() <= index) region.threads.resize(index + 1);
    auto& sums = region.threads[index];
    ++sums.instances;
    sums.work_ns += std::max<std::int64_t>(stop - start - waits + tasks, 0);
    sums.wait_ns += std::max<std::int64_t>(waits + (end_ns - stop) - tasks, 0);
    member.start_ns.store(0, std::memory_order_relaxed);
    member.arrival_ns.store(0, std::memory_order_relaxed);
    member.end_ns.store(0, std::memory_order_relaxed);
    member.wait_ns.store(0, std::memory_order_relaxed);
    member.tasks_after_arrival_ns.store(0, std::memory_order_relaxed);
  }
  state->instances.fetch_add(1, std::memory_order_relaxed);
}

std::vector<openmp_thread_time> openmp_thread_times() {
  std::vector<openmp_thread_time> rows;
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  for (auto& region : state->storage) {
    std::lock_guard region_lock{region.mutex};
    for (std::uint32_t index = 0; index < region.threads.size(); ++index) {
      const auto& sums = region.threads[index];
      if (sums.instances > 0) rows.push_back({region.name, index, sums.instances, sums.work_ns, sums.wait_ns});
    }
  }
  return rows;
}

std::uint64_t openmp_parallel_regions() noexcept { return state->instances.load(std::memory_order_relaxed); }

void openmp_lock_for_fork() { state->mutex.lock(); }
void openmp_unlock_after_fork() noexcept { state->mutex.unlock(); }
void openmp_forget_after_fork_in_child() noexcept { state->forget_parent.store(true); }

}  // namespace kairos::runtime
