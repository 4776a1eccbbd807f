// The HTML report: one self-contained page (style, script and pictures inline, nothing fetched) that
// a person opens from a file, sends to a colleague, or prints. Its sections: the run's summary and
// settings, the top functions (a table sorted by clicking its headers), the flame graph
// (write_flamegraph's SVG, inline), the regions' call graph with statistics, a per-thread timeline
// of regions and CPU use, then the time windows and the GPU work where the profile has them.
// write_html is the list of those sections; each formats what a query returned (output_helpers.hpp)
// and has a bounded size. None reads the samples: weights come from stack_total, the timeline's CPU
// use from sample_timeline (bin_cpu_time), so the page's cost does not grow with the run.
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "output_helpers.hpp"

namespace kairos::database {

using namespace output_helpers;

namespace {

constexpr std::size_t functions_shown = 50;
constexpr std::size_t region_rows_shown = 500;
constexpr double timeline_width = 1200, timeline_label_width = 210;
constexpr double timeline_plot_width = timeline_width - timeline_label_width - 10;
constexpr int timeline_bins = 255;  // CPU use drawn in 4-pixel columns
constexpr int timeline_lanes = 4;   // region depths drawn; deeper regions are in the table
constexpr double lane_height = 12, density_height = 16;
constexpr std::int64_t kairos_threads_from = 1'000'000;  // sequent ids of kairos's own threads

std::string milliseconds(std::int64_t ns) { return fmt::format("{:.3f}", ns * 1e-6); }

// A duration as people read it: "2.718 s", "45.4 ms", "820 µs".
std::string duration(std::int64_t ns) {
  if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", ns * 1e-9);
  if (ns >= 1'000'000) return fmt::format("{:.1f} ms", ns * 1e-6);
  return fmt::format("{:.0f} µs", ns * 1e-3);
}

// A numeric table cell: shown text, sorted by its value.
std::string number_cell(double value, std::string_view shown) {
  return fmt::format(R"(<td class="n" data-v="{}">{}</td>)", value, shown);
}

// --- the regions' call graph -----------------------------------------------------------------

// A run of regions in one lane of the timeline, merged while they lie closer than a pixel.
struct lane_run {
  std::int64_t start_ns = 0, end_ns = 0, busy_ns = 0, count = 0;
  std::string name;  // empty once regions of several names merged
  bool mixed = false;
};

struct thread_timeline {
  std::string label, detail;  // "thread 2"; "tid 4243, worker"
  std::vector<std::int64_t> cpu_ns = std::vector<std::int64_t>(timeline_bins, 0);
  std::vector<std::vector<lane_run>> lanes = std::vector<std::vector<lane_run>>(timeline_lanes);
};

struct time_span {
  std::int64_t origin_ns = 0, span_ns = 1;
  double x(std::int64_t ns) const {
    return timeline_label_width +
           timeline_plot_width * static_cast<double>(ns - origin_ns) / static_cast<double>(span_ns);
  }
};

// One pass over the regions feeds both the call graph and the timeline's lanes.
void read_regions(connection& profile, const window_range& range, const time_span& span, region_node& root,
                  std::map<std::int64_t, thread_timeline>& timelines) {
  const std::int64_t merge_ns =
      std::max<std::int64_t>(1, span.span_ns / static_cast<std::int64_t>(timeline_plot_width));
  // A thread's regions come latest first: a lane's runs grow backwards, and are turned round once read.
  root = region_call_graph(profile, range, [&](const region_visit& region) {
    if (region.depth >= static_cast<std::size_t>(timeline_lanes)) return;
    auto& lane = timelines[region.thread].lanes[region.depth];
    if (!lane.empty() && region.end_ns + merge_ns >= lane.back().start_ns) {
      auto& run = lane.back();
      run.start_ns = std::min(run.start_ns, region.start_ns);
      run.busy_ns += region.end_ns - region.start_ns;
      ++run.count;
      if (run.name != region.name) run.mixed = true;
    } else {
      lane.push_back(
          {region.start_ns, region.end_ns, region.end_ns - region.start_ns, 1, std::string{region.name}, false});
    }
  });
  for (auto& [thread, timeline] : timelines)
    for (auto& lane : timeline.lanes) std::reverse(lane.begin(), lane.end());
}

void write_region_rows(std::ostream& out, const region_node& node, int depth, std::int64_t whole_ns,
                       std::size_t& rows_left, std::int64_t& rows_cut) {
  std::vector<const region_node*> children;
  for (const auto& [name, child] : node.children) children.push_back(child.get());
  std::sort(children.begin(), children.end(),
            [](const region_node* a, const region_node* b) { return a->total_ns > b->total_ns; });
  for (const auto* child : children) {
    if (rows_left == 0) {
      ++rows_cut;
      continue;
    }
    --rows_left;
    const double mean_ms = child->total_ns * 1e-6 / static_cast<double>(child->count);
    const double variance = std::max(0.0, child->sum_squares / static_cast<double>(child->count) - mean_ms * mean_ms);
    const auto self_ns = child->total_ns - child->children_ns;
    out << fmt::format(R"(<tr><td class="name" style="padding-left:{}em">{}</td>)", 0.4 + 1.2 * depth,
                       xml_text(child->name))
        << number_cell(static_cast<double>(child->count), std::to_string(child->count))
        << number_cell(static_cast<double>(child->threads.size()), std::to_string(child->threads.size()))
        << number_cell(child->total_ns * 1e-6, milliseconds(child->total_ns))
        << number_cell(mean_ms, fmt::format("{:.3f}", mean_ms))
        << number_cell(child->min_ns * 1e-6, milliseconds(child->min_ns))
        << number_cell(child->max_ns * 1e-6, milliseconds(child->max_ns))
        << number_cell(std::sqrt(variance), fmt::format("{:.3f}", std::sqrt(variance)))
        << number_cell(percent(self_ns, child->total_ns), fmt::format("{:.1f}", percent(self_ns, child->total_ns)))
        << number_cell(percent(child->total_ns, whole_ns), fmt::format("{:.1f}", percent(child->total_ns, whole_ns)))
        << "</tr>\n";
    write_region_rows(out, *child, depth + 1, whole_ns, rows_left, rows_cut);
  }
}

// --- the timeline ----------------------------------------------------------------------------

// A process_metric series drawn above the threads: its values averaged into the timeline's bins.
struct sparkline {
  std::string name;
  std::vector<double> sum = std::vector<double>(timeline_bins, 0);
  std::vector<std::int64_t> count = std::vector<std::int64_t>(timeline_bins, 0);
  double minimum = std::numeric_limits<double>::max(), maximum = std::numeric_limits<double>::lowest();
};
constexpr double sparkline_height = 18;

// 1.2 G, 350 M, 2.5 k, 97.3: a value short enough for a label.
std::string short_number(double value) {
  const double magnitude = std::abs(value);
  if (magnitude >= 1e9) return fmt::format("{:.1f} G", value * 1e-9);
  if (magnitude >= 1e6) return fmt::format("{:.1f} M", value * 1e-6);
  if (magnitude >= 1e4) return fmt::format("{:.1f} k", value * 1e-3);
  return fmt::format("{:.1f}", value);
}

std::string tick_label(std::int64_t ns) {
  if (ns == 0) return "0";
  if (ns % 1'000'000'000 == 0) return fmt::format("{} s", ns / 1'000'000'000);
  if (ns >= 1'000'000'000) return fmt::format("{:.1f} s", ns * 1e-9);
  return fmt::format("{} ms", ns / 1'000'000);
}

// Each thread's row: its CPU use, then as many lanes as its regions' depths (at most timeline_lanes).
std::size_t lanes_used(const thread_timeline& timeline) {
  std::size_t used = 0;
  for (std::size_t depth = 0; depth < timeline.lanes.size(); ++depth)
    if (!timeline.lanes[depth].empty()) used = depth + 1;
  return used;
}
double row_height(const thread_timeline& timeline) {
  return std::max(30.0, density_height + 2 + static_cast<double>(lanes_used(timeline)) * lane_height) + 10;
}

// Time axis: about eight ticks at a round step (1, 2 or 5 times a power of ten, in ms at least).
void write_time_axis(std::ostream& out, const time_span& span, double height) {
  const double raw_step = static_cast<double>(span.span_ns) / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw_step, 1e6))));
  double step = magnitude;
  for (const double factor : {2.0, 5.0, 10.0})
    if (step < raw_step) step = magnitude * factor;
  for (double t = 0; t <= static_cast<double>(span.span_ns); t += step) {
    const double x = span.x(span.origin_ns + static_cast<std::int64_t>(t));
    out << fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="16" y2="{:.0f}" class="tick"/>)"
                       R"(<text x="{:.1f}" y="12" class="axis">{}</text>)"
                       "\n",
                       x, x, height - 4, x + 2, tick_label(static_cast<std::int64_t>(t)));
  }
}

