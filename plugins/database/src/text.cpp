// The text report (`text` format, kairos-report's default): the summary, the coverage, then one
// section each for causal profiling, ranks, functions, regions, MPI, GPU work and time windows;
// the comparison of windows and the causal text, which share its sections.
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
#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/printable.hpp>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;

void write_table(std::ostream& out, const std::string& title, const std::vector<function_row>& rows,
                 std::int64_t weight_ns) {
  out << fmt::format("{}\n{:>7} {:>12} {:>7} {:>12}  {}\n", title, "SELF %", "SELF ms", "TOTAL %", "TOTAL ms",
                     "FUNCTION");
  for (const auto& row : rows)
    out << fmt::format("{:>7.1f} {:>12.3f} {:>7.1f} {:>12.3f}  {}\n", percent(row.self_ns, weight_ns),
                       row.self_ns * 1e-6, percent(row.total_ns, weight_ns), row.total_ns * 1e-6, printable(row.name));
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
                            amount(window.clock, window.actual_start), amount(window.clock, window.actual_end), planned,
                            window.samples, window.weight_ns * 1e-9);
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
    const auto total_ns =
        scalar(profile, "SELECT COALESCE(SUM(duration_ns), 0) FROM gpu_kernels WHERE 1" + in_windows(range, "window"));
    out << fmt::format("\ntop kernels: {} launches, {:.3f} ms of device time\n", kernels, total_ns * 1e-6);
    out << fmt::format("{:>10} {:>7} {:>9} {:>10} {:>10}  {}\n", "total ms", "%", "launches", "mean us", "max us",
                       "kernel");
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
    auto rows = profile.prepare("SELECT kind, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM gpu_memcpy WHERE 1" +
                                in_windows(range, "window") + " GROUP BY kind ORDER BY SUM(end_ns - start_ns) DESC");
    while (rows.step()) {
      const auto ns = rows.integer(3);
      out << fmt::format("{:>10.3f} {:>7} {:>12.3f} {:>9}  {}\n", ns * 1e-6, rows.integer(1), rows.integer(2) * 1e-6,
                         ns > 0 ? fmt::format("{:.2f}", static_cast<double>(rows.integer(2)) / ns) : "-", rows.text(0));
    }
  }
}

// --- causal profile (docs/causal.md) ------------------------------------------------------------

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", fraction * 100); }

