#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/printable.hpp>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;

void write_table(std::ostream& out, const std::string& title, const std::vector<function_row>& rows,
                 std::int64_t weight_ns) {
  out << fmt::format("{}\n{:>7} {:>12} {:>7} {:>12}  {}\n", title, "SELF %", "SELF ms", "TOTAL %",
                     "TOTAL ms", "FUNCTION");
  for (const auto& row : rows)
    out << fmt::format("{:>7.1f} {:>12.3f} {:>7.1f} {:>12.3f}  {}\n", percent(row.self_ns, weight_ns),
                       row.self_ns * 1e-6, percent(row.total_ns, weight_ns), row.total_ns * 1e-6,
                       printable(row.name));
  out << '\n';
}


// --- time windows ----------------------------------------------------------------------------

constexpr std::int64_t window_sections_shown = 50;
constexpr std::size_t window_functions_shown = 10;
constexpr std::size_t windows_compared = 12;

// An amount of a window's clock: "1.250 s", or "12.5 M instructions".
std::string amount(const std::string& clock, std::int64_t value) {
  if (clock == "instructions") return fmt::format("{:.3f} M instructions", value * 1e-6);
  return fmt::format("{:.3f} s", value * 1e-9);
}

std::string describe_window(const window_row& window) {
  auto text = fmt::format("window {} ({}): ", window.ordinal, printable(window.spec));
  const auto planned = fmt::format("planned {} {} to {}", window.clock, amount(window.clock, window.planned_start),
                                   amount(window.clock, window.planned_end));
  if (!window.opened) return text + "never opened (" + planned + ")";
  return text + fmt::format("{} {} to {} ({}), {} samples, {:.3f} s of CPU time", window.clock,
                            amount(window.clock, window.actual_start), amount(window.clock, window.actual_end),
                            planned, window.samples, window.weight_ns * 1e-9);
}

void write_window_sections(connection& profile, std::ostream& out, const window_range& range) {
  const auto windows = windows_in(profile, range);
  if (windows.empty()) return;
  auto functions = functions_by_window(profile, window_functions_shown, range);
  out << fmt::format("time windows: {}\n\n", windows.size());
  std::int64_t shown = 0;
  for (const auto& window : windows) {
    if (++shown > window_sections_shown) {
      out << fmt::format("... {} more windows: kairos-report --window K (or K..L) shows any of them\n\n",
                         static_cast<std::int64_t>(windows.size()) - window_sections_shown);
      break;
    }
    if (!window.opened || window.samples == 0) {
      out << describe_window(window) << "\n\n";
      continue;
    }
    write_table(out, describe_window(window), functions[window.ordinal], window.weight_ns);
  }
}

// GPU work: the kernels by total device time, the copies by kind (docs/plugins/gpu.md).
void write_gpu_sections(connection& profile, std::ostream& out, const window_range& range) {
  const auto kernels = scalar(profile, "SELECT COUNT(*) FROM gpu_kernel WHERE 1" + in_windows(range, "window"));
  const auto copies = scalar(profile, "SELECT COUNT(*) FROM gpu_memcpy WHERE 1" + in_windows(range, "window"));
  if (kernels == 0 && copies == 0) return;
  if (kernels > 0) {
    const auto total_ns = scalar(profile, "SELECT COALESCE(SUM(duration_ns), 0) FROM gpu_kernels WHERE 1" +
                                              in_windows(range, "window"));
    out << fmt::format("\ntop kernels: {} launches, {:.3f} ms of device time\n", kernels, total_ns * 1e-6);
    out << fmt::format("{:>10} {:>7} {:>9} {:>10} {:>10}  {}\n", "total ms", "%", "launches", "mean us",
                       "max us", "kernel");
    auto rows = profile.prepare(
        "SELECT name, COUNT(*), SUM(duration_ns), AVG(duration_ns), MAX(duration_ns) FROM gpu_kernels WHERE 1" +
        in_windows(range, "window") + " GROUP BY name ORDER BY SUM(duration_ns) DESC LIMIT " +
        std::to_string(kernels_shown));
    while (rows.step())
      out << fmt::format("{:>10.3f} {:>6.1f}% {:>9} {:>10.1f} {:>10.1f}  {}\n", rows.integer(2) * 1e-6,
                         percent(rows.integer(2), total_ns), rows.integer(1), rows.real(3) * 1e-3,
                         rows.integer(4) * 1e-3, printable(rows.text(0)));
  }
  if (copies > 0) {
    out << fmt::format("\ntop copies: {} copies and memsets\n", copies);
    out << fmt::format("{:>10} {:>7} {:>12} {:>9}  {}\n", "total ms", "copies", "MB", "GB/s", "kind");
    auto rows = profile.prepare(
        "SELECT kind, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM gpu_memcpy WHERE 1" +
        in_windows(range, "window") + " GROUP BY kind ORDER BY SUM(end_ns - start_ns) DESC");
    while (rows.step()) {
      const auto ns = rows.integer(3);
      out << fmt::format("{:>10.3f} {:>7} {:>12.3f} {:>9}  {}\n", ns * 1e-6, rows.integer(1),
                         rows.integer(2) * 1e-6,
                         ns > 0 ? fmt::format("{:.2f}", static_cast<double>(rows.integer(2)) / ns) : "-",
                         rows.text(0));
    }
  }
}

// --- causal profile (docs/causal.md) ------------------------------------------------------------

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", fraction * 100); }