void write_window_spans(std::ostream& out, const std::vector<window_row>& windows, const time_span& span,
                        double height) {
  for (const auto& window : windows) {
    if (!window.opened || window.end_ns <= window.start_ns) continue;
    const double x = span.x(window.start_ns), w = std::max(1.0, span.x(window.end_ns) - x);
    out << fmt::format(R"(<rect class="window" x="{:.1f}" y="16" width="{:.1f}" height="{:.0f}">)"
                       R"(<title>window {} ({}): {}</title></rect>)"
                       R"(<text x="{:.1f}" y="{:.0f}" class="axis">w{}</text>)"
                       "\n",
                       x, w, height - 20, window.ordinal, xml_text(window.spec),
                       duration(window.end_ns - window.start_ns), x + 2, height - 6, window.ordinal);
  }
}

// Process sampling's series: a line each, scaled from its minimum to its maximum.
void write_sparklines(std::ostream& out, const std::vector<sparkline>& sparklines, double top) {
  double sparkline_y = top;
  for (const auto& line : sparklines) {
    std::string points;
    const double range = line.maximum > line.minimum ? line.maximum - line.minimum : 1;
    for (int bin = 0; bin < timeline_bins; ++bin) {
      const auto index = static_cast<std::size_t>(bin);
      if (line.count[index] == 0) continue;
      const double mean = line.sum[index] / static_cast<double>(line.count[index]);
      points +=
          fmt::format("{:.1f},{:.1f} ", timeline_label_width + (bin + 0.5) * timeline_plot_width / timeline_bins,
                      sparkline_y + sparkline_height - 1 - (mean - line.minimum) / range * (sparkline_height - 2));
    }
    out << fmt::format(R"(<g class="sparkline"><text x="4" y="{:.0f}" class="detail">{}</text>)"
                       R"(<text x="4" y="{:.0f}" class="axis">{} to {}</text>)"
                       R"(<rect class="track" x="{:.1f}" y="{:.0f}" width="{:.1f}" height="{:.0f}"/>)"
                       R"(<polyline class="metric" points="{}"><title>{}: {} to {}</title></polyline></g>)"
                       "\n",
                       sparkline_y + 9, xml_text(line.name), sparkline_y + 19, short_number(line.minimum),
                       short_number(line.maximum), timeline_label_width, sparkline_y, timeline_plot_width,
                       sparkline_height, points, xml_text(line.name), short_number(line.minimum),
                       short_number(line.maximum));
    sparkline_y += sparkline_height + 4;
  }
}

