#pragma once
// The report as JSON (nlohmann): components, the merged process tree and every thread's tree, each
// both as a flat list of nodes and as a tree with "children" arrays. Schema: docs/report-json.md.
// Not part of <kairos/kairos.hpp>: nlohmann_json alone costs more to compile than the rest of the
// core, so only the files that read or write JSON include this header.
//
//   kairos::write_json("report.json");
//   kairos::report_at_exit({.json_path = "report.json"});  // text and JSON at exit
//   kairos::report_data data = kairos::read_json(nlohmann::json::parse(text));
#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include <kairos/printable.hpp>
#include <kairos/report.hpp>
#include <kairos/report_at_exit.hpp>

namespace kairos {

inline constexpr int report_json_version = 1;

namespace detail {

inline nlohmann::json node_json(const report_data& data, const report_tree& tree, const report_node& node,
                                std::size_t index) {
  nlohmann::json values = nlohmann::json::array();
  for (const auto& value : node.values) {
    const auto& info = data.components[value.component];
    const auto& stats = value.stats;
    values.push_back({{"component", info.label},
                      {"value", info.value_labels[value.value_index]},
                      {"unit", info.unit},
                      {"count", stats.count},
                      {"sum", stats.sum},
                      {"mean", stats.mean},
                      {"min", stats.min},
                      {"max", stats.max},
                      {"stddev", stats.stddev()},
                      {"squared_deviations", stats.squared_deviations},
                      {"self_sum", value.self_sum}});
  }
  return {{"id", index},
          {"label", printable(node.label)},
          {"parent", node.parent},
          {"depth", node.depth},
          {"file", node.file},
          {"line", node.line},
          {"thread", tree.thread_index},
          {"values", std::move(values)}};
}

inline nlohmann::json tree_json(const report_data& data, const report_tree& tree) {
  nlohmann::json flat = nlohmann::json::array();
  for (std::size_t i = 0; i < tree.nodes.size(); ++i) flat.push_back(node_json(data, tree, tree.nodes[i], i));
  // Nested form: built bottom-up (nodes are in depth-first order, children after parents).
  std::vector<nlohmann::json> nested(tree.nodes.size());
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = tree.nodes.size(); i-- > 0;) {
    auto entry = flat[i];
    entry.erase("parent");
    entry["children"] = nlohmann::json::array();
    for (auto child : tree.nodes[i].children) entry["children"].push_back(std::move(nested[child]));
    nested[i] = std::move(entry);
  }
  for (std::size_t i = 0; i < tree.nodes.size(); ++i)
    if (tree.nodes[i].parent < 0) top.push_back(std::move(nested[i]));
  return {{"thread", tree.thread_index},
          {"os_thread_id", tree.os_thread_id},
          {"nodes", std::move(flat)},
          {"tree", std::move(top)}};
}

inline report_tree read_tree(const nlohmann::json& json, const report_data& data) {
  report_tree tree;
  tree.thread_index = json.at("thread").get<std::int64_t>();
  tree.os_thread_id = json.at("os_thread_id").get<std::int64_t>();
  for (const auto& entry : json.at("nodes")) {
    report_node node;
    node.label = entry.at("label").get<std::string>();
    node.parent = entry.at("parent").get<std::int64_t>();
    node.depth = entry.at("depth").get<std::uint32_t>();
    node.file = entry.at("file").get<std::string>();
    node.line = entry.at("line").get<std::uint32_t>();
    for (const auto& value : entry.at("values")) {
      const auto component = data.component(value.at("component").get<std::string>());
      if (component < 0)
        throw std::runtime_error("[kairos] report JSON: node '" + node.label +
                                 "' names a component missing from \"components\"");
      const auto& labels = data.components[static_cast<std::size_t>(component)].value_labels;
      const auto value_label = value.at("value").get<std::string>();
      const auto position = std::find(labels.begin(), labels.end(), value_label);
      report_value read{static_cast<std::uint32_t>(component),
                        static_cast<std::uint32_t>(position - labels.begin()),
                        {},
                        value.at("self_sum").get<double>()};
      read.stats.count = value.at("count").get<std::uint64_t>();
      read.stats.sum = value.at("sum").get<double>();
      read.stats.mean = value.at("mean").get<double>();
      read.stats.min = value.at("min").get<double>();
      read.stats.max = value.at("max").get<double>();
      read.stats.squared_deviations = value.at("squared_deviations").get<double>();
      node.values.push_back(read);
    }
    const auto index = static_cast<std::uint32_t>(tree.nodes.size());
    if (node.parent >= 0) tree.nodes.at(static_cast<std::size_t>(node.parent)).children.push_back(index);
    tree.nodes.push_back(std::move(node));
  }
  return tree;
}

}  // namespace detail

inline nlohmann::json to_json(const report_data& data) {
  nlohmann::json components = nlohmann::json::array();
  for (const auto& info : data.components)
    components.push_back({{"label", info.label},
                          {"unit", info.unit},
                          {"description", info.description},
                          {"values", info.value_labels},
                          {"additive", info.additive}});
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& thread : data.threads) threads.push_back(detail::tree_json(data, thread));
  return {{"kairos_report_version", report_json_version},
          {"components", std::move(components)},
          {"process", detail::tree_json(data, data.process)},
          {"threads", std::move(threads)}};
}

// Reads what to_json wrote; throws std::runtime_error (or nlohmann's errors) naming what is wrong.
inline report_data read_json(const nlohmann::json& json) {
  const auto version = json.at("kairos_report_version").get<int>();
  if (version != report_json_version)
    throw std::runtime_error("[kairos] report JSON version " + std::to_string(version) +
                             " is not supported; this kairos reads version " + std::to_string(report_json_version));
  report_data data;
  for (const auto& entry : json.at("components"))
    data.components.push_back({entry.at("label").get<std::string>(), entry.at("unit").get<std::string>(),
                               entry.at("description").get<std::string>(),
                               entry.at("values").get<std::vector<std::string>>(), entry.at("additive").get<bool>()});
  data.process = detail::read_tree(json.at("process"), data);
  for (const auto& thread : json.at("threads")) data.threads.push_back(detail::read_tree(thread, data));
  return data;
}

// Writes the current report; throws std::runtime_error naming the path when it cannot.
inline void write_json(const std::string& path, const report_data& data = report()) {
  std::ofstream file{path};
  if (!file) throw std::runtime_error("[kairos] cannot write the JSON report to '" + path + "'");
  file << to_json(data).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  if (!file) throw std::runtime_error("[kairos] writing the JSON report to '" + path + "' failed");
}

// The report at exit as text and JSON (see <kairos/report_at_exit.hpp>): a plain function, so it is
// chosen over the text-only template there wherever this header is included.
inline void report_at_exit(exit_report_options options = {}) {
  detail::register_exit_report(std::move(options), &write_json);
}

}  // namespace kairos