std::string with_interval(const causal_estimate& point) {
  return signed_percent(point.program_speedup) +
         (std::isnan(point.interval) ? std::string{" (no interval)"} : fmt::format(" \u00b1 {:.1f}", point.interval * 100));
}

// What the curve's largest line speedup predicts, in words: a reader's conclusion. A latency
// point's gain is a shorter latency, not a faster program.
std::string prediction(const causal_location& location, const causal_curve& curve) {
  const auto& point = curve.estimates.back();
  const auto what = fmt::format("speeding up {} by {:.0f}%", printable(location.selected), point.line_speedup * 100);
  const auto magnitude = fmt::format("{:.1f}%", std::abs(point.program_speedup) * 100);
  const bool latency = curve.kind == "latency";
  const auto name = printable(curve.progress_point);
  if (std::isnan(point.interval))
    return fmt::format("{} would change {} by {} ({}; one experiment at that speedup gives no interval: run longer)",
                       what, latency ? name + "'s latency" : std::string{"the program's speed"},
                       signed_percent(point.program_speedup), name);
  const auto interval = fmt::format(" \u00b1 {:.1f} ({})", point.interval * 100, name);
  if (point.program_speedup - point.interval > 0)
    return what + (latency ? " would shorten " + name + "'s latency by " : " would speed the program up by ") +
           magnitude + interval;
  if (point.program_speedup + point.interval < 0)
    return what + (latency ? " would lengthen " + name + "'s latency by " : " would slow the program down by ") +
           magnitude + interval + ": the location contends with the work that matters (a lock, memory bandwidth)";
  return what + " has no effect distinguishable from noise (" + with_interval(point) + ", " + name + ")";
}

void write_causal_section(connection& profile, std::ostream& out, const window_range& range, std::size_t limit) {
  const auto summary = analyze_causal(profile, range);
  if (summary.experiments == 0) return;
  out << fmt::format("causal profile: {} experiments; progress points: {}\n", summary.experiments,
                     summary.progress_points.empty() ? "none (no progress point was reached)"
                                                     : fmt::format("{}", fmt::join(summary.progress_points, ", ")));
  if (summary.locations.empty()) {
    out << fmt::format("no location had {} visits of a progress point at a speedup and at a baseline: run longer, "
                       "or put progress points where the work completes more often\n\n",
                       causal_minimum_visits);
    return;
  }
  out << "program speedup predicted for each line speedup, with 95% intervals, against every 0% experiment together; "
         "locations ranked by impact (the mean program speedup over the line speedups tried)\n";
  const auto shown = std::min(limit, summary.locations.size());
  for (std::size_t index = 0; index < shown; ++index) {
    const auto& location = summary.locations[index];
    out << fmt::format("{:>3}. {} ({}, {} experiments): impact {}\n", index + 1, printable(location.selected),
                       location.scope, location.experiments, signed_percent(location.impact));
    const causal_curve* best = &location.curves.front();
    for (const auto& curve : location.curves) {
      std::vector<std::string> cells;
      for (const auto& point : curve.estimates)
        cells.push_back(fmt::format("{:.0f}% -> {}", point.line_speedup * 100, with_interval(point)));
      out << fmt::format("     {} ({}): {}\n", printable(curve.progress_point), curve.kind, fmt::join(cells, ", "));
      if (curve.impact > best->impact) best = &curve;
    }
    out << "     " << prediction(location, *best) << "\n";
  }
  if (summary.locations.size() > shown)
    out << fmt::format("... {} more locations: kairos-report --format causal-svg draws them all\n",
                       summary.locations.size() - shown);
  if (summary.locations_without_curve > 0)
    out << fmt::format("{} more locations were tried with fewer than {} visits of any progress point at a speedup "
                       "or at its baseline\n",
                       summary.locations_without_curve, causal_minimum_visits);
  out << '\n';
}

constexpr std::size_t region_rows_shown = 200;
constexpr std::size_t call_graph_nodes_in_json = 10000;

// --- ranks side by side (a merged database of MPI ranks) ------------------------------------

struct spread_row {
  std::string name;
  double min = 0, median = 0, mean = 0, max = 0;
  std::int64_t slowest_rank = 0;
};

// Each name's values across every rank (a rank without the name counts 0), heaviest mean first.
std::vector<spread_row> spread_across(const std::map<std::string, std::map<std::int64_t, double>>& by_name,
                                      const std::vector<std::int64_t>& ranks, std::size_t limit) {
  std::vector<spread_row> rows;
  for (const auto& [name, by_rank] : by_name) {
    std::vector<double> values;
    spread_row row{name};
    double largest = -1;
    for (const auto rank : ranks) {
      const auto found = by_rank.find(rank);
      const double value = found == by_rank.end() ? 0.0 : found->second;
      values.push_back(value);
      if (value > largest) {
        largest = value;
        row.slowest_rank = rank;
      }
    }
    std::sort(values.begin(), values.end());
    row.min = values.front();
    row.max = values.back();
    row.median = values.size() % 2 ? values[values.size() / 2]
                                    : (values[values.size() / 2 - 1] + values[values.size() / 2]) / 2;
    for (const auto value : values) row.mean += value / static_cast<double>(values.size());
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.mean > b.mean; });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