// CPU use: each column's sampled CPU time over its wall time (1 = the thread ran all along).
void write_cpu_use(std::ostream& out, const thread_timeline& timeline, const time_span& span, double y) {
  const double bin_ns = static_cast<double>(span.span_ns) / timeline_bins;
  out << fmt::format(R"(<rect class="track" x="{:.1f}" y="{:.0f}" width="{:.1f}" height="{:.0f}"/>)",
                     timeline_label_width, y, timeline_plot_width, density_height);
  for (int bin = 0; bin < timeline_bins; ++bin) {
    const auto cpu = timeline.cpu_ns[static_cast<std::size_t>(bin)];
    if (cpu == 0) continue;
    const double share = std::min(1.0, static_cast<double>(cpu) / bin_ns);
    const double h = std::max(1.0, share * density_height);
    out << fmt::format(R"(<rect class="cpu" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}">)"
                       R"(<title>{:.0f}% CPU</title></rect>)",
                       timeline_label_width + bin * timeline_plot_width / timeline_bins, y + density_height - h,
                       timeline_plot_width / timeline_bins, h, 100 * share);
  }
  out << "\n";
}

void write_region_lanes(std::ostream& out, const thread_timeline& timeline, const time_span& span, double y) {
  for (std::size_t depth = 0; depth < lanes_used(timeline); ++depth) {
    const double lane_y = y + density_height + 2 + static_cast<double>(depth) * lane_height;
    for (const auto& run : timeline.lanes[depth]) {
      const double x = span.x(run.start_ns), w = std::max(1.0, span.x(run.end_ns) - x);
      const auto what = run.mixed       ? fmt::format("{} regions of several names", run.count)
                        : run.count > 1 ? fmt::format("{} x {}", run.count, printable(run.name))
                                        : std::string{printable(run.name)};
      const auto fitted_chars = static_cast<std::size_t>(std::max(0.0, (w - 4) / 6));
      out << fmt::format(R"(<g><rect class="region" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.0f}" )"
                         R"(fill="{}"><title>{}: {} in {}</title></rect>)",
                         x, lane_y, w, lane_height - 1, run.mixed ? "#b9b9b9" : "#8fb8de", xml_text(what),
                         duration(run.busy_ns), duration(run.end_ns - run.start_ns));
      if (!run.mixed && fitted_chars >= 3)
        out << fmt::format(
            R"(<text x="{:.1f}" y="{:.1f}" class="region-name">{}</text>)", x + 2, lane_y + lane_height - 3,
            xml_text(run.name.size() <= fitted_chars ? run.name : run.name.substr(0, fitted_chars - 2) + ".."));
      out << "</g>\n";
    }
  }
}

