// The summary JSON (`json` format): the text report's figures as one JSON document.
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include <kairos/plugins/database/schema.hpp>
#include <kairos/printable.hpp>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;

constexpr std::size_t call_graph_nodes_in_json = 10000;

// The call graph as a flat list, each node after its caller ("parent": the caller's "id"), a
// caller's callees together, heaviest first: a nested list would be as deep as the deepest
// recursion. Nodes past `limit` are counted in `left_out`.
nlohmann::json call_graph_json(const output_helpers::region_node& root, std::size_t limit, std::int64_t& left_out) {
  nlohmann::json nodes = nlohmann::json::array();
  std::vector<std::pair<const output_helpers::region_node*, std::int64_t>> pending{{&root, -1}};  // node, its id
  while (!pending.empty()) {
    const auto [node, id] = pending.back();
    pending.pop_back();
    std::vector<const output_helpers::region_node*> children;
    for (const auto& [name, child] : node->children) children.push_back(child.get());
    std::sort(children.begin(), children.end(), [](const auto* a, const auto* b) { return a->total_ns > b->total_ns; });
    for (const auto* child : children) {
      if (nodes.size() == limit) {
        ++left_out;
        continue;
      }
      const auto child_id = static_cast<std::int64_t>(nodes.size());
      nodes.push_back({{"id", child_id},
                       {"parent", id < 0 ? nlohmann::json(nullptr) : nlohmann::json(id)},
                       {"name", printable(child->name)},
                       {"count", child->count},
                       {"total_ns", child->total_ns},
                       {"self_ns", child->total_ns - child->children_ns},
                       {"min_ns", child->min_ns},
                       {"max_ns", child->max_ns},
                       {"threads", child->threads.size()}});
      pending.emplace_back(child, child_id);
    }
  }
  return nodes;
}

}  // namespace

using namespace output_helpers;

void write_summary_json(connection& profile, std::ostream& out, const text_options& options) {
  const auto& range = options.windows;
  const auto totals = sample_totals_in(profile, range);
  const auto weight_ns = totals.weight_ns;
  auto weights = weigh_functions(profile, options.functions, range);
  auto functions_json = [&](const std::vector<function_row>& ranked, std::int64_t whole) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : ranked)
      rows.push_back({{"name", printable(row.name)},
                      {"self_ns", row.self_ns},
                      {"total_ns", row.total_ns},
                      {"self_percent", percent(row.self_ns, whole)},
                      {"total_percent", percent(row.total_ns, whole)}});
    return rows;
  };
  nlohmann::json summary{{"schema_version", schema_version},
                         {"samples", totals.samples},
                         {"weight_ns", weight_ns},
                         {"coverage", coverage_json(coverage_of(profile))},
                         {"unprofiled_children", unprofiled_children_json(unprofiled_children_of(profile))},
                         {"top_functions", functions_json(weights.overall, weight_ns)},
                         {"threads", nlohmann::json::array()},
                         {"windows", nlohmann::json::array()}};
  auto window_functions = functions_by_window(profile, options.functions, range);
  for (const auto& window : windows_in(profile, range)) {
    nlohmann::json entry{{"ordinal", window.ordinal},
                         {"spec", printable(window.spec)},
                         {"clock", window.clock},
                         {"planned_start", window.planned_start},
                         {"planned_end", window.planned_end},
                         {"opened", window.opened},
                         {"samples", window.samples},
                         {"weight_ns", window.weight_ns},
                         {"top_functions", functions_json(window_functions[window.ordinal], window.weight_ns)}};
    if (window.opened) {
      entry["actual_start"] = window.actual_start;
      entry["actual_end"] = window.actual_end;
      entry["start_ns"] = window.start_ns;
      entry["end_ns"] = window.end_ns;
    }
    summary["windows"].push_back(std::move(entry));
  }
  std::int64_t call_graph_left_out = 0;
  summary["call_graph"] =
      call_graph_json(region_call_graph(profile, range), call_graph_nodes_in_json, call_graph_left_out);
  summary["call_graph_left_out"] = call_graph_left_out;
  summary["gpu"] = gpu_json(gpu_summary_of(profile, range));
  auto metadata = profile.prepare("SELECT key, value FROM metadata ORDER BY key");
  while (metadata.step()) summary["metadata"][std::string{metadata.text(0)}] = metadata.text(1);
  for (const auto& thread : sampled_threads(profile, range)) {
    nlohmann::json entry{{"sequent_id", thread.sequent_id},
                         {"tid", thread.tid},
                         {"pid", thread.pid},
                         {"name", printable(thread.name)},
                         {"samples", thread.samples},
                         {"weight_ns", thread.weight_ns},
                         {"top_functions", functions_json(weights.by_thread[thread.id], thread.weight_ns)}};
    if (thread.rank) entry["rank"] = *thread.rank;
    summary["threads"].push_back(std::move(entry));
  }
  out << summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

}  // namespace kairos::database
