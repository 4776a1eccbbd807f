// Causal profiling's analysis (causal.hpp). The speedup of a cell follows coz's
// viewer: per (location, progress point, line speedup), durations and visits are summed over the
// experiments; a throughput point's period is duration / visits, a latency point's the mean latency
// by Little's law (mean in flight / arrival rate); program speedup = (baseline - period) / baseline.
#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/metadata_keys.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;

// The 97.5% quantile of Student's t with `degrees` degrees of freedom (a 95% two-sided interval):
// a table to 30, then 1.96 + 2.5 / degrees, within 0.002 of the true value beyond. NaN for no
// degree of freedom (one experiment): no interval.
double t_quantile(std::int64_t degrees) {
  if (degrees < 1) return std::numeric_limits<double>::quiet_NaN();
  constexpr double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                              2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                              2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (degrees <= 30) return table[degrees - 1];
  return 1.96 + 2.5 / static_cast<double>(degrees);
}

// One cell's sums over its experiments. The period is the ratio estimator R = sum(x) / sum(n), x an
// experiment's time (throughput: its duration; latency: its in-flight count times its duration, so
// that sum(x) / sum(arrivals) is Little's law on the duration-weighted mean in flight, as coz's
// viewer weighs it) and n its visits.
//
// The interval: each experiment is one independent measurement of the period, so the spread of
// their residuals x - R n gives R's standard error (the ratio estimator's delta-method variance),
// and a speedup's interval follows from its cell's and its baseline's errors, with Student's t for
// the fewer experiments of the two. Chosen over a bootstrap because five sums per cell give it in
// one SQL pass, with no experiment held in memory (outputs stream: docs/database.md), and the same
// profile always reads the same numbers (a bootstrap's are random).
struct cell {
  std::int64_t experiments = 0, visits = 0;
  double x = 0, n = 0, xx = 0, nn = 0, xn = 0;

  double period() const { return x / n; }
  // The period's standard error; NaN with one experiment (no spread to measure).
  double standard_error() const {
    if (experiments < 2) return std::numeric_limits<double>::quiet_NaN();
    const double r = period();
    const double residuals = std::max(0.0, xx - 2 * r * xn + r * r * nn);
    const double k = static_cast<double>(experiments);
    return std::sqrt(residuals * k / (k - 1)) / n;
  }
  bool usable() const { return visits >= causal_minimum_visits && x > 0 && n > 0; }
};

// Cells of experiments in `windows`, in (scope, selected, point, kind, percent) order; `pooled`
// groups every location's 0% experiments together (the pooled baselines). Columns: scope, selected,
// name, kind, percent, then the sums read_cell reads.
std::string cells_sql(const window_range& windows, bool pooled) {
  return fmt::format(
      "WITH measured AS (SELECT {}, p.name AS name, p.kind AS kind, "
      "CAST(ROUND(e.speedup * 100) AS INTEGER) AS percent, p.delta AS visits, CAST(p.delta AS REAL) AS n, "
      "CASE WHEN p.kind = 'latency' THEN CAST(COALESCE(p.difference, 0) AS REAL) * e.duration_ns "
      "ELSE CAST(e.duration_ns AS REAL) END AS x "
      "FROM causal_experiment AS e JOIN causal_progress AS p ON p.experiment = e.id "
      "WHERE e.duration_ns > 0{}{}) "
      "SELECT scope, selected, name, kind, percent, COUNT(*), SUM(visits), SUM(x), SUM(n), SUM(x * x), "
      "SUM(n * n), SUM(x * n) FROM measured GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5",
      pooled ? "'' AS scope, '' AS selected" : "e.scope AS scope, e.selected AS selected",
      in_windows(windows, "e.window"), pooled ? " AND e.speedup = 0" : "");
}

cell read_cell(statement& row) {
  return {row.integer(5), row.integer(6), row.real(7), row.real(8), row.real(9), row.real(10), row.real(11)};
}

// The estimate of `measured` against `baseline`: s = 1 - R / R0, its variance by the delta method
// (the two cells' relative errors add). The baseline's own cell gives s = 0 and the baseline's
// relative error alone: the noise floor a reader compares the other points with.
causal_estimate estimate(int percent, const cell& measured, const cell& baseline, bool is_baseline) {
  causal_estimate result;
  result.line_speedup = percent / 100.0;
  result.experiments = measured.experiments;
  result.visits = measured.visits;
  const double ratio = measured.period() / baseline.period();
  result.program_speedup = is_baseline ? 0.0 : 1.0 - ratio;
  const double relative_baseline = baseline.standard_error() / baseline.period();
  if (is_baseline) {
    result.interval = t_quantile(baseline.experiments - 1) * relative_baseline;
    return result;
  }
  const double relative = measured.standard_error() / measured.period();
  const auto degrees = std::min(measured.experiments, baseline.experiments) - 1;
  result.interval = t_quantile(degrees) * ratio * std::hypot(relative, relative_baseline);
  return result;
}