void write_timeline(std::ostream& out, const std::map<std::int64_t, thread_timeline>& timelines,
                    const std::vector<sparkline>& sparklines, const std::vector<window_row>& windows,
                    const time_span& span) {
  const double sparklines_top = 24;
  const double rows_top = sparklines_top + static_cast<double>(sparklines.size()) * (sparkline_height + 4);
  double height = rows_top + 6;
  for (const auto& [thread, timeline] : timelines) height += row_height(timeline);
  out << fmt::format(R"(<svg class="timeline" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" )"
                     R"(xmlns="http://www.w3.org/2000/svg" role="img" aria-label="per-thread timeline">)"
                     "\n",
                     timeline_width, height, timeline_width, height);
  write_time_axis(out, span, height);
  write_window_spans(out, windows, span, height);
  write_sparklines(out, sparklines, sparklines_top);
  double y = rows_top;
  for (const auto& [thread, timeline] : timelines) {
    out << fmt::format(R"(<g class="thread"><text x="4" y="{:.0f}" class="label">{}</text>)"
                       R"(<text x="4" y="{:.0f}" class="detail">{}</text>)",
                       y + 12, xml_text(timeline.label), y + 26, xml_text(timeline.detail));
    write_cpu_use(out, timeline, span, y);
    write_region_lanes(out, timeline, span, y);
    out << "</g>\n";
    y += row_height(timeline);
  }
  out << "</svg>\n";
}