void write_spread_table(std::ostream& out, const std::string& title, const std::vector<spread_row>& rows) {
  if (rows.empty()) return;
  out << title << "\n"
      << fmt::format("{:>10} {:>10} {:>10} {:>10} {:>9} {:>8}  {}\n", "MIN s", "MEDIAN s", "MEAN s", "MAX s",
                     "MAX/MEAN", "SLOWEST", "NAME");
  for (const auto& row : rows)
    out << fmt::format("{:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>9.2f} {:>8}  {}\n", row.min, row.median, row.mean,
                       row.max, row.mean > 0 ? row.max / row.mean : 0.0, fmt::format("rank {}", row.slowest_rank),
                       printable(row.name, 160));
  out << "\n";
}

// The ranks of a database that holds several (kairos-merge of a launch); empty otherwise.
std::vector<std::int64_t> ranks_of(connection& profile) {
  std::vector<std::int64_t> ranks;
  auto query = profile.prepare("SELECT DISTINCT rank FROM process WHERE rank IS NOT NULL ORDER BY rank");
  while (query.step()) ranks.push_back(query.integer(0));
  if (ranks.size() < 2) ranks.clear();
  return ranks;
}

void write_rank_sections(connection& profile, std::ostream& out, const window_range& range, std::size_t limit) {
  const auto ranks = ranks_of(profile);
  if (ranks.empty()) return;
  out << fmt::format("{} MPI ranks side by side (seconds per rank; MAX/MEAN is the imbalance)\n\n", ranks.size());
  std::map<std::string, std::map<std::int64_t, double>> functions, regions;
  std::map<std::int64_t, std::int64_t> rank_of_thread;
  auto threads = profile.prepare("SELECT id, rank FROM threads WHERE rank IS NOT NULL");
  while (threads.step()) rank_of_thread[threads.integer(0)] = threads.integer(1);
  const auto weights = output_helpers::weigh_functions_by(
      profile, range, [&](const output_helpers::stack_sum& sum) -> std::optional<std::int64_t> {
        if (const auto rank = rank_of_thread.find(sum.thread); rank != rank_of_thread.end()) return rank->second;
        return std::nullopt;
      });
  for (const auto& [rank, rows] : weights)
    for (const auto& [name, row] : rows) functions[name][rank] = row.total_ns * 1e-9;
  write_spread_table(out, "functions, CPU time (total: with what they call)", spread_across(functions, ranks, limit));
  // Regions decoded from their blocks here (the view costs about a microsecond a row).
  output_helpers::for_each_region(profile, range, [&](const output_helpers::region_visit& region) {
    if (const auto rank = rank_of_thread.find(region.thread); rank != rank_of_thread.end())
      regions[std::string{region.name}][rank->second] += static_cast<double>(region.end_ns - region.start_ns) * 1e-9;
  });
  write_spread_table(out, "regions and instrumented functions, wall time", spread_across(regions, ranks, limit));
  // MPI: communication and waiting per rank, against the rank's run.
  auto mpi = profile.prepare(
      "SELECT p.rank, SUM(p.end_ns - p.start_ns), "
      "(SELECT COALESCE(SUM(m.duration_ns), 0) FROM mpi_calls AS m JOIN threads AS t ON t.id = m.thread "
      " WHERE t.rank = p.rank" + output_helpers::in_windows(range, "m.window") + "), "
      "(SELECT COALESCE(SUM(m.duration_ns), 0) FROM mpi_calls AS m JOIN threads AS t ON t.id = m.thread "
      " WHERE t.rank = p.rank AND (m.name LIKE 'MPI_Wait%' OR m.name = 'MPI_Barrier')" +
      output_helpers::in_windows(range, "m.window") + ") "
      "FROM process AS p WHERE p.rank IS NOT NULL GROUP BY p.rank ORDER BY p.rank");
  std::string rows;
  std::int64_t total_mpi = 0;
  while (mpi.step()) {
    const auto run_ns = mpi.integer(1), in_mpi = mpi.integer(2), waiting = mpi.integer(3);
    total_mpi += in_mpi;
    rows += fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>8.1f} {:>10.3f}\n", mpi.integer(0), run_ns * 1e-9, in_mpi * 1e-9,
                        output_helpers::percent(in_mpi, run_ns), waiting * 1e-9);
  }
  if (total_mpi == 0) return;
  out << "MPI time per rank\n"
      << fmt::format("{:>6} {:>10} {:>10} {:>8} {:>10}\n", "RANK", "RUN s", "IN MPI s", "MPI %", "WAITING s") << rows
      << "\n";
}

void write_region_rows(std::ostream& out, const output_helpers::region_node& node, std::size_t depth,
                       std::size_t& rows_left, std::int64_t& rows_cut) {
  std::vector<const output_helpers::region_node*> children;
  for (const auto& [name, child] : node.children) children.push_back(child.get());
  std::sort(children.begin(), children.end(), [](const auto* a, const auto* b) { return a->total_ns > b->total_ns; });
  for (const auto* child : children) {
    if (rows_left == 0) {
      ++rows_cut;
      continue;
    }
    --rows_left;
    const auto self_ns = child->total_ns - child->children_ns;
    // Deeper than 20, the indent stops growing and the depth is written out.
    const auto indent = depth <= 20 ? std::string(2 * depth, ' ') : fmt::format("{}[{}] ", std::string(40, ' '), depth);
    out << fmt::format("{:>10} {:>12.3f} {:>12.3f} {:>7.1f} {:>7}  {}{}\n", child->count, child->total_ns * 1e-6,
                       child->total_ns * 1e-3 / static_cast<double>(child->count),
                       output_helpers::percent(self_ns, child->total_ns), child->threads.size(), indent,
                       printable(child->name, 160));
    write_region_rows(out, *child, depth + 1, rows_left, rows_cut);
  }
}

