#pragma once
// One thread's call graph: a tree of labelled nodes, push on start and pop on stop, each node
// holding the statistics of the values recorded in it. Only its own thread writes it, so recording
// takes no lock; it allocates only when a node is new (or the stack outgrows its reserve).
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>  // and std::hash<std::string_view>
#include <unordered_map>
#include <vector>

#include <kairos/storage/statistics.hpp>

namespace kairos {

enum class storage_mode : std::uint8_t {
  tree,      // a node per label per parent: a recursive function nests
  flat,      // every label once, at depth 0
  timeline,  // every start/stop its own node, in order
};

struct value_slot {
  std::uint32_t component = 0;    // id from component_registry
  std::uint32_t value_index = 0;  // which of the component's values
  statistics stats;

  friend bool operator==(const value_slot&, const value_slot&) = default;
};

struct graph_node {
  std::string label;
  std::uint32_t parent = 0;
  std::uint32_t depth = 0;  // the root is at 0 and holds no values; regions start at depth 1
  bool timeline_instance = false;
  const char* file = nullptr;  // where the region was declared (a __FILE__ literal), when known
  std::uint32_t line = 0;
  std::vector<std::uint32_t> children;
  std::vector<value_slot> values;

  statistics& slot(std::uint32_t component, std::uint32_t value_index) {
    for (auto& entry : values)
      if (entry.component == component && entry.value_index == value_index) return entry.stats;
    return values.emplace_back(value_slot{component, value_index, {}}).stats;
  }
};

class call_graph {
 public:
  static constexpr std::uint32_t root = 0;

  call_graph() {
    nodes_.emplace_back();
    nodes_.front().label = "<root>";
    stack_.reserve(64);
    stack_.push_back(root);
  }
  call_graph(const call_graph&) = delete;
  call_graph& operator=(const call_graph&) = delete;

  // Enters the node `label` below the current one (tree), below the root (flat), or a new node
  // (timeline); returns its index, to be given back to pop().
  std::uint32_t push(std::string_view label, storage_mode mode, const char* file = nullptr, std::uint32_t line = 0) {
    const std::uint32_t parent = mode == storage_mode::flat ? root : stack_.back();
    std::uint32_t node = mode == storage_mode::timeline ? add_node(parent, label, true) : find_or_add(parent, label);
    if (file != nullptr && nodes_[node].line == 0) {
      nodes_[node].file = file;
      nodes_[node].line = line;
    }
    stack_.push_back(node);
    return node;
  }

  // Leaves `node`; a mismatched pop (not the innermost node) unwinds to it, if it is open at all.
  void pop(std::uint32_t node) {
    if (stack_.back() == node) {
      stack_.pop_back();
      return;
    }
    for (auto depth = stack_.size(); depth-- > 1;)
      if (stack_[depth] == node) {
        stack_.resize(depth);
        return;
      }
  }

  void record(std::uint32_t node, std::uint32_t component, std::uint32_t value_index, double value) {
    nodes_[node].slot(component, value_index).add(value);
  }

  // Forgets every node. Only while no region of this graph is open (tests, between phases).
  void clear() {
    index_.clear();
    nodes_.resize(1);
    nodes_.front().children.clear();
    nodes_.front().values.clear();
    stack_.assign(1, root);
  }

  std::uint32_t current() const noexcept { return stack_.back(); }
  const std::deque<graph_node>& nodes() const noexcept { return nodes_; }

 private:
  struct child_key {
    std::uint32_t parent;
    std::string_view label;  // views the node's own label: nodes never move (deque)
    bool operator==(const child_key&) const = default;
  };
  struct child_key_hash {
    std::size_t operator()(const child_key& key) const noexcept {
      return std::hash<std::string_view>{}(key.label) ^ (std::size_t{key.parent} * 0x9e3779b97f4a7c15ull);
    }
  };
  // Below this many children a scan beats hashing the label.
  static constexpr std::size_t scan_limit = 8;

  std::uint32_t find_or_add(std::uint32_t parent, std::string_view label) {
    const auto& children = nodes_[parent].children;
    if (children.size() <= scan_limit) {
      for (auto child : children)
        if (!nodes_[child].timeline_instance && nodes_[child].label == label) return child;
      return add_node(parent, label, false);
    }
    if (const auto found = index_.find(child_key{parent, label}); found != index_.end()) return found->second;
    return add_node(parent, label, false);
  }

  std::uint32_t add_node(std::uint32_t parent, std::string_view label, bool timeline_instance) {
    const auto index = static_cast<std::uint32_t>(nodes_.size());
    auto& node = nodes_.emplace_back();
    node.label = label;
    node.parent = parent;
    node.depth = nodes_[parent].depth + 1;
    node.timeline_instance = timeline_instance;
    auto& siblings = nodes_[parent].children;
    siblings.push_back(index);
    if (timeline_instance) return index;
    if (siblings.size() == scan_limit + 1) {  // switch this parent to the index
      for (auto sibling : siblings)
        if (!nodes_[sibling].timeline_instance) index_.emplace(child_key{parent, nodes_[sibling].label}, sibling);
    } else if (siblings.size() > scan_limit + 1) {
      index_.emplace(child_key{parent, node.label}, index);
    }
    return index;
  }

  std::deque<graph_node> nodes_;
  std::vector<std::uint32_t> stack_;
  std::unordered_map<child_key, std::uint32_t, child_key_hash> index_;
};

}  // namespace kairos
