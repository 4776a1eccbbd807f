#include "preload/regions.hpp"

#include <array>
#include <atomic>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>
#include <kairos/storage/stored.hpp>

#include "preload/diagnostics.hpp"
#include "preload/lifecycle.hpp"
#include "preload/profile_database.hpp"
#include "preload/reentry_guard.hpp"
#include "preload/thread_registry.hpp"

namespace kairos::runtime {

// Every built-in component a region can measure; KAIROS_COMPONENTS switches members on by name.
using region_components =
    component_list<wall_clock, cpu_clock, thread_cpu_clock, user_clock, system_clock, peak_rss,
                   page_rss, page_faults, context_switches>;
using region_bundle = stored<region_components>;
// The default (KAIROS_COMPONENTS=wall_clock) takes a bundle of its own: a component_list holding
// the rusage-based members reads getrusage on every start and stop even when they are off.
using wall_clock_bundle = stored<component_tuple<wall_clock>>;

struct open_region {
  const std::string* name = nullptr;  // interned; the bundle's label views it
  std::int64_t start_ns = 0;  // steady clock, for the region's row in the profile database
  // Both empty: pushed while collection was off.
  std::optional<region_bundle> bundle;
  std::optional<wall_clock_bundle> wall_clock_only;
};

struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const noexcept {
    return std::hash<std::string_view>{}(name);
  }
};

struct thread_regions {
  std::deque<open_region> stack;
  // Region names, copied once per distinct name; a push after that allocates nothing. Nodes of an
  // unordered_set never move, so region rows and bundle labels may point at them.
  std::unordered_set<std::string, name_hash, std::equal_to<>> names;
  region_log finished;

  const std::string* intern(std::string_view name) {
    if (auto found = names.find(name); found != names.end()) return &*found;
    return &*names.emplace(name).first;
  }
};

namespace {

constexpr std::size_t component_count = std::tuple_size_v<region_components::component_types>;
constexpr int mismatches_shown = 5;

std::array<bool, component_count> enabled_components{};
bool only_wall_clock = false;
std::atomic<bool> collecting{true};
std::atomic<std::uint64_t> pushes{0};
std::atomic<std::uint64_t> mismatches{0};

template <std::size_t... I>
void apply_switches(region_components& bundle, std::index_sequence<I...>) {
  ((enabled_components[I]
        ? void(bundle.enable<std::tuple_element_t<I, region_components::component_types>>())
        : bundle.disable<std::tuple_element_t<I, region_components::component_types>>()),
   ...);
}

thread_regions& regions_of(thread_record& record) {
  if (auto* regions = record.regions.load(std::memory_order_acquire)) return *regions;
  auto* regions = new thread_regions;  // kept until exit: data outlives the thread
  record.regions.store(regions, std::memory_order_release);
  return *regions;
}

// Runs `work` on the calling thread's record while the runtime is active, with the thread marked
// busy (finalize waits for it) and the re-entry guard set.
template <class Work>
void on_this_thread(Work&& work) {
  if (inside_kairos || !is_active()) return;
  reentry_guard guard;
  auto& record = current_thread();
  record.busy.store(true, std::memory_order_seq_cst);
  if (is_active() && !record.disabled.load(std::memory_order_relaxed)) work(record);
  record.busy.store(false, std::memory_order_release);
}

void report_mismatch(const std::string& message) {
  const auto count = mismatches.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count <= mismatches_shown) print_line(message);
  if (count == mismatches_shown)
    print_line("[kairos] further mismatched kairos_pop_region calls are counted, not shown");
}

void push_region(const char* name) {
  on_this_thread([name](thread_record& record) {
    auto& regions = regions_of(record);
    auto& region = regions.stack.emplace_back();
    region.name = regions.intern(name ? name : "(null)");
    if (!collecting.load(std::memory_order_relaxed)) return;
    pushes.fetch_add(1, std::memory_order_relaxed);
    if (only_wall_clock) {  // its wall clock gives the span: no clock reads of our own
      region.wall_clock_only.emplace(std::string_view{*region.name});
      region.wall_clock_only->start();
      return;
    }
    region.start_ns = steady_now_ns();
    region.bundle.emplace(std::string_view{*region.name});
    apply_switches(*region.bundle, std::make_index_sequence<component_count>{});
    region.bundle->start();
  });
}

