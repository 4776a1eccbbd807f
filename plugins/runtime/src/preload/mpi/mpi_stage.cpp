// The MPI stage: the calls of an MPI library, from KAIROS_MPI.
#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/mpi/mpi_calls.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {
namespace {

stage_start start(start_context& context) {
  const auto& values = context.run.values;
  stage_start started;
  if (!context.database_wanted || !values.category_usable(setting_category::mpi)) return started;
  if (auto note = start_mpi(values.text(setting::mpi) == "auto")) started.notes.emplace_back(std::move(*note));
  return started;
}

}  // namespace

extern constexpr stage mpi_stage{
    .name = "mpi",
    .start = &start,
    .add_losses = [](losses& lost) { lost.mpi_calls += mpi_calls_dropped(); },
    .add_metadata =
        [](const run_facts&) {
          if (mpi_observed()) add_stage_metadata_number(database::metadata_key::dropped_mpi_calls, mpi_calls_dropped());
        },
    .tick = [] { tick_reporting("observing MPI failed", &mpi_tick); },
    .in_child = []() noexcept { mpi_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
