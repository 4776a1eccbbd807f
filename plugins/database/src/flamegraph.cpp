// The flame graph: one self-contained SVG (no external resource; its script is inline), built from
// the database's stacks and weights. One graph for all threads and one per thread, chosen in the
// picture; click a frame to zoom, "reset" to go back, "search" to highlight a regular expression
// with the share of samples it matches, "icicle" to turn the graph upside down. Each frame's
// tooltip gives its self and total time and share. Frames narrower than a minimum width are
// merged into their parent's "[narrow frames]" box, and the picture says how much was merged.
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "output_helpers.hpp"

namespace kairos::database {

using namespace output_helpers;

namespace {

constexpr double picture_width = 1200;
constexpr double frame_height = 16;
constexpr double top_margin = 48;

// A node of the merged call tree: children by function name.
struct tree_node {
  std::string name;
  std::int64_t total_ns = 0;
  std::int64_t self_ns = 0;
  std::map<std::string, std::unique_ptr<tree_node>> children;

  tree_node& child(const std::string& function) {
    auto& slot = children[function];
    if (!slot) {
      slot = std::make_unique<tree_node>();
      slot->name = function;
    }
    return *slot;
  }
};

// A warm colour per name, stable across runs (flamegraph.pl's palette idea, hashed by name).
std::string colour(std::string_view name) {
  std::uint32_t hash = 2166136261u;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return fmt::format("rgb({},{},{})", 205 + hash % 50, 80 + (hash >> 8) % 150, 30 + (hash >> 16) % 55);
}

int depth_of(const tree_node& node) {
  int deepest = 0;
  for (const auto& [name, child] : node.children) deepest = std::max(deepest, 1 + depth_of(*child));
  return deepest;
}

// What fits in a box `width` pixels wide, in 12 px monospace (7 px a character).
std::string fitted(std::string_view name, double width) {
  const auto room = static_cast<std::ptrdiff_t>((width - 6) / 7);
  if (room < 3) return {};
  if (static_cast<std::ptrdiff_t>(name.size()) <= room) return std::string{name};
  return std::string{name.substr(0, static_cast<std::size_t>(room - 2))} + "..";
}

struct graph_writer {
  std::ostream& out;
  std::int64_t root_ns;
  std::int64_t minimum_ns;
  int graph_depth;  // the tree's depth: a flame graph stands on its root at the bottom
  std::int64_t merged_ns = 0;
  std::int64_t merged_frames = 0;
  int next_id = 0;
  int deepest = 0;