// The regions table as a call graph: user-API regions and instrumented functions, threads merged.
void write_region_section(connection& profile, std::ostream& out, const window_range& range) {
  const auto root = output_helpers::region_call_graph(profile, range);
  if (root.children.empty()) return;
  out << "\ncall graph of regions and instrumented functions, all threads\n"
      << fmt::format("{:>10} {:>12} {:>12} {:>7} {:>7}  {}\n", "COUNT", "TOTAL ms", "MEAN us", "SELF %", "THREADS",
                     "NAME");
  std::size_t rows_left = region_rows_shown;
  std::int64_t rows_cut = 0;
  write_region_rows(out, root, 0, rows_left, rows_cut);
  if (rows_cut > 0) out << fmt::format("... {} more rows (all of them in the database's regions view)\n", rows_cut);
}

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

// MPI: how much of a rank's time went to communication and to waiting (docs/mpi.md), a section a
// process: a merged launch's rank by rank, each as its own report has it. Waiting is time in
// MPI_Wait* and MPI_Barrier, where a rank does nothing but wait for the others.
constexpr std::int64_t mpi_sections_shown = 50;

void write_mpi_sections(connection& profile, std::ostream& out, const window_range& range) {
  auto processes = profile.prepare(
      "SELECT p.id, p.pid, p.rank, p.size, p.launch_id, COALESCE(p.end_ns - p.start_ns, 0), COUNT(*) "
      "FROM process AS p JOIN thread AS t ON t.process = p.id JOIN mpi_call AS m ON m.thread = t.id WHERE 1" +
      in_windows(range, "m.window") + " GROUP BY p.id ORDER BY p.rank, p.pid, p.id");
  const bool several_processes = scalar(profile, "SELECT COUNT(*) FROM process") > 1;
  constexpr const char* waiting = " AND name IN ('MPI_Wait', 'MPI_Waitall', 'MPI_Waitany', 'MPI_Waitsome', 'MPI_Barrier')";
  std::int64_t shown = 0, left_out = 0;
  while (processes.step()) {
    if (++shown > mpi_sections_shown) {
      ++left_out;
      continue;
    }
    const auto calls = processes.integer(6), elapsed_ns = processes.integer(5);
    const auto of_process =
        fmt::format(" AND thread IN (SELECT id FROM thread WHERE process = {}){}", processes.integer(0),
                    in_windows(range, "window"));
    const auto total_ns = scalar(profile, "SELECT COALESCE(SUM(duration_ns), 0) FROM mpi_calls WHERE 1" + of_process);
    const auto waiting_ns =
        scalar(profile, "SELECT COALESCE(SUM(duration_ns), 0) FROM mpi_calls WHERE 1" + of_process + waiting);
    std::string who;
    if (!processes.is_null(2))
      who = fmt::format(", rank {} of {}{}", processes.integer(2),
                        processes.is_null(3) ? std::string{"?"} : std::to_string(processes.integer(3)),
                        processes.is_null(4) ? std::string{} : " (launch " + printable(processes.text(4)) + ")");
    else if (several_processes)
      who = fmt::format(", pid {}", processes.integer(1));
    out << fmt::format("\nMPI{}: {} calls, {:.3f} s in MPI of {:.3f} s elapsed ({:.1f}%): communication {:.3f} s "
                       "({:.1f}%), waiting {:.3f} s ({:.1f}%)\n",
                       who, calls, total_ns * 1e-9, elapsed_ns * 1e-9, percent(total_ns, elapsed_ns),
                       (total_ns - waiting_ns) * 1e-9, percent(total_ns - waiting_ns, elapsed_ns), waiting_ns * 1e-9,
                       percent(waiting_ns, elapsed_ns));
    out << fmt::format("{:>10} {:>7} {:>9} {:>12}  {}\n", "total ms", "%", "calls", "MB", "call");
    auto rows = profile.prepare("SELECT name, COUNT(*), SUM(duration_ns), COALESCE(SUM(bytes), 0) FROM mpi_calls "
                                "WHERE 1" + of_process + " GROUP BY name ORDER BY SUM(duration_ns) DESC");
    while (rows.step())
      out << fmt::format("{:>10.3f} {:>6.1f}% {:>9} {:>12.3f}  {}\n", rows.integer(2) * 1e-6,
                         percent(rows.integer(2), elapsed_ns), rows.integer(1), rows.integer(3) * 1e-6,
                         printable(rows.text(0)));
  }
  if (left_out > 0)
    out << fmt::format("\n... {} more processes' MPI sections: kairos-report --rank R shows any rank's\n", left_out);
  if (shown > 0) out << '\n';
}

// `ns` in microseconds with three decimals, exactly what "{:.3f}" writes of ns * 1e-3, without
// formatting a double: the trace's regions are millions of events, and two floats an event were
// most of the trace's time.
void append_microseconds(std::string& out, std::int64_t ns) {
  std::uint64_t magnitude = static_cast<std::uint64_t>(ns);
  if (ns < 0) magnitude = 0 - magnitude;
  // Written backwards from the last decimal: at most 20 digits, the point and a sign.
  char text[24];
  char* at = std::end(text);
  for (int place = 0; place < 3; ++place, magnitude /= 10) *--at = static_cast<char>('0' + magnitude % 10);
  *--at = '.';
  do {
    *--at = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (ns < 0) *--at = '-';
  out.append(at, static_cast<std::size_t>(std::end(text) - at));
}

}  // namespace

