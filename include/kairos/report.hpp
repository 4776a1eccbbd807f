#pragma once
// The answer a user reads: every thread's call graph turned into report trees, merged into one
// process tree, with inclusive and self statistics, and printed as text tables (fmt).
//
//   kairos::print_report(std::cout);              // merged process tree, a table per component value
//   kairos::report_data data = kairos::report();  // the same, as data (each thread's tree too)
//
// report() reads every thread's graph: call it when other threads are not recording (after they
// have been joined, or at exit); threads that have exited are included.
//
// report(), format_report() and print_report() (and the builder behind them) are templates with
// nothing to deduce, called as plain functions: a file that includes this header, as the umbrella
// does, compiles their bodies (std::map, the fmt calls) only if it calls them: about 0.15 s saved
// in every other file.
#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/core.h>  // fmt::format; <fmt/format.h> would cost every file about 0.2 s more

#include <kairos/printable.hpp>
#include <kairos/storage/component_registry.hpp>
#include <kairos/storage/thread_graphs.hpp>

namespace kairos {

struct report_value {
  std::uint32_t component = 0;    // index into report_data::components
  std::uint32_t value_index = 0;  // into component_info::value_labels
  statistics stats;               // inclusive: the node's own phases, children included
  double self_sum = 0;            // stats.sum less the children's sums (additive components)

  friend bool operator==(const report_value&, const report_value&) = default;
};

struct report_node {
  std::string label;
  std::int64_t parent = -1;  // index into the tree's nodes; -1 at the top level
  std::uint32_t depth = 0;   // 0 for a top-level region
  std::string file;
  std::uint32_t line = 0;
  std::vector<std::uint32_t> children;
  std::vector<report_value> values;

  const report_value* value(std::uint32_t component, std::uint32_t value_index = 0) const {
    for (const auto& entry : values)
      if (entry.component == component && entry.value_index == value_index) return &entry;
    return nullptr;
  }
  friend bool operator==(const report_node&, const report_node&) = default;
};

struct report_tree {
  std::int64_t thread_index = -1;  // -1: the merged process tree
  std::int64_t os_thread_id = 0;
  std::vector<report_node> nodes;  // depth-first order: a node's subtree follows it

  // The first node with this label path ("main/solve/step"), or nullptr.
  const report_node* find(std::string_view path) const {
    std::int64_t parent = -1;
    const report_node* found = nullptr;
    while (!path.empty()) {
      const auto slash = path.find('/');
      const auto label = path.substr(0, slash);
      found = nullptr;
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].parent == parent && nodes[i].label == label) {
          found = &nodes[i];
          parent = static_cast<std::int64_t>(i);
          break;
        }
      if (found == nullptr) return nullptr;
      path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    }
    return found;
  }
  friend bool operator==(const report_tree&, const report_tree&) = default;
};

struct report_data {
  std::vector<component_info> components;
  report_tree process;
  std::vector<report_tree> threads;

  // The component's index in `components`, or -1.
  std::int64_t component(std::string_view label) const {
    for (std::size_t i = 0; i < components.size(); ++i)
      if (components[i].label == label) return static_cast<std::int64_t>(i);
    return -1;
  }
  friend bool operator==(const report_data&, const report_data&) = default;
};

namespace detail {

// Gathers graph nodes into report nodes, merging equal label paths (timeline instances stay apart),
// then lays them out depth first and computes self values.
template <class Graph = call_graph>
class report_builder {
 public:
  void add(const Graph& graph) {
    const auto& source = graph.nodes();
    // (graph node, report parent) pairs still to visit; iterative: recursion may be 10,000 deep.
    std::vector<std::pair<std::uint32_t, std::int64_t>> pending;
    for (auto it = source[Graph::root].children.rbegin(); it != source[Graph::root].children.rend(); ++it)
      pending.emplace_back(*it, -1);
    while (!pending.empty()) {
      const auto [graph_index, parent] = pending.back();
      pending.pop_back();
      const auto& node = source[graph_index];
      const auto target = node_for(node, parent);
      for (const auto& slot : node.values) {
        auto& value = value_for(target, slot.component, slot.value_index);
        value.stats.merge(slot.stats);
      }
      for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) pending.emplace_back(*it, target);
    }
  }

  report_tree finish(const std::vector<component_info>& components) && {
    report_tree tree;
    tree.nodes.reserve(nodes_.size());
    std::vector<std::pair<std::uint32_t, std::int64_t>> pending;  // (builder index, new parent)
    for (auto it = top_level_.rbegin(); it != top_level_.rend(); ++it) pending.emplace_back(*it, -1);
    while (!pending.empty()) {
      const auto [index, parent] = pending.back();
      pending.pop_back();
      const auto position = static_cast<std::uint32_t>(tree.nodes.size());
      auto& node = tree.nodes.emplace_back(std::move(nodes_[index]));
      node.parent = parent;
      node.depth = parent < 0 ? 0 : tree.nodes[static_cast<std::size_t>(parent)].depth + 1;
      if (parent >= 0) tree.nodes[static_cast<std::size_t>(parent)].children.push_back(position);
      const auto children = std::move(children_[index]);
      for (auto it = children.rbegin(); it != children.rend(); ++it) pending.emplace_back(*it, position);
    }
    for (auto& node : tree.nodes) node.children.shrink_to_fit();
    compute_self(tree, components);
    return tree;
  }

