// What every output shares: a database seen as one rank's, the number of time windows. Each
// format's writer is a file of its own (text.cpp, trace.cpp, html.cpp, ...; formats.cpp lists them).
#include <kairos/plugins/database/outputs.hpp>

#include <fmt/format.h>

#include "output_helpers.hpp"

namespace kairos::database {

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
      {"process", "id IN " + processes},
      {"process_metadata", "process IN " + processes},
      {"thread", "process IN " + processes},
      {"sample", "thread IN " + threads},
      {"stack_total", "thread IN " + threads},
      {"sample_timeline", "thread IN " + threads},
      {"realtime_sample", "thread IN " + threads},
      {"region_block", "thread IN " + threads},
      {"mpi_call", "thread IN " + threads},
      {"counter", "process IN " + processes},
      {"call_tree", "thread IN " + threads},
      {"window", "process IN " + processes},
      {"gpu_device", "process IN " + processes},
      {"gpu_kernel", "process IN " + processes},
      {"gpu_memcpy", "process IN " + processes},
      {"gpu_api_call", "process IN " + processes},
      {"causal_experiment", "process IN " + processes},
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

std::int64_t window_count(connection& profile) { return scalar(profile, "SELECT COUNT(DISTINCT ordinal) FROM window"); }

}  // namespace kairos::database