using namespace output_helpers;

void restrict_to_rank(connection& profile, std::int64_t rank) {
  if (scalar(profile, fmt::format("SELECT COUNT(*) FROM process WHERE rank = {}", rank)) == 0) {
    std::string present;
    auto ranks = profile.prepare("SELECT DISTINCT rank FROM process WHERE rank IS NOT NULL ORDER BY rank");
    while (ranks.step()) present += (present.empty() ? "" : ", ") + std::to_string(ranks.integer(0));
    throw database_error(fmt::format("no process has rank {} in this database; its ranks: {}", rank,
                                     present.empty() ? "none (not an MPI run)" : present));
  }
  const auto processes = fmt::format("(SELECT id FROM main.process WHERE rank = {})", rank);
  const auto threads = "(SELECT id FROM main.thread WHERE process IN " + processes + ")";
  const std::pair<const char*, std::string> filters[] = {
      {"process", "id IN " + processes},          {"process_metadata", "process IN " + processes},
      {"thread", "process IN " + processes},      {"sample", "thread IN " + threads},
      {"realtime_sample", "thread IN " + threads}, {"region_block", "thread IN " + threads},
      {"mpi_call", "thread IN " + threads},       {"counter", "process IN " + processes},
      {"call_tree", "thread IN " + threads},
      {"window", "process IN " + processes},      {"gpu_device", "process IN " + processes},
      {"gpu_kernel", "process IN " + processes},  {"gpu_memcpy", "process IN " + processes},
      {"gpu_api_call", "process IN " + processes}, {"causal_experiment", "process IN " + processes},
      {"causal_sample", "process IN " + processes},
      {"causal_progress", "experiment IN (SELECT id FROM main.causal_experiment WHERE process IN " + processes + ")"}};
  for (const auto& [table, filter] : filters)
    profile.execute(fmt::format("CREATE TEMP VIEW {0} AS SELECT * FROM main.{0} WHERE {1}", table, filter));
  // The views again, in the temporary schema: a view of the main schema reads the main tables, one of
  // the temporary schema the views above.
  std::vector<std::string> views;
  auto definitions = profile.prepare("SELECT sql FROM main.sqlite_master WHERE type = 'view'");
  while (definitions.step()) views.emplace_back(definitions.text(0));
  for (auto& sql : views) profile.execute("CREATE TEMP " + sql.substr(std::string_view{"CREATE "}.size()));
}

std::int64_t window_count(connection& profile) {
  return scalar(profile, "SELECT COUNT(DISTINCT ordinal) FROM window");
}

void write_text(connection& profile, std::ostream& out, const text_options& options) {
  const auto& range = options.windows;
  const auto samples = scalar(profile, "SELECT COUNT(*) FROM sample WHERE 1" + in_windows(range, "window"));
  const auto weight_ns =
      scalar(profile, "SELECT COALESCE(SUM(weight_ns), 0) FROM sample WHERE 1" + in_windows(range, "window"));
  const auto threads = sampled_threads(profile, range);
  out << fmt::format("kairos profile: {} samples standing for {:.3f} s of CPU time, {} threads{}\n",
                     samples, weight_ns * 1e-9, threads.size(),
                     range.all ? std::string{}
                               : fmt::format(" (time windows {} to {})", range.first, range.last));
  out << fmt::format("coverage (whole run): {}\n\n", coverage_text(coverage_of(profile)));
  write_causal_section(profile, out, range, options.causal_locations);
  write_rank_sections(profile, out, range, options.functions);
  if (samples == 0) {
    out << "no samples were recorded\n";
    write_region_section(profile, out, range);
    write_mpi_sections(profile, out, range);
    write_gpu_sections(profile, out, range);
    write_window_sections(profile, out, range);
    return;
  }
  auto weights = weigh_functions(profile, options.functions, range);
  write_table(out, "top functions, all threads", weights.overall, weight_ns);
  write_region_section(profile, out, range);
  write_mpi_sections(profile, out, range);
  write_gpu_sections(profile, out, range);
  write_window_sections(profile, out, range);
  if (!options.per_thread) return;
  // A thread's share of its own process's weight: a merged launch's thread sections read as those of
  // its rank's own report.
  std::map<std::int64_t, std::int64_t> process_weight_ns;
  for (const auto& thread : threads) process_weight_ns[thread.process] += thread.weight_ns;
  const bool several_processes = process_weight_ns.size() > 1;
  for (const auto& thread : threads) {
    if (thread.samples == 0) continue;
    const auto whole = thread.rank          ? fmt::format("rank {}'s", *thread.rank)
                       : several_processes ? fmt::format("pid {}'s", thread.pid)
                                           : std::string{"the"};
    write_table(out,
                fmt::format("{}: {} samples, {:.1f}% of {} weight",
                            thread_label(thread.rank, thread.sequent_id, thread.tid, printable(thread.name)),
                            thread.samples, percent(thread.weight_ns, process_weight_ns[thread.process]), whole),
                weights.by_thread[thread.id], thread.weight_ns);
  }
}