std::string with_interval(const causal_estimate& point) {
  return signed_percent(point.program_speedup) + (std::isnan(point.interval)
                                                      ? std::string{" (no interval)"}
                                                      : fmt::format(" \u00b1 {:.1f}", point.interval * 100));
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
  if (summary.core_share < causal_full_core_share)
    out << fmt::format(
        "the program's threads had a core {:.0f}% of the time they were ready to run (other processes, or in a VM "
        "the hypervisor's other guests, held the rest): delays were scaled to the wall time the sped-up code took, "
        "but a virtual speedup assumes a core per busy thread (docs/causal.md, \"Limits\")\n",
        summary.core_share * 100);
  if (summary.locations.empty()) {
    out << fmt::format(
        "no location had {} visits of a progress point at a speedup and at a baseline: run longer, "
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
    out << fmt::format(
        "{} more locations were tried with fewer than {} visits of any progress point at a speedup "
        "or at its baseline\n",
        summary.locations_without_curve, causal_minimum_visits);
  out << '\n';
}

constexpr std::size_t region_rows_shown = 200;

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
    row.median =
        values.size() % 2 ? values[values.size() / 2] : (values[values.size() / 2 - 1] + values[values.size() / 2]) / 2;
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
      " WHERE t.rank = p.rank" +
      output_helpers::in_windows(range, "m.window") +
      "), "
      "(SELECT COALESCE(SUM(m.duration_ns), 0) FROM mpi_calls AS m JOIN threads AS t ON t.id = m.thread "
      " WHERE t.rank = p.rank AND (m.name LIKE 'MPI_Wait%' OR m.name = 'MPI_Barrier')" +
      output_helpers::in_windows(range, "m.window") +
      ") "
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
  constexpr const char* waiting =
      " AND name IN ('MPI_Wait', 'MPI_Waitall', 'MPI_Waitany', 'MPI_Waitsome', 'MPI_Barrier')";
  std::int64_t shown = 0, left_out = 0;
  while (processes.step()) {
    if (++shown > mpi_sections_shown) {
      ++left_out;
      continue;
    }
    const auto calls = processes.integer(6), elapsed_ns = processes.integer(5);
    const auto of_process = fmt::format(" AND thread IN (SELECT id FROM thread WHERE process = {}){}",
                                        processes.integer(0), in_windows(range, "window"));
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
    out << fmt::format(
        "\nMPI{}: {} calls, {:.3f} s in MPI of {:.3f} s elapsed ({:.1f}%): communication {:.3f} s "
        "({:.1f}%), waiting {:.3f} s ({:.1f}%)\n",
        who, calls, total_ns * 1e-9, elapsed_ns * 1e-9, percent(total_ns, elapsed_ns), (total_ns - waiting_ns) * 1e-9,
        percent(total_ns - waiting_ns, elapsed_ns), waiting_ns * 1e-9, percent(waiting_ns, elapsed_ns));
    out << fmt::format("{:>10} {:>7} {:>9} {:>12}  {}\n", "total ms", "%", "calls", "MB", "call");
    auto rows = profile.prepare(
        "SELECT name, COUNT(*), SUM(duration_ns), COALESCE(SUM(bytes), 0) FROM mpi_calls "
        "WHERE 1" +
        of_process + " GROUP BY name ORDER BY SUM(duration_ns) DESC");
    while (rows.step())
      out << fmt::format("{:>10.3f} {:>6.1f}% {:>9} {:>12.3f}  {}\n", rows.integer(2) * 1e-6,
                         percent(rows.integer(2), elapsed_ns), rows.integer(1), rows.integer(3) * 1e-6,
                         printable(rows.text(0)));
  }
  if (left_out > 0)
    out << fmt::format("\n... {} more processes' MPI sections: kairos-report --rank R shows any rank's\n", left_out);
  if (shown > 0) out << '\n';
}

// OpenMP's parallel regions (docs/openmp.md): per region, each thread's work and wait summed over
// the region's instances (the whole run: the sums are not kept by window), the largest work over
// the mean. Merged processes' sums are shown process by process.
constexpr std::int64_t openmp_regions_shown = 20;
constexpr std::int64_t openmp_threads_shown = 64;

void write_openmp_section(connection& profile, std::ostream& out) {
  if (scalar(profile, "SELECT COUNT(*) FROM openmp_thread_time") == 0) return;
  std::string runtime;
  auto runtime_row = profile.prepare("SELECT value FROM metadata WHERE key = ?");
  runtime_row.bind(1, database::metadata_key::openmp_runtime);
  if (runtime_row.step()) runtime = std::string{runtime_row.text(0)};
  out << fmt::format(
      "\nOpenMP imbalance{}, whole run: per parallel region, each thread's work and its wait (barriers, "
      "taskwait, locks), summed over the region's instances; imbalance = largest work / mean work\n",
      runtime.empty() ? std::string{} : " (" + printable(runtime) + ")");
  auto regions = profile.prepare(
      "SELECT process, region, threads, instances, imbalance, max_work_ns, mean_work_ns, wait_ns FROM "
      "openmp_imbalance ORDER BY max_work_ns * threads DESC LIMIT " +
      std::to_string(openmp_regions_shown + 1));
  std::int64_t shown = 0;
  while (regions.step()) {
    if (++shown > openmp_regions_shown) {
      out << "... more regions in the database's openmp_imbalance view\n";
      break;
    }
    out << fmt::format(
        "{}: {} instances, {} threads, imbalance {:.3f} (largest work {:.3f} ms, mean {:.3f} ms), "
        "waits {:.3f} ms\n",
        printable(regions.text(1)), regions.integer(3), regions.integer(2), regions.is_null(4) ? 0.0 : regions.real(4),
        regions.integer(5) * 1e-6, regions.real(6) * 1e-6, regions.integer(7) * 1e-6);
    out << fmt::format("{:>8} {:>10} {:>12} {:>12}\n", "thread", "instances", "work ms", "wait ms");
    auto threads = profile.prepare(
        "SELECT thread, instances, work_ns, wait_ns FROM openmp_thread_times WHERE process = ? AND region = ? "
        "ORDER BY thread LIMIT " +
        std::to_string(openmp_threads_shown));
    threads.bind(1, regions.integer(0)).bind(2, regions.text(1));
    while (threads.step())
      out << fmt::format("{:>8} {:>10} {:>12.3f} {:>12.3f}\n", threads.integer(0), threads.integer(1),
                         threads.integer(2) * 1e-6, threads.integer(3) * 1e-6);
    if (regions.integer(2) > openmp_threads_shown)
      out << fmt::format("... {} more threads\n", regions.integer(2) - openmp_threads_shown);
  }
}

}  // namespace

