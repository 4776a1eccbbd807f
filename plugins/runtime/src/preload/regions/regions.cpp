#include "preload/regions/regions.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>
#include <kairos/storage/stored.hpp>

#include "preload/causal/progress_points.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/region_rules.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

template <class Tuple>
struct list_of;
template <class... Components>
struct list_of<std::tuple<Components...>> {
  using type = component_list<Components...>;
};

// Every built-in component a region can measure; KAIROS_COMPONENTS switches members on by name.
using region_components = list_of<builtin_components>::type;
using region_bundle = stored<region_components>;

struct open_region {
  const std::string* name = nullptr;  // interned; the bundle's label views it
  // Empty: pushed while collection was off, or outside every window.
  std::optional<region_bundle> bundle;
};

struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
};

// One thread's regions; kept until exit (data outlives the thread).
struct thread_regions {
  explicit thread_regions(thread_record& owner) : thread{&owner} {}
  thread_record* thread;
  // Set while the thread is inside a user-API call, so finalize can wait for it to leave.
  std::atomic<bool> busy{false};
  std::atomic<bool> disabled{false};  // kairos_disable_thread()
  std::deque<open_region> stack;
  // Region names, copied once per distinct name; a push after that allocates nothing. Nodes of an
  // unordered_set never move, so bundle labels may point at them.
  std::unordered_set<std::string, name_hash, std::equal_to<>> names;

  const std::string* intern(std::string_view name) {
    if (auto found = names.find(name); found != names.end()) return &*found;
    return &*names.emplace(name).first;
  }
};

struct regions_globals {
  std::mutex mutex;  // the list
  std::deque<thread_regions> list;
};
regions_globals& all() {
  static auto* globals = new regions_globals;  // never destroyed: used until the process ends
  return *globals;
}

constexpr std::size_t component_count = std::tuple_size_v<builtin_components>;

std::array<bool, component_count> enabled_components{};
bool only_wall_clock = false;
bool keep_region_rows = false;
std::atomic<bool> accepting{false};
std::atomic<std::uint64_t> pushes{0};
std::atomic<bool> forget_parent_regions{false};  // set in a fork child, done at its first call
[[gnu::tls_model("initial-exec")]] thread_local thread_regions* this_thread_regions = nullptr;

template <std::size_t... I>
void apply_switches(region_components& bundle, std::index_sequence<I...>) {
  ((enabled_components[I] ? void(bundle.enable<std::tuple_element_t<I, region_components::component_types>>())
                          : bundle.disable<std::tuple_element_t<I, region_components::component_types>>()),
   ...);
}

thread_regions& this_thread() {
  if (this_thread_regions) return *this_thread_regions;
  auto& record = current_thread();
  std::lock_guard lock{all().mutex};
  this_thread_regions = &all().list.emplace_back(record);
  return *this_thread_regions;
}

void forget_parent_regions_now() {
  std::lock_guard lock{all().mutex};
  for (auto& regions : all().list) regions.stack.clear();
  thread_graphs::instance().clear();
}

// Runs `work` on the calling thread's regions while the user API records, with the thread marked
// busy (finalize waits for it) and the re-entry guard set; returns whether it ran.
template <class Work>
bool on_this_thread(Work&& work) {
  if (inside_kairos || !accepting.load(std::memory_order_acquire)) return false;
  reentry_guard guard;
  if (forget_parent_regions.exchange(false)) forget_parent_regions_now();
  auto& regions = this_thread();
  regions.busy.store(true, std::memory_order_seq_cst);
  const bool run = accepting.load(std::memory_order_seq_cst) && !regions.disabled.load(std::memory_order_relaxed);
  if (run) work(regions);
  regions.busy.store(false, std::memory_order_release);
  return run;
}

// A region's row is made by the traced calls (function_trace.hpp), as an instrumented function's
// is: both then nest on one depth and reach the database in the order they ended, and the rows
// follow time windows one way. Called once the bundle is started or stopped, outside the re-entry
// guard (the trace records nothing inside kairos).
void push_region(const char* name) {
  const bool pushed = on_this_thread([name](thread_regions& regions) {
    auto& region = regions.stack.emplace_back();
    region.name = regions.intern(name ? name : "(null)");
    if (!regions_collecting() || (windows_govern() && !inside_window())) return;
    pushes.fetch_add(1, std::memory_order_relaxed);
    region.bundle.emplace(std::string_view{*region.name});
    apply_switches(*region.bundle, std::make_index_sequence<component_count>{});
    region.bundle->start();
  });
  if (pushed && keep_region_rows) push_region_row(name);
}

