#pragma once
// One thread's traced calls counted (a producer's batch type): every call of an instrumented
// function and every traced user-API region, whatever its duration (KAIROS_INSTRUMENT_MIN_DURATION
// leaves short calls out of the rows only), as a tree of call paths holding, per time window, the
// calls, their total, shortest, longest and sum of squares. Fed by the thread's batch holder
// (function_trace.cpp), read at the end into the database's call_tree table. Memory grows with
// distinct paths, never with calls; nothing here runs on the hot path.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kairos::runtime {

class call_tree {
 public:
  static constexpr std::uint32_t root = 0;

  struct window_stats {
    std::int32_t window = 0;  // 0: no windows
    std::int64_t calls = 0, total_ns = 0;
    std::int64_t min_ns = std::numeric_limits<std::int64_t>::max(), max_ns = 0;
    double sum_squares_ms = 0;  // of durations in ms, for the standard deviation
  };
  struct node {
    std::uintptr_t key = 0;  // what the trace's events name: a function (address, XRay id) or a region
    std::uint32_t parent = root;
    std::vector<std::uint32_t> children;
    std::vector<window_stats> windows;  // one without windows
  };

  call_tree() { nodes_.emplace_back(); }

  // The node of `key` called from `parent`, made on its first call. Inline up to the scan: a batch
  // calls it for every call (out of line, it and add() were a fifth of a traced call's cost).
  [[gnu::always_inline]] std::uint32_t child(std::uint32_t parent, std::uintptr_t key) {
    const auto& children = nodes_[parent].children;
    if (children.size() <= scan_limit) [[likely]] {
      for (const auto index : children)
        if (nodes_[index].key == key) return index;
    }
    return find_or_add(parent, key);
  }

  // One call of `node` that lasted `ns` in `window`.
  [[gnu::always_inline]] void add(std::uint32_t node_index, std::int32_t window, std::int64_t ns) {
    auto& windows = nodes_[node_index].windows;
    window_stats* stats = !windows.empty() && windows.back().window == window ? &windows.back() : nullptr;
    if (stats == nullptr) [[unlikely]]
      stats = &stats_of(windows, window);
    ++stats->calls;
    stats->total_ns += ns;
    stats->min_ns = std::min(stats->min_ns, ns);
    stats->max_ns = std::max(stats->max_ns, ns);
    const double ms = static_cast<double>(ns) * 1e-6;
    stats->sum_squares_ms += ms * ms;
  }

  // Every node but the root, parents before their children (index order).
  const std::vector<node>& nodes() const noexcept { return nodes_; }

  void clear() {
    nodes_.resize(1);
    nodes_.front().children.clear();
    index_.clear();
  }

 private:
  [[gnu::noinline]] std::uint32_t find_or_add(std::uint32_t parent, std::uintptr_t key) {
    if (nodes_[parent].children.size() > scan_limit)
      if (const auto found = index_.find(edge{parent, key}); found != index_.end()) return found->second;
    const auto index = static_cast<std::uint32_t>(nodes_.size());
    auto& made = nodes_.emplace_back();
    made.key = key;
    made.parent = parent;
    auto& siblings = nodes_[parent].children;  // nodes_ may have moved
    siblings.push_back(index);
    if (siblings.size() == scan_limit + 1) {  // past the scan: this parent's children go in the index
      for (const auto sibling : siblings) index_.emplace(edge{parent, nodes_[sibling].key}, sibling);
    } else if (siblings.size() > scan_limit + 1) {
      index_.emplace(edge{parent, key}, index);
    }
    return index;
  }

  // A node's first call in `window` (or one in a window it was called in before another).
  [[gnu::noinline]] static window_stats& stats_of(std::vector<window_stats>& windows, std::int32_t window) {
    for (auto& stats : windows)
      if (stats.window == window) return stats;
    return windows.emplace_back(window_stats{.window = window});
  }

  // Below this many children a scan beats a hash (as in the core's call_graph.hpp).
  static constexpr std::size_t scan_limit = 8;
  struct edge {
    std::uint32_t parent;
    std::uintptr_t key;
    bool operator==(const edge&) const = default;
  };
  struct edge_hash {
    std::size_t operator()(const edge& e) const noexcept {
      return std::hash<std::uintptr_t>{}(e.key) ^ (std::size_t{e.parent} * 0x9e3779b97f4a7c15ull);
    }
  };
  std::vector<node> nodes_;
  std::unordered_map<edge, std::uint32_t, edge_hash> index_;
};

// A node's counts in one window, as the pipeline hands them to the sink: a function by address, a
// region by name.
struct call_tree_row {
  std::uint32_t node, parent;      // the thread's own numbers; parent 0: a root call
  std::string_view name;           // a region's; empty for a function
  std::uint64_t function_address;  // 0 for a region
  call_tree::window_stats stats;
};

}  // namespace kairos::runtime