  // One frame and, after it, its children left to right (widest first), as flat <g> elements that
  // the script places by their data-x / data-w / data-d / data-p attributes.
  void frame(const tree_node& node, double x_fraction, int depth, int parent) {
    const int id = next_id++;
    deepest = std::max(deepest, depth);
    const double w_fraction = static_cast<double>(node.total_ns) / static_cast<double>(root_ns);
    // Placed as the script would place it unzoomed, so that the picture reads without the script too
    // (printed, or in a viewer that runs none).
    const double x_px = x_fraction * picture_width, w_px = w_fraction * picture_width;
    const double y = top_margin + (graph_depth - depth) * frame_height;
    out << fmt::format(
        R"(<g class="f" id="f{}" data-x="{:.9f}" data-w="{:.9f}" data-d="{}" data-p="{}"><title>{} (total {:.3f} ms, {:.2f}%; self {:.3f} ms)</title>)"
        R"(<rect x="{:.1f}" y="{:.0f}" width="{:.1f}" height="{}" rx="2" fill="{}"/><text x="{:.1f}" y="{:.0f}">{}</text></g>)"
        "\n",
        id, x_fraction, w_fraction, depth, parent, xml_text(node.name), node.total_ns * 1e-6, 100.0 * w_fraction,
        node.self_ns * 1e-6, x_px, y, std::max(w_px - 0.5, 0.1), frame_height - 1, colour(node.name), x_px + 3,
        y + frame_height - 4, xml_text(fitted(node.name, w_px)));
    std::vector<const tree_node*> children;
    for (const auto& [name, child] : node.children) children.push_back(child.get());
    std::sort(children.begin(), children.end(),
              [](const tree_node* a, const tree_node* b) { return a->total_ns > b->total_ns; });
    double x = x_fraction;
    tree_node narrow;
    narrow.name = "[narrow frames]";
    for (const auto* child : children) {
      if (child->total_ns < minimum_ns) {
        narrow.total_ns += child->total_ns;
        narrow.self_ns += child->total_ns;
        merged_ns += child->total_ns;
        ++merged_frames;
        continue;
      }
      frame(*child, x, depth + 1, id);
      x += static_cast<double>(child->total_ns) / static_cast<double>(root_ns);
    }
    if (narrow.total_ns > 0) frame(narrow, x, depth + 1, id);
  }
};

constexpr const char* script = R"js(
<script type="text/ecmascript"><![CDATA[
(function () {
  var W = 1200, H = 16, TOP = 48, icicle = false, graph = null, zoomed = null;
  // Its own <svg>, whether the picture is a file of its own or inline in kairos's HTML report.
  var svg = (document.currentScript && document.currentScript.closest("svg")) || document.documentElement;
  function byId(id) { return svg.querySelector("#" + id); }
  function frames(g) { return g.querySelectorAll("g.f"); }
  function num(f, k) { return parseFloat(f.getAttribute("data-" + k)); }
  function place() {
    var depth = parseInt(graph.getAttribute("data-depth"));
    var zx = 0, zw = 1, zd = 0;
    if (zoomed) { zx = num(zoomed, "x"); zw = num(zoomed, "w"); zd = num(zoomed, "d"); }
    frames(graph).forEach(function (f) {
      var x = num(f, "x"), w = num(f, "w"), d = num(f, "d");
      var inside = x >= zx - 1e-12 && x + w <= zx + zw + 1e-12 && d >= zd;
      var above = d < zd && x <= zx + 1e-12 && x + w >= zx + zw - 1e-12;
      var shown = inside || above;
      var px = inside ? (x - zx) / zw * W : 0, pw = inside ? w / zw * W : W;
      f.style.display = shown ? "" : "none";
      f.style.opacity = above ? 0.5 : 1;
      var y = icicle ? TOP + d * H : TOP + (depth - d) * H;
      var rect = f.querySelector("rect"), text = f.querySelector("text");
      rect.setAttribute("x", px.toFixed(1)); rect.setAttribute("width", Math.max(pw - 0.5, 0.1).toFixed(1));
      rect.setAttribute("y", y);
      var name = f.querySelector("title").textContent.replace(/ \(total [^)]*\)$/, "");
      var room = Math.floor((pw - 6) / 7);
      text.textContent = room < 3 ? "" : (name.length <= room ? name : name.substring(0, room - 2) + "..");
      text.setAttribute("x", (px + 3).toFixed(1)); text.setAttribute("y", y + H - 4);
    });
  }
  function show(g) {
    svg.querySelectorAll("g.graph").forEach(function (o) { o.style.display = o === g ? "" : "none"; });
    graph = g; zoomed = null; clearSearch(); place();
    byId("graph-name").textContent = g.getAttribute("data-name");
  }
  function clearSearch() {
    svg.querySelectorAll("g.f rect").forEach(function (r) {
      if (r.hasAttribute("data-fill")) r.setAttribute("fill", r.getAttribute("data-fill"));
    });
    byId("matched").textContent = "";
  }
  function search(pattern) {
    clearSearch();
    if (!pattern) return;
    var re;
    try { re = new RegExp(pattern); } catch (e) { byId("matched").textContent = "bad pattern"; return; }
    var frameById = {}, share = 0;
    frames(graph).forEach(function (f) { frameById[f.id] = f; });
    frames(graph).forEach(function (f) {
      var name = f.querySelector("title").textContent.replace(/ \(total [^)]*\)$/, "");
      if (!re.test(name)) return;
      var rect = f.querySelector("rect");
      if (!rect.hasAttribute("data-fill")) rect.setAttribute("data-fill", rect.getAttribute("fill"));
      rect.setAttribute("fill", "rgb(230,0,230)");
      for (var p = frameById["f" + f.getAttribute("data-p")]; p; p = frameById["f" + p.getAttribute("data-p")])
        if (re.test(p.querySelector("title").textContent.replace(/ \(total [^)]*\)$/, ""))) return;
      share += num(f, "w");
    });
    byId("matched").textContent = "matched " + (100 * share).toFixed(1) + "%";
  }
  svg.addEventListener("click", function (e) {
    var f = e.target.closest && e.target.closest("g.f");
    var id = e.target.id;
    if (f) { zoomed = num(f, "d") === 0 ? null : f; place(); return; }
    if (id === "reset") { zoomed = null; place(); }
    else if (id === "icicle") { icicle = !icicle; place(); }
    else if (id === "search") { search(window.prompt("Search (regular expression)", "")); }
    else if (e.target.classList && e.target.classList.contains("choose")) {
      show(byId(e.target.getAttribute("data-graph")));
    }
  });
  show(svg.querySelector("g.graph"));
})();
]]></script>
)js";

