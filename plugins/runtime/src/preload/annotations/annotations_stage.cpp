// The annotations stage: OpenMP, NVTX, Kokkos and ROCTx, from KAIROS_ANNOTATIONS and
// KAIROS_OPENMP. Their regions go through the traced calls (the function_trace stage).
#include <algorithm>
#include <string>
#include <string_view>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/annotations/openmp.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/annotations/roctx.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {
namespace {

bool usable = false;  // the annotations' settings were accepted (set at start, before any thread)

// Annotations make regions (the user API's functions): they start with them.
stage_start start(start_context& context) {
  const auto& values = context.run.values;
  usable = values.category_usable(setting_category::annotations);
  if (!usable) return {};
  const auto sources = values.list(setting::annotations);
  const auto named = [&](std::string_view source) { return std::ranges::find(sources, source) != sources.end(); };
  start_annotations({named("nvtx"), named("kokkos"), named("roctx")});
  return {};
}

// Once the user API records: OpenMP's and ROCTx's libraries are wrapped.
stage_start activate(start_context& context) {
  stage_start started;
  if (!usable) return started;
  if (auto note = start_openmp(context.run.values.text(setting::openmp) == "auto"))
    started.notes.emplace_back(std::move(*note));
  if (auto note = wrap_roctx_if_loaded()) started.notes.emplace_back(std::move(*note));
  return started;
}

void add_metadata(const run_facts&) {
  namespace key = database::metadata_key;
  if (openmp_observed()) {
    add_stage_metadata(key::openmp_runtime, openmp_runtime());
    add_stage_metadata_number(key::openmp_parallel_regions, openmp_parallel_regions());
  }
  std::string attached;
  if (nvtx_attached()) attached = "nvtx";
  if (kokkos_attached()) attached += attached.empty() ? "kokkos" : ",kokkos";
  if (roctx_attached()) attached += attached.empty() ? "roctx" : ",roctx";
  if (!attached.empty()) add_stage_metadata(key::annotations_attached, attached);
  if (const auto dropped = annotation_ranges_dropped(); dropped > 0)
    add_stage_metadata_number(key::dropped_annotation_ranges, dropped);
}

}  // namespace

// After delivery and the database in the lock order: the flush takes the annotations' locks
// (their ranges, names and sums) while it holds its own.
extern constexpr stage annotations_stage{
    .name = "annotations",
    .start = &start,
    .activate = &activate,
    .stop =
        [] {
          stop_openmp();
          stop_annotations();
        },
    .add_metadata = &add_metadata,
    .tick =
        [] {
          tick_reporting("observing OpenMP failed", &openmp_tick);
          tick_reporting("observing ROCTx failed", &roctx_tick);
        },
    .lock_for_fork =
        [] {
          annotated_regions_lock_for_fork();
          openmp_lock_for_fork();
          annotation_ranges_lock_for_fork();
        },
    .unlock_in_parent =
        [] {
          annotation_ranges_unlock_after_fork();
          openmp_unlock_after_fork();
          annotated_regions_unlock_after_fork();
        },
    .in_child =
        []() noexcept {
          annotation_ranges_unlock_after_fork();
          openmp_unlock_after_fork();
          annotated_regions_unlock_after_fork();
          annotation_ranges_forget_after_fork_in_child();
          openmp_forget_after_fork_in_child();
          annotated_regions_forget_after_fork_in_child();
        },
};

}  // namespace kairos::runtime