constexpr const char* style = R"css(
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1f; margin: 1.5em auto; max-width: 1240px; padding: 0 1em; }
h1 { font-size: 1.45em; margin: 0 0 .3em; word-break: break-all; }
h2 { font-size: 1.15em; margin: 1.8em 0 .5em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: .3em 0; }
th, td { padding: .15em .6em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f4f1ea; font-weight: 600; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { font-family: ui-monospace, monospace; font-size: 13px; word-break: break-all; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=descending]::after { content: " \25BE"; }
table.sortable th[aria-sort=ascending]::after { content: " \25B4"; }
table.summary th { background: none; font-weight: 600; white-space: nowrap; }
table.summary tr.partial td { color: #8a1a1a; font-weight: 600; }
.note { color: #555; font-size: .92em; }
svg { max-width: 100%; height: auto; }
svg.timeline .label { font: 600 12px sans-serif; }
svg.timeline .detail { font: 11px sans-serif; fill: #555; }
svg.timeline .axis { font: 11px sans-serif; fill: #555; }
svg.timeline .tick { stroke: #e4e4e4; }
svg.timeline .track { fill: #f6f6f6; }
svg.timeline .cpu { fill: #d9622b; }
svg.timeline .metric { fill: none; stroke: #2b8a3e; stroke-width: 1.2; }
svg.timeline .window { fill: #3c7bd2; fill-opacity: .08; stroke: #3c7bd2; stroke-opacity: .4; }
svg.timeline .region-name { font: 10px monospace; pointer-events: none; }
@media print {
  body { max-width: none; margin: 0; font-size: 11px; }
  nav, .screen-only { display: none; }
  h2 { break-after: avoid; }
  tr, svg { break-inside: avoid; }
}
)css";

constexpr const char* table_script = R"js(
document.querySelectorAll("table.sortable").forEach(function (table) {
  var headers = table.querySelectorAll("th");
  headers.forEach(function (header, column) {
    header.title = "sort by this column";
    header.addEventListener("click", function () {
      var down = header.getAttribute("aria-sort") !== "descending";
      headers.forEach(function (other) { other.removeAttribute("aria-sort"); });
      header.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column], y = b.cells[column];
        var order = x.hasAttribute("data-v") ? parseFloat(x.getAttribute("data-v")) - parseFloat(y.getAttribute("data-v"))
                                             : x.textContent.localeCompare(y.textContent);
        return down ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
)js";

void write_function_table(std::ostream& out, const std::vector<function_row>& rows, std::int64_t weight_ns) {
  out << R"(<table class="sortable" id="function-table"><thead><tr><th>self %</th><th>self ms</th><th>total %</th>)"
         R"(<th>total ms</th><th>function</th></tr></thead><tbody>)"
      << "\n";
  for (const auto& row : rows)
    out << "<tr>"
        << number_cell(percent(row.self_ns, weight_ns), fmt::format("{:.1f}", percent(row.self_ns, weight_ns)))
        << number_cell(row.self_ns * 1e-6, milliseconds(row.self_ns))
        << number_cell(percent(row.total_ns, weight_ns), fmt::format("{:.1f}", percent(row.total_ns, weight_ns)))
        << number_cell(row.total_ns * 1e-6, milliseconds(row.total_ns)) << R"(<td class="name">)" << xml_text(row.name)
        << "</td></tr>\n";
  out << "</tbody></table>\n";
}

// --- the page's sections ---------------------------------------------------------------------

// What the page shows, from the queries (output_helpers.hpp), each read once.
struct page_data {
  metadata_map metadata;
  run_process process;
  sample_totals samples;  // in the windows shown
  std::int64_t regions_recorded = 0;
  std::vector<thread_row> threads;
  std::vector<window_row> windows;
  time_span span;
  std::map<std::int64_t, thread_timeline> timelines;  // by thread.id, in id order
  region_node regions;
  std::vector<sparkline> sparklines;  // by series ordinal
  gpu_summary gpu;
};

// The timeline spans the process and whatever was recorded (a database from an older kairos
// started its process row late).
time_span timeline_span(connection& profile, const run_process& process) {
  const auto recorded = samples_and_regions_extent(profile);
  time_span span;
  span.origin_ns = process.start_ns > 0
                       ? std::min(process.start_ns, recorded.first_ns > 0 ? recorded.first_ns : process.start_ns)
                       : recorded.first_ns;
  span.span_ns = std::max<std::int64_t>(1, std::max(process.end_ns, recorded.last_ns) - span.origin_ns);
  return span;
}

// Process sampling's series, each value averaged into its bin.
std::vector<sparkline> read_sparklines(connection& profile, const window_range& range, const time_span& span) {
  std::vector<sparkline> sparklines;
  for_each_metric_value(profile, range, [&](const metric_series& series, std::int64_t time_ns, double value) {
    if (static_cast<std::size_t>(series.ordinal) >= sparklines.size()) sparklines.resize(series.ordinal + 1);
    auto& line = sparklines[static_cast<std::size_t>(series.ordinal)];
    if (line.name.empty()) line.name = series.name;
    const auto offset = static_cast<__int128>(std::max<std::int64_t>(0, time_ns - span.origin_ns));
    const auto bin = static_cast<std::size_t>(
        std::min<std::int64_t>(timeline_bins - 1, static_cast<std::int64_t>(offset * timeline_bins / span.span_ns)));
    line.sum[bin] += value;
    ++line.count[bin];
    line.minimum = std::min(line.minimum, value);
    line.maximum = std::max(line.maximum, value);
  });
  return sparklines;
}

page_data read_page(connection& profile, const window_range& range) {
  page_data page;
  page.metadata = read_metadata(profile);
  page.process = first_process(profile, page.metadata);
  page.samples = sample_totals_in(profile, range);
  page.regions_recorded = region_count(profile, range);
  page.threads = sampled_threads(profile, range);
  page.windows = windows_in(profile, range);
  page.span = timeline_span(profile, page.process);
  read_regions(profile, range, page.span, page.regions, page.timelines);
  for (auto& [thread, weights] :
       bin_cpu_time(profile, range, page.span.origin_ns, page.span.span_ns, timeline_bins).weight_ns)
    page.timelines[thread].cpu_ns = std::move(weights);
  page.sparklines = read_sparklines(profile, range, page.span);
  for (const auto& thread : page.threads)
    if (const auto found = page.timelines.find(thread.id); found != page.timelines.end())
      found->second.label = thread_name(thread.rank, thread.sequent_id),
      found->second.detail =
          fmt::format("tid {}{}{}", thread.tid, thread.name.empty() ? "" : ", ", printable(thread.name).substr(0, 24));
  page.gpu = gpu_summary_of(profile, range);
  return page;
}

void write_head(std::ostream& out, const page_data& page, std::string_view generator) {
  const auto executable = page.process.command.substr(0, page.process.command.find(' '));
  const auto title = fmt::format("kairos profile: {}", executable.substr(executable.rfind('/') + 1));
  out << fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"generator\" content=\"{}\">\n<title>{} (pid {})</title>\n<style>{}</style>\n</head>\n<body>\n"
      "<h1>{}</h1>\n",
      xml_text(generator), xml_text(title), page.process.pid, style, xml_text(title));
  out << R"(<nav class="screen-only"><a href="#summary">summary</a><a href="#functions">top functions</a>)"
         R"(<a href="#flame-graph">flame graph</a><a href="#regions">regions</a><a href="#timeline">timeline</a>)";
  if (!page.windows.empty()) out << R"(<a href="#windows">time windows</a>)";
  if (page.gpu.any_work()) out << R"(<a href="#gpu">GPU</a>)";
  out << "<a href=\"#settings\">settings</a></nav>\n";
}

// First: the shares below are of what was sampled, which may be far from all the program ran.
void write_coverage_rows(std::ostream& out, connection& profile) {
  const auto coverage = coverage_of(profile);
  const bool partial = coverage.sampled_fraction() < 0.9 || coverage.dropped_regions > 0 || coverage.rows_lost > 0;
  out << fmt::format("<tr id=\"coverage\"{}><th>coverage</th><td>{}</td></tr>\n", partial ? R"( class="partial")" : "",
                     xml_text(coverage_text(coverage)));
  if (const auto children = unprofiled_children_text(unprofiled_children_of(profile), coverage.program_cpu_ns);
      !children.empty())
    out << fmt::format("<tr id=\"children\" class=\"partial\"><th>children</th><td>{}</td></tr>\n", xml_text(children));
}

void write_summary(std::ostream& out, connection& profile, const page_data& page, const window_range& range,
                   std::string_view generator) {
  out << "<section id=\"summary\">\n<h2>Summary</h2>\n<table class=\"summary\" id=\"summary-table\">\n";
  auto row = [&](std::string_view name, const std::string& value) {
    if (!value.empty()) out << fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", name, value);
  };
  write_coverage_rows(out, profile);
  const auto& process = page.process;
  row("command", fmt::format(R"(<span class="name">{}</span>)", xml_text(process.command)));
  row("host", xml_text(process.host));
  row("pid", std::to_string(process.pid));
  const auto launch = metadata_value(page.metadata, metadata_key::setting_launch_date);  // 20261123-111210
  if (launch.size() == 15)
    row("started", fmt::format("{}-{}-{} {}:{}:{}", launch.substr(0, 4), launch.substr(4, 2), launch.substr(6, 2),
                               launch.substr(9, 2), launch.substr(11, 2), launch.substr(13, 2)));
  if (process.end_ns > process.start_ns && process.start_ns > 0)
    row("duration", duration(process.end_ns - process.start_ns));
  row("ended by", xml_text(metadata_value(page.metadata, metadata_key::end_reason)));
  if (!range.all) row("shown", fmt::format("time windows {} to {} only", range.first, range.last));
  const auto program_threads = std::count_if(page.threads.begin(), page.threads.end(),
                                             [](const thread_row& t) { return t.sequent_id < kairos_threads_from; });
  row("threads", fmt::format("{} of the program's, {} of them sampled", program_threads,
                             std::count_if(page.threads.begin(), page.threads.end(),
                                           [](const thread_row& t) { return t.samples > 0; })));
  const auto frequency = metadata_value(page.metadata, metadata_key::setting_sampling_freq);
  const auto source = metadata_value(page.metadata, metadata_key::sampling_cpu_source);
  row("samples",
      fmt::format("{} standing for {} of CPU time{}", page.samples.samples, duration(page.samples.weight_ns),
                  source.empty() ? std::string{} : fmt::format(" ({}, {} Hz)", xml_text(source), xml_text(frequency))));
  row("regions", std::to_string(page.regions_recorded));
  std::string lost;
  for (const auto& [key, value] : page.metadata)
    if ((key.starts_with("dropped.") || key == metadata_key::rows_lost) && value != "0")
      lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", xml_text(value), xml_text(key));
  // What was never sampled is not a loss of rows: the coverage row above says it.
  row("dropped", lost.empty() ? std::string{"no sample or row dropped"} : lost);
  row("written by", fmt::format("{}, database schema {}", xml_text(generator),
                                xml_text(metadata_value(page.metadata, metadata_key::schema_version))));
  out << "</table>\n</section>\n";
}

void write_top_functions(std::ostream& out, connection& profile, const page_data& page, const window_range& range) {
  out << "<section id=\"functions\">\n<h2>Top functions</h2>\n";
  if (page.samples.samples == 0) {
    out << "<p>No samples were recorded.</p>\n";
  } else {
    out << fmt::format(
        "<p class=\"note\">By CPU time sampled, all threads; the {} heaviest by self time. Click a "
        "header to sort.</p>\n",
        functions_shown);
    write_function_table(out, weigh_functions(profile, functions_shown, range).overall, page.samples.weight_ns);
  }
  out << "</section>\n";
}

void write_flame_graph_section(std::ostream& out, connection& profile, const page_data& page,
                               const window_range& range) {
  out << "<section id=\"flame-graph\">\n<h2>Flame graph</h2>\n";
  if (page.samples.samples == 0) {
    out << "<p>No samples were recorded.</p>\n";
  } else {
    out << "<p class=\"note screen-only\">Click a frame to zoom, <em>reset</em> to go back; <em>search</em> "
           "highlights a regular expression; a thread's name shows its own graph.</p>\n";
    std::ostringstream picture;
    write_flamegraph(profile, picture, range);
    auto svg = std::move(picture).str();
    svg.erase(0, svg.find("<svg"));  // the XML declaration has no place inside HTML
    out << svg;
  }
  out << "</section>\n";
}

void write_regions_section(std::ostream& out, const region_node& regions) {
  out << "<section id=\"regions\">\n<h2>Regions</h2>\n";
  if (regions.children.empty()) {
    out << "<p>No regions were recorded (kairos_push_region / kairos_pop_region, or a component bundle, "
           "records them).</p>\n";
  } else {
    std::int64_t top_level_ns = 0;
    for (const auto& [name, child] : regions.children) top_level_ns += child->total_ns;
    out << "<p class=\"note\">The call graph of the regions, all threads merged; times in ms of wall time. "
           "Self % is the share of a region's time not spent in its child regions; of total, the share of "
           "all top-level regions' time.</p>\n"
           "<table id=\"region-table\"><thead><tr><th>region</th><th>count</th><th>threads</th><th>total ms</th>"
           "<th>mean ms</th><th>min ms</th><th>max ms</th><th>stddev ms</th><th>self %</th><th>of total %</th>"
           "</tr></thead><tbody>\n";
    std::size_t rows_left = region_rows_shown;
    std::int64_t rows_cut = 0;
    write_region_rows(out, regions, 0, top_level_ns, rows_left, rows_cut);
    out << "</tbody></table>\n";
    if (rows_cut > 0)
      out << fmt::format(
          "<p class=\"note\">{} more rows are left out; the database has every region "
          "(view <code>regions</code>).</p>\n",
          rows_cut);
  }
  out << "</section>\n";
}

void write_timeline_section(std::ostream& out, const page_data& page) {
  out << "<section id=\"timeline\">\n<h2>Timeline</h2>\n";
  if (page.timelines.empty() && page.sparklines.empty()) {
    out << "<p>Nothing was recorded over time.</p>\n";
  } else {
    out << fmt::format(
        "<p class=\"note\">{}Each thread's CPU use (orange, from the samples: full height is a "
        "thread that ran all along) and its regions by depth (blue; grey where regions of "
        "several names lie closer than a pixel). {} from the start of the process.</p>\n",
        page.sparklines.empty() ? ""
                                : "First the process's metrics (green, each from its least to its greatest value; "
                                  "table <code>process_metric</code>). ",
        duration(page.span.span_ns));
    write_timeline(out, page.timelines, page.sparklines, page.windows, page.span);
  }
  out << "</section>\n";
}

void write_windows_section(std::ostream& out, connection& profile, const page_data& page, const window_range& range) {
  if (page.windows.empty()) return;
  const auto window_functions = functions_by_window(profile, 1, range);
  const auto origin_ns = page.span.origin_ns;
  out << "<section id=\"windows\">\n<h2>Time windows</h2>\n<table class=\"sortable\" "
         "id=\"window-table\"><thead><tr><th>window</th>"
         "<th>spec</th><th>clock</th><th>opened at</th><th>length</th><th>samples</th><th>CPU ms</th>"
         "<th>top function</th></tr></thead><tbody>\n";
  for (const auto& window : page.windows) {
    const auto top = window_functions.find(window.ordinal);
    out << "<tr>" << number_cell(static_cast<double>(window.ordinal), std::to_string(window.ordinal))
        << fmt::format(R"(<td class="name">{}</td><td>{}</td>)", xml_text(window.spec), xml_text(window.clock))
        << (window.opened
                ? number_cell(static_cast<double>(window.start_ns - origin_ns), duration(window.start_ns - origin_ns)) +
                      number_cell(static_cast<double>(window.end_ns - window.start_ns),
                                  duration(window.end_ns - window.start_ns))
                : std::string{R"(<td colspan="2">never opened</td>)"})
        << number_cell(static_cast<double>(window.samples), std::to_string(window.samples))
        << number_cell(window.weight_ns * 1e-6, milliseconds(window.weight_ns)) << R"(<td class="name">)"
        << (top != window_functions.end() && !top->second.empty() ? xml_text(top->second.front().name) : "")
        << "</td></tr>\n";
  }
  out << "</tbody></table>\n</section>\n";
}

// GPU names are shown as the json format stores them (printable), then escaped as every name.
void write_kernel_table(std::ostream& out, const std::vector<gpu_summary::kernel>& kernels) {
  out << fmt::format(
      "<h3>Top kernels</h3>\n<p class=\"note\">The {} kernels with the most device time.</p>\n"
      "<table class=\"sortable\" id=\"kernel-table\"><thead><tr><th>total ms</th><th>launches</th><th>mean µs</th>"
      "<th>max µs</th><th>kernel</th></tr></thead><tbody>\n",
      kernels_shown);
  for (const auto& kernel : kernels) {
    const double mean_us = kernel.total_ns * 1e-3 / static_cast<double>(std::max<std::int64_t>(1, kernel.launches));
    out << "<tr>" << number_cell(kernel.total_ns * 1e-6, milliseconds(kernel.total_ns))
        << number_cell(static_cast<double>(kernel.launches), std::to_string(kernel.launches))
        << number_cell(mean_us, fmt::format("{:.1f}", mean_us))
        << number_cell(kernel.max_ns * 1e-3, fmt::format("{:.1f}", kernel.max_ns * 1e-3)) << R"(<td class="name">)"
        << xml_text(printable(kernel.name)) << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
}

void write_copy_table(std::ostream& out, const std::vector<gpu_summary::copies>& by_kind) {
  out << "<h3>Copies and memsets</h3>\n<table class=\"sortable\" "
         "id=\"copy-table\"><thead><tr><th>kind</th><th>count</th>"
         "<th>MB</th><th>total ms</th><th>GB/s</th></tr></thead><tbody>\n";
  for (const auto& copies : by_kind) {
    const double rate =
        copies.total_ns > 0 ? static_cast<double>(copies.bytes) / static_cast<double>(copies.total_ns) : 0.0;
    out << fmt::format("<tr><td>{}</td>", xml_text(copies.kind))
        << number_cell(static_cast<double>(copies.count), std::to_string(copies.count))
        << number_cell(copies.bytes * 1e-6, fmt::format("{:.3f}", copies.bytes * 1e-6))
        << number_cell(copies.total_ns * 1e-6, milliseconds(copies.total_ns))
        << number_cell(rate, copies.total_ns > 0 ? fmt::format("{:.2f}", rate) : "-") << "</tr>\n";
  }
  out << "</tbody></table>\n";
}

void write_gpu_section(std::ostream& out, const gpu_summary& gpu) {
  if (!gpu.any_work()) return;
  out << "<section id=\"gpu\">\n<h2>GPU</h2>\n";
  for (const auto& device : gpu.devices)
    out << fmt::format("<p>{} device {}: {} ({}, {} multiprocessors, {:.1f} GiB)</p>\n", xml_text(device.api),
                       device.index, xml_text(printable(device.name)), xml_text(device.architecture),
                       device.multiprocessors, device.memory_bytes / double(1 << 30));
  if (!gpu.top_kernels.empty()) write_kernel_table(out, gpu.top_kernels);
  if (!gpu.by_kind.empty()) write_copy_table(out, gpu.by_kind);
  out << "</section>\n";
}

void write_settings(std::ostream& out, const metadata_map& metadata) {
  out << "<section id=\"settings\">\n<h2>Settings</h2>\n<p class=\"note\">The run's settings that have a value "
         "(docs/settings.md).</p>\n<table class=\"summary\" id=\"settings-table\">\n";
  for (const auto& [key, value] : metadata)
    if (key.starts_with(metadata_key::setting_prefix) && !value.empty())
      out << fmt::format("<tr><th>{}</th><td class=\"name\">{}</td></tr>\n",
                         xml_text(key.substr(metadata_key::setting_prefix.size())), xml_text(value));
  out << "</table>\n</section>\n";
}

}  // namespace

void write_html(connection& profile, std::ostream& out, const window_range& range, std::string_view generator) {
  const auto page = read_page(profile, range);
  write_head(out, page, generator);
  write_summary(out, profile, page, range, generator);
  write_top_functions(out, profile, page, range);
  write_flame_graph_section(out, profile, page, range);
  write_regions_section(out, page.regions);
  write_timeline_section(out, page);
  write_windows_section(out, profile, page, range);
  write_gpu_section(out, page.gpu);
  write_settings(out, page.metadata);
  out << "<script>" << table_script << "</script>\n</body>\n</html>\n";
}

}  // namespace kairos::database
