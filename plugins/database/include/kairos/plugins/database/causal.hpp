#pragma once
// Causal profiling's results (docs/causal.md, "Reading the results"): from a profile's
// causal_experiment and causal_progress rows, for each selected location and progress point, the
// curve "line speedup -> program speedup" with a 95% interval per point, the locations ranked by
// impact; and the same data as coz's profile.coz and as an SVG of one chart per location.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

// A cell (location, progress point, line speedup) with fewer visits is left out: too few events to
// tell a rate from noise (coz's viewer has the same floor).
inline constexpr std::int64_t causal_minimum_visits = 5;
// Below this share of their ready time on a core, the text report says the threads lacked cores.
inline constexpr double causal_full_core_share = 0.95;

struct causal_estimate {
  double line_speedup = 0;     // 0..1: the virtual speedup of the location
  double program_speedup = 0;  // > 0: the progress point is reached more often (throughput) or sooner (latency)
  double interval = 0;         // half-width of the 95% interval; NaN when one experiment cannot tell
  std::int64_t experiments = 0;
  std::int64_t visits = 0;
};

struct causal_curve {
  std::string progress_point;
  std::string kind;                        // "throughput" or "latency"
  std::vector<causal_estimate> estimates;  // by line speedup
  double impact = 0;                       // the mean program speedup over the line speedups tried (area / width)
};

struct causal_location {
  std::string scope;     // "line" or "function"
  std::string selected;  // "file:line" or the function
  std::int64_t experiments = 0;
  double impact = 0;                 // its curves' largest
  std::vector<causal_curve> curves;  // one per progress point with an estimate beside its baseline
};

struct causal_summary {
  std::int64_t experiments = 0;
  std::vector<std::string> progress_points;  // "name (kind)", sorted
  std::vector<causal_location> locations;    // highest impact first
  std::int64_t locations_without_curve = 0;  // selected, but never with enough visits beside a baseline
  // The share of their ready-to-run time the program's threads had a core during experiments (the
  // lowest of a merged database's processes); 1 when not measured.
  double core_share = 1;
};

// Every location's curves from the experiments in `windows`; empty when the profile has none.
causal_summary analyze_causal(connection& profile, const window_range& windows = {});

// Throws database_error naming the profile when it has no causal experiment.
void require_causal_experiments(connection& profile);

// The text report's causal section alone (kairos-causal prints it): the `locations` highest-ranked.
void write_causal_text(connection& profile, std::ostream& out, std::size_t locations = 10,
                       const window_range& windows = {});

// coz's tab-separated profile.coz (the format coz 0.2.2's viewer reads): a startup record, each
// experiment followed by its progress points, then the run's length and the samples per location.
// With `windows`, only their experiments.
void write_coz_profile(connection& profile, std::ostream& out, const window_range& windows = {});

// One self-contained SVG (no script): a chart per location, the `locations` highest-ranked, each
// with its curves' points, interval bars and lines, from the experiments in `windows`.
void write_causal_svg(connection& profile, std::ostream& out, std::size_t locations = 10,
                      const window_range& windows = {});

}  // namespace kairos::database