 private:
  std::int64_t node_for(const graph_node& source, std::int64_t parent) {
    if (!source.timeline_instance) {
      const auto key = std::make_tuple(parent, source.label);
      if (const auto found = index_.find(key); found != index_.end()) return found->second;
    }
    const auto index = static_cast<std::int64_t>(nodes_.size());
    auto& node = nodes_.emplace_back();
    node.label = source.label;
    node.file = source.file != nullptr ? source.file : "";
    node.line = source.line;
    children_.emplace_back();
    if (parent < 0)
      top_level_.push_back(static_cast<std::uint32_t>(index));
    else
      children_[static_cast<std::size_t>(parent)].push_back(static_cast<std::uint32_t>(index));
    if (!source.timeline_instance) index_.emplace(std::make_tuple(parent, source.label), index);
    return index;
  }

  report_value& value_for(std::int64_t node, std::uint32_t component, std::uint32_t value_index) {
    auto& values = nodes_[static_cast<std::size_t>(node)].values;
    for (auto& value : values)
      if (value.component == component && value.value_index == value_index) return value;
    return values.emplace_back(report_value{component, value_index, {}, 0});
  }

  static void compute_self(report_tree& tree, const std::vector<component_info>& components) {
    for (auto& node : tree.nodes)
      for (auto& value : node.values) {
        value.self_sum = value.stats.sum;
        if (value.component >= components.size() || !components[value.component].additive) continue;
        for (auto child : node.children)
          if (const auto* child_value = tree.nodes[child].value(value.component, value.value_index))
            value.self_sum -= child_value->stats.sum;
      }
  }

  std::vector<report_node> nodes_;
  std::vector<std::vector<std::uint32_t>> children_;
  std::vector<std::uint32_t> top_level_;
  std::map<std::tuple<std::int64_t, std::string>, std::int64_t> index_;
};

}  // namespace detail

// Every thread's call graph, merged, plus each thread's own tree.
template <class = void>
report_data report() {
  report_data data;
  data.components = component_registry::instance().all();
  detail::report_builder<> process;
  for (const auto& thread : thread_graphs::instance().all()) {
    process.add(thread->graph);
    detail::report_builder<> own;
    own.add(thread->graph);
    auto tree = std::move(own).finish(data.components);
    tree.thread_index = thread->thread_index;
    tree.os_thread_id = thread->os_thread_id;
    data.threads.push_back(std::move(tree));
  }
  data.process = std::move(process).finish(data.components);
  return data;
}

struct report_options {
  bool per_thread = false;  // also a table per thread
};

namespace detail {

template <class = void>
std::string format_tree_table(const report_data& data, const report_tree& tree, std::uint32_t component,
                              std::uint32_t value_index) {
  const auto& info = data.components[component];
  std::size_t label_width = 5;
  bool any = false;
  for (const auto& node : tree.nodes)
    if (node.value(component, value_index)) {
      const auto width = printable(node.label).size() + 2 * node.depth;
      if (width > label_width) label_width = width;
      any = true;
    }
  if (!any) return {};
  const std::string unit = info.unit.empty() ? "" : fmt::format(" [{}]", info.unit);
  const std::string name = info.value_labels.size() > 1 || info.value_labels[0] != info.label
                               ? fmt::format("{} {}", info.label, info.value_labels[value_index])
                               : info.label;
  std::string text =
      fmt::format("{}{}\n{:<{}} {:>9} {:>5} {:>12} {:>12} {:>12} {:>12} {:>12} {:>7}\n", name, unit, "LABEL",
                  label_width, "COUNT", "DEPTH", "SUM", "MEAN", "MIN", "MAX", "STDDEV", "% SELF");
  for (const auto& node : tree.nodes) {
    const auto* value = node.value(component, value_index);
    if (value == nullptr) continue;
    const auto& stats = value->stats;
    const std::string self =
        info.additive && stats.sum != 0 ? fmt::format("{:.1f}", 100.0 * value->self_sum / stats.sum) : "-";
    text += fmt::format("{:<{}} {:>9} {:>5} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>7}\n",
                        std::string(2 * node.depth, ' ') + printable(node.label), label_width, stats.count, node.depth,
                        stats.sum, stats.mean, stats.min, stats.max, stats.stddev(), self);
  }
  return text;
}

template <class = void>
std::string format_tree(const report_data& data, const report_tree& tree, const std::string& title) {
  std::string text;
  for (std::uint32_t component = 0; component < data.components.size(); ++component)
    for (std::uint32_t value_index = 0; value_index < data.components[component].value_labels.size(); ++value_index) {
      const auto table = format_tree_table(data, tree, component, value_index);
      if (!table.empty()) text += fmt::format("{}{}\n", title, table);
    }
  return text;
}

}  // namespace detail

// One table per component value: labels indented by depth, then the statistics with units.
template <class = void>
std::string format_report(const report_data& data, const report_options& options = {}) {
  std::string text = detail::format_tree(data, data.process, "");
  if (options.per_thread)
    for (const auto& thread : data.threads)
      text += detail::format_tree(data, thread,
                                  fmt::format("thread {} (tid {}): ", thread.thread_index, thread.os_thread_id));
  return text;
}

template <class = void>
void print_report(std::ostream& out, const report_options& options = {}) {
  out << format_report(report(), options);
}

}  // namespace kairos