// A latency point improves when its period (the mean latency) shrinks, as a throughput point does
// when its period (time per visit) shrinks: one sign convention for both (coz's viewer flips the
// latency sign; here > 0 is always better).
//
// Impact: the area under the curve from (0, 0) to the largest line speedup tried, divided by that
// width: the mean program speedup over the speedups tried. It weighs every point, so one lucky
// experiment cannot carry a location to the top as it would with the largest single speedup, and
// dividing by the width compares a location tried up to 50% fairly with one tried up to 100%.
double impact_of(const std::vector<causal_estimate>& estimates) {
  double area = 0, x = 0, y = 0;
  for (const auto& point : estimates) {
    area += (point.line_speedup - x) * (point.program_speedup + y) / 2;
    x = point.line_speedup;
    y = point.program_speedup;
  }
  return x > 0 ? area / x : 0.0;
}

using cell_key = std::tuple<std::string, std::string, std::string, std::string>;  // scope, selected, name, kind

}  // namespace

causal_summary analyze_causal(connection& profile, const window_range& windows) {
  causal_summary summary;
  summary.experiments =
      scalar(profile, "SELECT COUNT(*) FROM causal_experiment AS e WHERE 1" + in_windows(windows, "e.window"));
  if (summary.experiments == 0) return summary;
  auto share = profile.prepare(
      "SELECT MIN(CAST(value AS REAL)) FROM (SELECT value FROM process_metadata WHERE key = ?1 UNION ALL "
      "SELECT value FROM metadata WHERE key = ?1) WHERE CAST(value AS REAL) > 0");
  share.bind(1, metadata_key::causal_core_share_permille);
  if (share.step() && !share.is_null(0)) summary.core_share = share.real(0) / 1000;
  auto points = profile.prepare("SELECT DISTINCT name, kind FROM causal_progress ORDER BY name, kind");
  while (points.step()) summary.progress_points.push_back(fmt::format("{} ({})", points.text(0), points.text(1)));

  std::map<std::pair<std::string, std::string>, cell> pooled;  // by (name, kind)
  auto pooled_rows = profile.prepare(cells_sql(windows, true));
  while (pooled_rows.step())
    pooled[{std::string{pooled_rows.text(2)}, std::string{pooled_rows.text(3)}}] = read_cell(pooled_rows);

  std::map<std::pair<std::string, std::string>, std::int64_t> experiments;  // by (scope, selected)
  auto counted = profile.prepare("SELECT scope, selected, COUNT(*) FROM causal_experiment AS e WHERE 1" +
                                 in_windows(windows, "e.window") + " GROUP BY scope, selected");
  while (counted.step()) experiments[{std::string{counted.text(0)}, std::string{counted.text(1)}}] = counted.integer(2);

  // Each curve's cells by line speedup, each estimated against every location's 0% experiments
  // together: an experiment at 0% inserts no delay, so whatever it selected it measured the same
  // program, and pooling them all gives each curve the most precise baseline there is (coz's viewer
  // uses the location's own 0% cell; on the causal tests' toys pooling halved the predictions'
  // spread). A location's own 0% cell is then shown as the noise floor: 0% and the baseline's error.
  std::map<cell_key, std::map<int, cell>> curves;
  auto rows = profile.prepare(cells_sql(windows, false));
  while (rows.step())
    curves[{std::string{rows.text(0)}, std::string{rows.text(1)}, std::string{rows.text(2)}, std::string{rows.text(3)}}]
          [static_cast<int>(rows.integer(4))] = read_cell(rows);

  std::map<std::pair<std::string, std::string>, causal_location> locations;
  for (const auto& [key, cells] : curves) {
    const auto& [scope, selected, name, kind] = key;
    auto& location = locations[{scope, selected}];
    location.scope = scope;
    location.selected = selected;
    location.experiments = experiments[{scope, selected}];
    causal_curve curve{.progress_point = name, .kind = kind, .estimates = {}};
    const auto found = pooled.find({name, kind});
    if (found == pooled.end() || !found->second.usable()) continue;
    const cell& baseline = found->second;
    for (const auto& [percent, measured] : cells)
      if (measured.usable())
        curve.estimates.push_back(percent == 0 ? estimate(0, baseline, baseline, true)
                                               : estimate(percent, measured, baseline, false));
    if (std::none_of(curve.estimates.begin(), curve.estimates.end(),
                     [](const causal_estimate& point) { return point.line_speedup > 0; }))
      continue;
    curve.impact = impact_of(curve.estimates);
    location.curves.push_back(std::move(curve));
  }
  for (auto& [key, location] : locations) {
    if (location.curves.empty()) continue;
    location.impact = std::max_element(location.curves.begin(), location.curves.end(),
                                       [](const causal_curve& a, const causal_curve& b) { return a.impact < b.impact; })
                          ->impact;
    summary.locations.push_back(std::move(location));
  }
  summary.locations_without_curve =
      static_cast<std::int64_t>(experiments.size()) - static_cast<std::int64_t>(summary.locations.size());
  std::stable_sort(summary.locations.begin(), summary.locations.end(),
                   [](const causal_location& a, const causal_location& b) { return a.impact > b.impact; });
  return summary;
}

void require_causal_experiments(connection& profile) {
  if (scalar(profile, "SELECT COUNT(*) FROM causal_experiment") == 0)
    throw database_error(
        fmt::format("{} has no causal experiments: run the program under kairos-causal", profile.path()));
}

}  // namespace kairos::database
