// profile.coz (causal.hpp): coz's tab-separated records, as coz 0.2.2 writes them and its viewer
// reads them: "startup", each "experiment" followed by its "throughput-point" and "latency-point"
// records, then "runtime" and the "samples" per location.
#include <kairos/plugins/database/causal.hpp>

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

// A value inside a record: a tab or line break would end its field or record early.
std::string field(std::string_view text) {
  std::string value{text};
  std::replace_if(
      value.begin(), value.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return value;
}

}  // namespace

void write_coz_profile(connection& profile, std::ostream& out, const window_range& windows) {
  using output_helpers::scalar;
  require_causal_experiments(profile);
  // coz counts both from the profiler's start; the process's start is the nearest kairos keeps.
  const auto startup_ns = scalar(profile,
                                 "SELECT COALESCE((SELECT MIN(start_ns) FROM process), "
                                 "(SELECT MIN(start_ns) FROM causal_experiment))");
  const auto end_ns = scalar(profile,
                             "SELECT COALESCE((SELECT MAX(end_ns) FROM process), "
                             "(SELECT MAX(start_ns + duration_ns + delay_ns) FROM causal_experiment))");
  out << fmt::format("startup\ttime={}\n", startup_ns);
  // One pass: each experiment's rows together, throughput points before latency points as coz logs them.
  auto rows = profile.prepare(
      "SELECT e.id, e.selected, e.speedup, e.duration_ns, e.selected_samples, p.name, p.kind, p.delta, "
      "p.arrivals, p.departures, p.difference FROM causal_experiment AS e "
      "LEFT JOIN causal_progress AS p ON p.experiment = e.id WHERE 1" +
      output_helpers::in_windows(windows, "e.window") + " ORDER BY e.start_ns, e.id, p.kind DESC, p.name");
  std::int64_t experiment = -1;
  while (rows.step()) {
    if (rows.integer(0) != experiment) {
      experiment = rows.integer(0);
      out << fmt::format("experiment\tselected={}\tspeedup={:g}\tduration={}\tselected-samples={}\n",
                         field(rows.text(1)), rows.real(2), rows.integer(3), rows.integer(4));
    }
    if (rows.is_null(5)) continue;
    if (rows.text(6) == "latency")
      out << fmt::format("latency-point\tname={}\tarrivals={}\tdepartures={}\tdifference={}\n", field(rows.text(5)),
                         rows.integer(8), rows.integer(9), rows.integer(10));
    else
      out << fmt::format("throughput-point\tname={}\tdelta={}\n", field(rows.text(5)), rows.integer(7));
  }
  out << fmt::format("runtime\ttime={}\n", end_ns - startup_ns);
  auto samples = profile.prepare(
      "SELECT location, SUM(count) FROM causal_sample GROUP BY scope, location "
      "ORDER BY scope, location");
  while (samples.step())
    out << fmt::format("samples\tlocation={}\tcount={}\n", field(samples.text(0)), samples.integer(1));
}

}  // namespace kairos::database