void write_summary_json(connection& profile, std::ostream& out, const text_options& options) {
  const auto& range = options.windows;
  const auto weight_ns =
      scalar(profile, "SELECT COALESCE(SUM(weight_ns), 0) FROM sample WHERE 1" + in_windows(range, "window"));
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
                         {"samples", scalar(profile, "SELECT COUNT(*) FROM sample WHERE 1" + in_windows(range, "window"))},
                         {"weight_ns", weight_ns},
                         {"coverage", coverage_json(coverage_of(profile))},
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
  summary["call_graph"] = call_graph_json(region_call_graph(profile, range), call_graph_nodes_in_json, call_graph_left_out);
  summary["call_graph_left_out"] = call_graph_left_out;
  summary["gpu"] = gpu_json(profile, range);
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

// GPU work in the trace: each (device, stream) a track of its own, under the process, with its
// kernels and copies as slices; API calls as slices on the calling thread's track.
template <class Separator>
void write_gpu_tracks(connection& profile, std::ostream& out, const window_range& range, std::int64_t origin_ns,
                      std::int64_t pid, Separator& separator) {
  constexpr std::int64_t first_gpu_track = 1'000'000'000;  // above any tid
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> tracks;  // (device row, stream) → tid
  auto track_of = [&](std::int64_t device, std::int64_t stream, std::string_view device_name) {
    const auto [found, added] =
        tracks.try_emplace({device, stream}, first_gpu_track + static_cast<std::int64_t>(tracks.size()));
    if (added) {
      out << separator();
      out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", pid,
                         found->second,
                         json_string(fmt::format("GPU {} stream {}", device_name,
                                                 stream == 0 ? std::string{"default"} : fmt::format("{:#x}", stream))));
    }
    return found->second;
  };
  auto work = profile.prepare(
      "SELECT 'kernel', COALESCE(gpu_kernel.device, -1), gpu_kernel.stream, string.value, gpu_kernel.start_ns, "
      "gpu_kernel.end_ns, COALESCE(gpu_device.name, '?'), gpu_kernel.grid_x, gpu_kernel.grid_y, gpu_kernel.grid_z, "
      "gpu_kernel.block_x, gpu_kernel.block_y, gpu_kernel.block_z, gpu_kernel.shared_bytes, gpu_kernel.correlation "
      "FROM gpu_kernel JOIN string ON string.id = gpu_kernel.name "
      "LEFT JOIN gpu_device ON gpu_device.id = gpu_kernel.device WHERE 1" + in_windows(range, "gpu_kernel.window") +
      " UNION ALL SELECT 'copy', COALESCE(gpu_memcpy.device, -1), gpu_memcpy.stream, gpu_memcpy.kind, "
      "gpu_memcpy.start_ns, gpu_memcpy.end_ns, COALESCE(gpu_device.name, '?'), gpu_memcpy.bytes, 0, 0, 0, 0, 0, 0, "
      "gpu_memcpy.correlation FROM gpu_memcpy LEFT JOIN gpu_device ON gpu_device.id = gpu_memcpy.device WHERE 1" +
      in_windows(range, "gpu_memcpy.window") + " ORDER BY 5");
  while (work.step()) {
    const auto tid = track_of(work.integer(1), work.integer(2), work.text(6));
    const bool kernel = work.text(0) == "kernel";
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"gpu_{}","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                       work.text(0), json_string(work.text(3)), pid, tid, (work.integer(4) - origin_ns) * 1e-3,
                       (work.integer(5) - work.integer(4)) * 1e-3);
    if (kernel)
      out << fmt::format(R"("grid":[{},{},{}],"block":[{},{},{}],"shared_bytes":{},)", work.integer(7),
                         work.integer(8), work.integer(9), work.integer(10), work.integer(11), work.integer(12),
                         work.integer(13));
    else
      out << fmt::format(R"("bytes":{},)", work.integer(7));
    out << fmt::format(R"("correlation":{}}}}})", work.integer(14));
  }
  auto calls = profile.prepare(
      "SELECT gpu_api_calls.name, threads.pid, threads.tid, gpu_api_calls.start_ns, gpu_api_calls.duration_ns, "
      "gpu_api_calls.correlation FROM gpu_api_calls JOIN threads ON threads.id = gpu_api_calls.thread WHERE 1" +
      in_windows(range, "gpu_api_calls.window") + " ORDER BY gpu_api_calls.start_ns");
  while (calls.step()) {
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"gpu_api","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},)"
                       R"("args":{{"correlation":{}}}}})",
                       json_string(calls.text(0)), calls.integer(1), calls.integer(2),
                       (calls.integer(3) - origin_ns) * 1e-3, calls.integer(4) * 1e-3, calls.integer(5));
  }
}