using namespace output_helpers;

void write_text(connection& profile, std::ostream& out, const text_options& options) {
  const auto& range = options.windows;
  const auto totals = sample_totals_in(profile, range);
  const auto samples = totals.samples, weight_ns = totals.weight_ns;
  const auto threads = sampled_threads(profile, range);
  out << fmt::format("kairos profile: {} samples standing for {:.3f} s of CPU time, {} threads{}\n", samples,
                     weight_ns * 1e-9, threads.size(),
                     range.all ? std::string{} : fmt::format(" (time windows {} to {})", range.first, range.last));
  const auto coverage = coverage_of(profile);
  out << fmt::format("coverage (whole run): {}\n", coverage_text(coverage));
  if (const auto children = unprofiled_children_text(unprofiled_children_of(profile), coverage.program_cpu_ns);
      !children.empty())
    out << "children: " << children << '\n';
  out << '\n';
  write_causal_section(profile, out, range, options.causal_locations);
  write_rank_sections(profile, out, range, options.functions);
  if (samples == 0) {
    out << "no samples were recorded\n";
    write_region_section(profile, out, range);
    write_openmp_section(profile, out);
    write_mpi_sections(profile, out, range);
    write_gpu_sections(profile, out, range);
    write_window_sections(profile, out, range);
    return;
  }
  auto weights = weigh_functions(profile, options.functions, range);
  write_table(out, "top functions, all threads", weights.overall, weight_ns);
  write_region_section(profile, out, range);
  write_openmp_section(profile, out);
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
    const auto whole = thread.rank         ? fmt::format("rank {}'s", *thread.rank)
                       : several_processes ? fmt::format("pid {}'s", thread.pid)
                                           : std::string{"the"};
    write_table(out,
                fmt::format("{}: {} samples, {:.1f}% of {} weight",
                            thread_label(thread.rank, thread.sequent_id, thread.tid, printable(thread.name)),
                            thread.samples, percent(thread.weight_ns, process_weight_ns[thread.process]), whole),
                weights.by_thread[thread.id], thread.weight_ns);
  }
}

void write_window_comparison(connection& profile, std::ostream& out, std::size_t functions) {
  auto windows = windows_in(profile, {});
  std::erase_if(windows, [](const window_row& window) { return window.weight_ns == 0; });
  if (windows.size() < 2) {
    out << fmt::format(
        "{} time window{} samples: nothing to compare (set KAIROS_TRACE_PERIODS with "
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
  std::sort(changes.begin(), changes.end(),
            [](const change& a, const change& b) { return std::tie(b.spread, a.name) < std::tie(a.spread, b.name); });
  if (changes.size() > functions) changes.resize(functions);
  out << fmt::format(
      "functions whose share of the CPU time changed most between time windows "
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