void pop_region(const char* name) {
  bool popped = false;
  on_this_thread([name, &popped](thread_regions& regions) {
    auto& stack = regions.stack;
    const std::string_view given = name ? name : "(null)";
    if (stack.empty() || *stack.back().name != given) {
      report_mismatched_pop(*regions.thread, given, stack.empty() ? nullptr : stack.back().name);
      return;
    }
    if (stack.back().bundle) stack.back().bundle->stop();
    stack.pop_back();
    popped = true;
  });
  if (popped && keep_region_rows) pop_region_row(name);
}

void start_collection() { set_regions_collecting(true); }
void stop_collection() { set_regions_collecting(false); }

void set_thread_disabled(bool disabled) {
  if (inside_kairos || !accepting.load(std::memory_order_acquire)) return;
  reentry_guard guard;
  this_thread().disabled.store(disabled, std::memory_order_relaxed);
}
void disable_thread() { set_thread_disabled(true); }
void enable_thread() { set_thread_disabled(false); }
int active() { return accepting.load(std::memory_order_acquire) && regions_collecting() ? 1 : 0; }

constexpr kairos_entry_points entry_points{KAIROS_ENTRY_POINTS_VERSION,
                                           &push_region,
                                           &pop_region,
                                           &start_collection,
                                           &stop_collection,
                                           &disable_thread,
                                           &enable_thread,
                                           &active,
                                           &progress_visit,
                                           &progress_begin,
                                           &progress_end};
// KAIROS_COMPONENTS=wall_clock (the default): a region is two events in the thread's ring (see
// function_trace.hpp), its span and call-graph node made later, in batches.
constexpr kairos_entry_points traced_entry_points{KAIROS_ENTRY_POINTS_VERSION,
                                                  &push_traced_region,
                                                  &pop_traced_region,
                                                  &start_collection,
                                                  &stop_collection,
                                                  &disable_traced_thread,
                                                  &enable_traced_thread,
                                                  &active,
                                                  &progress_visit,
                                                  &progress_begin,
                                                  &progress_end};

}  // namespace

problem configure_regions(const std::vector<std::string>& component_names, bool keep_rows) {
  const auto names = region_components::names();
  enabled_components.fill(false);
  keep_region_rows = keep_rows;
  for (const auto& wanted : component_names) {
    bool found = false;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == wanted) enabled_components[i] = found = true;
    if (!found) {
      std::string known;
      for (auto name : names) known += (known.empty() ? "" : ", ") + std::string{name};
      return problem{
          fmt::format("KAIROS_COMPONENTS names \"{}\", which is not a component; "
                      "accepted: {}; kairos is disabled for this run",
                      wanted, known)};
    }
  }
  only_wall_clock = true;
  for (std::size_t i = 0; i < names.size(); ++i)
    only_wall_clock = only_wall_clock && enabled_components[i] == (names[i] == "wall_clock");
  return {};
}

void set_regions_accepting(bool on) noexcept { accepting.store(on, std::memory_order_seq_cst); }

void wait_for_user_api_calls(std::chrono::milliseconds limit) noexcept {
  const auto* self = this_thread_regions;
  std::lock_guard lock{all().mutex};
  wait_until(
      [&] {
        for (const auto& regions : all().list)
          if (&regions != self && regions.busy.load(std::memory_order_seq_cst)) return false;
        return true;
      },
      limit, std::chrono::microseconds{100});
}

std::uint64_t regions_recorded() noexcept { return pushes.load(std::memory_order_relaxed); }

void regions_forget_after_fork_in_child() noexcept {
  pushes.store(0);
  forget_mismatched_pops();
  forget_parent_regions.store(true);
}

void regions_lock_for_fork() { all().mutex.lock(); }
void regions_unlock_after_fork() noexcept { all().mutex.unlock(); }

const kairos_entry_points& user_entry_points() noexcept {
  return only_wall_clock && traced_regions_available() ? traced_entry_points : entry_points;
}

}  // namespace kairos::runtime

extern "C" __attribute__((visibility("default"))) const kairos_entry_points* kairos_runtime_entry_points() {
  return &kairos::runtime::user_entry_points();
}