void write_trace(connection& profile, std::ostream& out, const window_range& range) {
  // Timestamps in microseconds from the earliest event, as the format expects.
  const auto origin_ns = scalar(profile,
                                "SELECT MIN(t) FROM (SELECT MIN(time_ns) AS t FROM sample "
                                "UNION ALL SELECT MIN(start_ns) FROM region_block "
                                "UNION ALL SELECT MIN(start_ns) FROM gpu_kernel "
                                "UNION ALL SELECT MIN(start_ns) FROM gpu_memcpy "
                                "UNION ALL SELECT MIN(start_ns) FROM gpu_api_call "
                                "UNION ALL SELECT MIN(start_ns) FROM mpi_call "
                                "UNION ALL SELECT MIN(start_ns) FROM window)");
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  // What goes before the next event (or frame): a comma, except before the first.
  auto separator = [&first]() -> std::string_view {
    const std::string_view text = first ? "" : ",\n";
    first = false;
    return text;
  };
  // A process of an MPI launch is named by its rank first: a merged launch shows a track per rank.
  auto processes = profile.prepare(
      "SELECT process.pid, COALESCE(command.value, ''), process.rank FROM process "
      "LEFT JOIN string AS command ON command.id = process.command");
  while (processes.step()) {
    out << separator();
    const auto name = processes.is_null(2) ? std::string{processes.text(1)}
                                           : fmt::format("rank {}: {}", processes.integer(2), processes.text(1));
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})",
                       processes.integer(0), json_string(name));
  }
  auto threads = profile.prepare("SELECT pid, tid, COALESCE(name, ''), sequent_id FROM threads");
  while (threads.step()) {
    out << separator();
    const auto name = threads.text(2).empty() ? fmt::format("thread {}", threads.integer(3))
                                              : std::string{threads.text(2)};
    out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                       threads.integer(0), threads.integer(1), json_string(name));
  }
  // The windows on a track of their own (tid 0 is no thread's), so the gaps between them show.
  const auto windows = windows_in(profile, range);
  const auto first_pid = scalar(profile, "SELECT MIN(pid) FROM process");
  if (!windows.empty()) {
    out << separator();
    out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"kairos time windows"}}}})",
                       first_pid);
  }
  for (const auto& window : windows) {
    if (!window.opened) continue;
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"window","name":"window {}","pid":{},"tid":0,"ts":{:.3f},"dur":{:.3f},)"
                       R"("args":{{"spec":{},"clock":"{}","planned_start":{},"planned_end":{},"actual_start":{},)"
                       R"("actual_end":{},"samples":{}}}}})",
                       window.ordinal, first_pid, (window.start_ns - origin_ns) * 1e-3,
                       (window.end_ns - window.start_ns) * 1e-3, json_string(window.spec), window.clock,
                       window.planned_start, window.planned_end, window.actual_start, window.actual_end,
                       window.samples);
  }
  write_gpu_tracks(profile, out, range, origin_ns, first_pid, separator);
  // Regions thread by thread, a parent before what it encloses (trace viewers order slices by
  // time themselves; a parent first keeps one that starts with its child above it).
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> pid_tid;  // thread.id -> (pid, tid)
  auto owners = profile.prepare("SELECT id, pid, tid FROM threads");
  while (owners.step()) pid_tid.emplace(owners.integer(0), std::pair{owners.integer(1), owners.integer(2)});
  std::map<std::string, std::string, std::less<>> quoted;  // each name escaped once
  std::int64_t current_thread = -1;
  std::string owner;  // the thread's ,"pid":..,"tid":.. (empty: no such thread)
  // Events go out a megabyte at a time: one stream write an event was a fifth of the trace's time.
  constexpr std::size_t written_at = 1 << 20;
  std::string events;
  events.reserve(written_at + 4096);
  std::string_view last_name;
  const std::string* quoted_name = nullptr;
  for_each_region(profile, range, [&](const region_visit& region) {
    if (region.thread != current_thread) {
      current_thread = region.thread;
      const auto found = pid_tid.find(region.thread);
      owner = found == pid_tid.end() ? std::string{}
                                     : fmt::format(R"(,"pid":{},"tid":{})", found->second.first, found->second.second);
    }
    if (owner.empty()) return;  // as the view's JOIN with threads
    if (region.name.data() != last_name.data()) {  // names come in runs, each from one stable string
      auto found = quoted.find(region.name);
      if (found == quoted.end()) found = quoted.emplace(std::string{region.name}, json_string(region.name)).first;
      quoted_name = &found->second;
      last_name = region.name;
    }
    events += separator();
    events += R"({"ph":"X","cat":"region","name":)";
    events += *quoted_name;
    events += owner;
    events += R"(,"ts":)";
    append_microseconds(events, region.start_ns - origin_ns);
    events += R"(,"dur":)";
    append_microseconds(events, region.end_ns - region.start_ns);
    if (region.clipped != 0) {
      events += R"(,"args":{"clipped":)";
      events += fmt::format_int{region.clipped}.c_str();
      events += '}';
    }
    events += '}';
    if (events.size() >= written_at) {
      out << events;
      events.clear();
    }
  });
  out << events;
  // MPI calls as slices on the calling thread's track, with what they moved and with whom.
  auto mpi_calls = profile.prepare(
      "SELECT mpi_calls.name, threads.pid, threads.tid, mpi_calls.start_ns, mpi_calls.duration_ns, mpi_calls.bytes, "
      "mpi_calls.peer FROM mpi_calls JOIN threads ON threads.id = mpi_calls.thread WHERE 1" +
      in_windows(range, "mpi_calls.window") + " ORDER BY mpi_calls.start_ns");
  while (mpi_calls.step()) {
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"mpi","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                       json_string(mpi_calls.text(0)), mpi_calls.integer(1), mpi_calls.integer(2),
                       (mpi_calls.integer(3) - origin_ns) * 1e-3, mpi_calls.integer(4) * 1e-3);
    const char* comma = "";
    if (!mpi_calls.is_null(5)) {
      out << fmt::format(R"("bytes":{})", mpi_calls.integer(5));
      comma = ",";
    }
    if (!mpi_calls.is_null(6)) out << fmt::format(R"({}"peer":{})", comma, mpi_calls.integer(6));
    out << "}}";
  }
  // Samples in the order they were stored (each thread's in time order), as the slices: sorting
  // them by time made SQLite hold every sample (output_helpers.hpp, "samples").
  auto samples = profile.prepare(
      "SELECT samples.leaf, threads.pid, threads.tid, samples.time_ns, samples.stack, samples.weight "
      "FROM samples JOIN threads ON threads.id = samples.thread WHERE 1" + in_windows(range, "samples.window") +
      " ORDER BY samples.id");
  while (samples.step()) {
    out << separator();
    const auto leaf = samples.is_null(0) ? std::string_view{"<no stack>"} : samples.text(0);
    out << fmt::format(R"({{"ph":"i","s":"t","cat":"sample","name":{},"pid":{},"tid":{},"ts":{:.3f})",
                       json_string(leaf), samples.integer(1), samples.integer(2),
                       (samples.integer(3) - origin_ns) * 1e-3);
    if (!samples.is_null(4)) out << fmt::format(R"(,"sf":"{}")", samples.integer(4));
    out << fmt::format(R"(,"args":{{"weight_ns":{}}}}})", samples.integer(5));
  }
  out << "\n],\"stackFrames\":{";
  auto frames = profile.prepare(
      "SELECT stack.id, stack.parent, function.value FROM stack "
      "JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function "
      "ORDER BY stack.id");
  first = true;
  while (frames.step()) {
    out << separator();
    out << fmt::format(R"("{}":{{"name":{})", frames.integer(0), json_string(frames.text(2)));
    if (!frames.is_null(1)) out << fmt::format(R"(,"parent":"{}")", frames.integer(1));
    out << '}';
  }
  out << "}}\n";
}