// One graph of the picture: all threads, or one thread's.
struct graph {
  std::string name;
  tree_node root;
};

// One tree for all threads and one per thread, from each (thread, stack)'s summed weight.
std::vector<graph> sum_graphs(connection& profile, const window_range& range) {
  // The functions of every stack node, root first: built once from the trie (parents before children).
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::string>> nodes;  // id → (parent, function)
  auto stacks = profile.prepare(
      "SELECT stack.id, stack.parent, function.value FROM stack JOIN frame ON frame.id = stack.frame "
      "JOIN string AS function ON function.id = frame.function ORDER BY stack.id");
  while (stacks.step())
    nodes[stacks.integer(0)] = {stacks.is_null(1) ? -1 : stacks.integer(1), std::string{stacks.text(2)}};
  std::vector<graph> graphs(1);
  graphs[0].name = "all threads";
  graphs[0].root.name = "all";
  const auto labels = thread_labels(profile);
  std::map<std::int64_t, std::optional<std::size_t>> graph_of_thread;  // none: a sample of no thread
  std::vector<const std::string*> path;
  for (const auto& sum : stack_sums(profile, range)) {
    if (sum.stack == 0) continue;
    auto [entry, added] = graph_of_thread.try_emplace(sum.thread);
    if (added) {
      if (const auto label = labels.find(sum.thread); label != labels.end()) {
        entry->second = graphs.size();
        graphs.emplace_back();
        graphs.back().name = label->second;
        graphs.back().root.name = graphs.back().name;
      }
    }
    if (!entry->second) continue;
    path.clear();
    for (auto at = nodes.find(sum.stack); at != nodes.end(); at = nodes.find(at->second.first))
      path.push_back(&at->second.second);
    const auto weight = sum.weight_ns;
    for (auto* root : {&graphs[0].root, &graphs[*entry->second].root}) {
      tree_node* node = root;
      node->total_ns += weight;
      for (auto name = path.rbegin(); name != path.rend(); ++name) {
        node = &node->child(**name);
        node->total_ns += weight;
      }
      node->self_ns += weight;
    }
  }
  return graphs;
}

// Each graph laid out from its own root, in a group of its own; returns the deepest graph's depth,
// which sets the picture's height.
int lay_out_graphs(std::ostream& body, std::vector<graph>& graphs, double minimum_width_fraction,
                   flamegraph_summary& summary) {
  int picture_depth = 0;
  for (std::size_t index = 0; index < graphs.size(); ++index) {
    auto& root = graphs[index].root;
    if (root.total_ns == 0) continue;
    std::ostringstream frames;
    graph_writer writer{frames, root.total_ns,
                        static_cast<std::int64_t>(minimum_width_fraction * static_cast<double>(root.total_ns)),
                        depth_of(root)};
    writer.frame(root, 0, 0, -1);
    picture_depth = std::max(picture_depth, writer.deepest);
    if (index == 0) {
      summary.merged_ns = writer.merged_ns;
      summary.merged_frames = writer.merged_frames;
      summary.frames = writer.next_id;
    }
    // Without the script (printed, a viewer that runs none) the all-threads graph alone shows.
    body << fmt::format(R"(<g class="graph" id="g{}" data-name="{}" data-depth="{}"{}>)", index,
                        xml_text(graphs[index].name), writer.graph_depth, index == 0 ? "" : R"( style="display:none")")
         << "\n"
         << frames.str() << "</g>\n";
  }
  return picture_depth;
}