void pop_region(const char* name) {
  on_this_thread([name](thread_record& record) {
    auto& regions = regions_of(record);
    auto& stack = regions.stack;
    const std::string_view given = name ? name : "(null)";
    if (stack.empty()) {
      report_mismatch(fmt::format("[kairos] kairos_pop_region(\"{}\") on thread {} (tid {}) but no "
                                  "region is open there; the pop is ignored",
                                  given, record.sequent_id, record.tid));
      return;
    }
    if (*stack.back().name != given) {
      report_mismatch(fmt::format("[kairos] kairos_pop_region(\"{}\") on thread {} (tid {}) but the "
                                  "innermost open region is \"{}\"; the pop is ignored",
                                  given, record.sequent_id, record.tid, *stack.back().name));
      return;
    }
    auto& region = stack.back();
    std::int64_t end_ns = 0;
    if (region.wall_clock_only) {
      region.wall_clock_only->stop();
      // One lap of a fresh bundle: the wall clock's own readings are the region's span.
      const auto& clock = region.wall_clock_only->component<wall_clock>();
      region.start_ns = clock.last_start_ns();
      end_ns = region.start_ns + clock.total_ns();
    } else if (region.bundle) {
      region.bundle->stop();
      end_ns = steady_now_ns();
    }
    if (end_ns != 0 && profile_database_open())
      regions.finished.append({region.name, region.start_ns, end_ns,
                               static_cast<std::int32_t>(stack.size()) - 1});
    stack.pop_back();
  });
}

void start_collection() { collecting.store(true, std::memory_order_relaxed); }
void stop_collection() { collecting.store(false, std::memory_order_relaxed); }

void disable_thread() {
  if (inside_kairos || !is_active()) return;
  reentry_guard guard;
  current_thread().disabled.store(true, std::memory_order_relaxed);
}
void enable_thread() {
  if (inside_kairos || !is_active()) return;
  reentry_guard guard;
  current_thread().disabled.store(false, std::memory_order_relaxed);
}
int active() { return is_active() && collecting.load(std::memory_order_relaxed) ? 1 : 0; }

constexpr kairos_entry_points entry_points{KAIROS_ENTRY_POINTS_VERSION, &push_region, &pop_region,
                                           &start_collection, &stop_collection, &disable_thread,
                                           &enable_thread, &active};

}  // namespace

bool configure_regions(const std::vector<std::string>& component_names, std::string& problem) {
  const auto names = region_components::names();
  enabled_components.fill(false);
  for (const auto& wanted : component_names) {
    bool found = false;
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == wanted) enabled_components[i] = found = true;
    if (!found) {
      std::string known;
      for (auto name : names) known += (known.empty() ? "" : ", ") + std::string{name};
      problem = fmt::format("[kairos] KAIROS_COMPONENTS names \"{}\", which is not a component; "
                            "accepted: {}; kairos is disabled for this run",
                            wanted, known);
      return false;
    }
  }
  only_wall_clock = true;
  for (std::size_t i = 0; i < names.size(); ++i)
    only_wall_clock = only_wall_clock && enabled_components[i] == (names[i] == "wall_clock");
  return true;
}

std::uint64_t regions_recorded() noexcept { return pushes.load(std::memory_order_relaxed); }
std::uint64_t mismatched_pops() noexcept { return mismatches.load(std::memory_order_relaxed); }

void reset_regions_after_fork() {
  pushes.store(0);
  mismatches.store(0);
  threads().for_each([](thread_record& record) {
    if (auto* regions = record.regions.load()) {
      regions->stack.clear();
      regions->finished.clear();
    }
  });
  thread_graphs::instance().clear();
}

std::uint64_t regions_not_traced() noexcept {
  std::uint64_t dropped = 0;
  threads().for_each([&](thread_record& record) {
    if (auto* regions = record.regions.load(std::memory_order_acquire))
      dropped += regions->finished.dropped();
  });
  return dropped;
}

region_log* finished_regions(thread_record& record) noexcept {
  auto* regions = record.regions.load(std::memory_order_acquire);
  return regions ? &regions->finished : nullptr;
}

const kairos_entry_points& user_entry_points() noexcept { return entry_points; }

}  // namespace kairos::runtime

extern "C" __attribute__((visibility("default"))) const kairos_entry_points*
kairos_runtime_entry_points() {
  return &kairos::runtime::user_entry_points();
}