void write_folded(connection& profile, std::ostream& out, const window_range& range) {
  std::unordered_map<std::int64_t, std::int64_t> weights;  // stack -> weight
  for (const auto& sum : output_helpers::stack_sums(profile, range))
    if (sum.stack != 0) weights[sum.stack] += sum.weight_ns;
  // Paths are built from the root of the trie down, once per stack node, and written in their order.
  auto folded = profile.prepare(R"sql(
    WITH RECURSIVE path (id, text) AS (
      SELECT stack.id, function.value FROM stack
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function
      WHERE stack.parent IS NULL
      UNION ALL
      SELECT stack.id, path.text || ';' || function.value FROM stack
      JOIN path ON stack.parent = path.id
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function)
    SELECT path.id, path.text FROM path ORDER BY path.text)sql");
  while (folded.step()) {
    const auto weight = weights.find(folded.integer(0));
    if (weight == weights.end()) continue;
    const auto weight_us = (weight->second + 500) / 1000;
    if (weight_us > 0) out << folded.text(1) << ' ' << weight_us << '\n';
  }
}

void write_window_comparison(connection& profile, std::ostream& out, std::size_t functions) {
  auto windows = windows_in(profile, {});
  std::erase_if(windows, [](const window_row& window) { return window.weight_ns == 0; });
  if (windows.size() < 2) {
    out << fmt::format("{} time window{} samples: nothing to compare (set KAIROS_TRACE_PERIODS with "
                       "repeated or several windows)\n",
                       windows.size(), windows.size() == 1 ? " has" : "s have");
    return;
  }
  const auto with_samples = windows.size();
  if (windows.size() > windows_compared) {  // the windows with the most samples, in order
    std::sort(windows.begin(), windows.end(), [](const auto& a, const auto& b) { return a.weight_ns > b.weight_ns; });
    windows.resize(windows_compared);
    std::sort(windows.begin(), windows.end(), [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
  }
  // Each function's share of each window's weight, in percent: total (inclusive), so a phase's
  // function shows however deep its work runs.
  const auto by_window = functions_by_window(profile, std::numeric_limits<std::size_t>::max(), {});
  std::map<std::string, std::vector<double>> shares;
  for (std::size_t column = 0; column < windows.size(); ++column) {
    const auto found = by_window.find(windows[column].ordinal);
    if (found == by_window.end()) continue;
    for (const auto& row : found->second) {
      auto& share = shares.try_emplace(row.name, std::vector<double>(windows.size(), 0.0)).first->second;
      share[column] = percent(row.total_ns, windows[column].weight_ns);
    }
  }
  struct change {
    std::string name;
    double spread;
    const std::vector<double>* shares;
  };
  std::vector<change> changes;
  for (const auto& [name, share] : shares) {
    const auto [low, high] = std::minmax_element(share.begin(), share.end());
    changes.push_back({name, *high - *low, &share});
  }
  std::sort(changes.begin(), changes.end(), [](const change& a, const change& b) {
    return std::tie(b.spread, a.name) < std::tie(a.spread, b.name);
  });
  if (changes.size() > functions) changes.resize(functions);
  out << fmt::format("functions whose share of the CPU time changed most between time windows "
                     "(total %, {} of {} windows with samples)\n",
                     windows.size(), with_samples);
  out << fmt::format("{:>7}", "CHANGE");
  for (const auto& window : windows) out << fmt::format(" {:>7}", fmt::format("w{}", window.ordinal));
  out << "  FUNCTION\n";
  for (const auto& row : changes) {
    out << fmt::format("{:>7.1f}", row.spread);
    for (const double share : *row.shares) out << fmt::format(" {:>7.1f}", share);
    out << "  " << printable(row.name) << '\n';
  }
}

void write_causal_text(connection& profile, std::ostream& out, std::size_t locations, const window_range& windows) {
  write_causal_section(profile, out, windows, locations);
}

}  // namespace kairos::database