void write_picture_head(std::ostream& out, double height) {
  out << fmt::format(
      R"(<?xml version="1.0" standalone="no"?>)"
      "\n"
      R"(<svg version="1.1" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" xmlns="http://www.w3.org/2000/svg">)"
      "\n<style>text {{ font: 12px monospace; fill: #000; }} g.f text {{ pointer-events: none; }} g.f {{ cursor: "
      "pointer; }}"
      " .button {{ font: 13px sans-serif; fill: #1a4f8a; cursor: pointer; }} .choose {{ font: 12px sans-serif;"
      " fill: #1a4f8a; cursor: pointer; }} rect.background {{ fill: #fdfaf3; }}</style>\n"
      R"(<rect class="background" width="100%" height="100%"/>)"
      "\n"
      R"(<text x="10" y="18" style="font: 15px sans-serif">kairos flame graph: <tspan id="graph-name"></tspan></text>)"
      "\n"
      R"(<text id="reset" class="button" x="{:.0f}" y="18">reset</text><text id="search" class="button" x="{:.0f}" y="18">search</text>)"
      R"(<text id="icicle" class="button" x="{:.0f}" y="18">icicle</text><text id="matched" x="{:.0f}" y="38"></text>)"
      "\n",
      picture_width, height, picture_width, height, picture_width - 200, picture_width - 150, picture_width - 95,
      picture_width - 150);
}

// A link to each graph that has frames: "thread 2" from "thread 2 (tid 4243, worker)" (the full
// name is the graph's title).
void write_graph_choices(std::ostream& out, const std::vector<graph>& graphs) {
  double x = 10;
  for (std::size_t index = 0; index < graphs.size(); ++index) {
    if (graphs[index].root.total_ns == 0) continue;
    const auto& name = graphs[index].name;
    const auto label = index == 0 ? name : name.substr(0, name.find(" ("));
    out << fmt::format(R"(<text class="choose" data-graph="g{}" x="{:.0f}" y="38">{}</text>)", index, x,
                       xml_text(label))
        << "\n";
    x += 8.0 * static_cast<double>(label.size()) + 12;
  }
}

}  // namespace

flamegraph_summary write_flamegraph(connection& profile, std::ostream& out, const window_range& range,
                                    double minimum_width_fraction) {
  auto graphs = sum_graphs(profile, range);
  flamegraph_summary summary;
  summary.total_ns = graphs[0].root.total_ns;
  std::ostringstream body;
  const int picture_depth = lay_out_graphs(body, graphs, minimum_width_fraction, summary);
  summary.graphs = graphs.size();
  const double height = top_margin + (picture_depth + 2) * frame_height + 24;
  write_picture_head(out, height);
  write_graph_choices(out, graphs);
  out << body.str();
  out << fmt::format(
             R"(<text id="coverage" x="10" y="{:.0f}" style="font: 11px sans-serif">{:.3f} s of CPU time shown ({}); {} frames narrower than {:.2f}% merged ({:.2f}% of the time) into [narrow frames]</text>)",
             height - 8, summary.total_ns * 1e-9, xml_text(coverage_text(coverage_of(profile))), summary.merged_frames,
             100.0 * minimum_width_fraction,
             summary.total_ns > 0
                 ? 100.0 * static_cast<double>(summary.merged_ns) / static_cast<double>(summary.total_ns)
                 : 0.0)
      << "\n"
      << script << "</svg>\n";
  return summary;
}

}  // namespace kairos::database
