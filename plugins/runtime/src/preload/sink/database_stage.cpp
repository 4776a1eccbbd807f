// The database stage: the profile database every producer writes into, from KAIROS_OUTPUT_*,
// KAIROS_FLUSH_INTERVAL, KAIROS_SOURCE_LINES and KAIROS_SYMBOL_CACHE.
#include <filesystem>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbol_cache.hpp>
#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/process/environment.hpp"
#include "preload/process/output_stem.hpp"
#include "preload/process/stages.hpp"
#include "preload/sink/profile_database.hpp"

namespace kairos::runtime {
namespace {

metadata_list run_metadata(const process_run& run) {
  namespace key = database::metadata_key;
  metadata_list metadata{{std::string{key::command}, run.command_line}};
  for (const auto& value : run.values.values())
    metadata.emplace_back(fmt::format("{}{}", key::setting_prefix, value.definition->variable), value.text);
  return metadata;
}

// Where symbolized addresses are kept between runs: KAIROS_SYMBOL_CACHE, else the default place.
symbol_cache_choice symbol_cache_place(const settings& values) {
  const auto& named = values.text(setting::symbol_cache);
  if (named == "off") return {};
  if (named.empty()) return {symbol_cache::default_directory(), false};
  return {std::filesystem::path{named}, true};
}

stage_start start(start_context& context) {
  if (!context.database_wanted) return {};
  const auto& run = context.run;
  const auto& values = run.values;
  const auto& lines = values.text(setting::source_lines);
  bool perfetto = false;
  for (const auto& format : run.formats) perfetto = perfetto || format == "perfetto";
  configure_profile_database(&database_path_of_this_process, run.command_line, run_metadata(run),
                             static_cast<std::int64_t>(values.number(setting::flush_interval) * 1e9),
                             lines == "all"   ? source_lines::all
                             : lines == "off" ? source_lines::off
                                              : source_lines::own,
                             symbol_cache_place(values), perfetto);
  if (run.launch.in_launch())
    set_database_launch(run.launch.rank, run.launch.size, environment_value(setting::launch_id));
  if (!run.identity.chain_stem.empty()) continue_profile_database_after_exec(false);
  return {};
}

}  // namespace

extern constexpr stage database_stage{
    .name = "database",
    .start = &start,
    .lock_for_fork = [] { database_lock_for_fork(); },
    .unlock_in_parent = [] { database_unlock_after_fork_in_parent(); },
    .in_child = []() noexcept { database_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
