// The stage table: every runtime stage, one row each. Their order here is the order of the stop,
// of the ticks and of the locks a fork takes (stages.hpp); `start_step` is the order they start in.
#include "preload/process/stages.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "preload/sink/profile_database.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

// Each defined in its stage's folder (<folder>/<name>_stage.cpp).
extern const stage causal_stage, windows_stage, sampling_stage, gpu_stage, mpi_stage, children_stage,
    process_sampling_stage, delivery_stage, database_stage, annotations_stage, regions_stage, function_trace_stage,
    threads_stage;

namespace {

struct table_row {
  const stage* row;
  // Its place in the start (0: it has no start). The stages that decide for the rest start first
  // (regions may turn kairos off; the database takes what all produce), then windows and causal,
  // which set sampling's defaults and must be in place before its first sample.
  int start_step;
};

constexpr std::array table{
    table_row{&causal_stage, 6},
    table_row{&windows_stage, 5},
    table_row{&sampling_stage, 7},
    table_row{&gpu_stage, 8},
    table_row{&mpi_stage, 9},
    table_row{&children_stage, 12},
    table_row{&process_sampling_stage, 10},
    table_row{&delivery_stage, 0},
    table_row{&database_stage, 4},
    table_row{&annotations_stage, 11},
    table_row{&regions_stage, 1},
    table_row{&function_trace_stage, 2},
    table_row{&threads_stage, 3},
};

// Each step names one stage: the start order is the table's, not the sort's.
constexpr bool steps_unique() {
  std::array<int, table.size()> steps{};
  std::ranges::transform(table, steps.begin(), &table_row::start_step);
  std::ranges::sort(steps);
  return std::ranges::adjacent_find(steps) == steps.end();
}
static_assert(steps_unique());

constexpr int start_step_of(const stage* row) {
  for (const auto& entry : table)
    if (entry.row == row) return entry.start_step;
  return 0;
}
// The turns that matter: regions may turn kairos off before anything else started; the database is
// configured before any producer delivers; windows and causal set sampling's defaults, and must be
// in place before its first sample.
static_assert(start_step_of(&regions_stage) == 1);
static_assert(start_step_of(&database_stage) < start_step_of(&windows_stage));
static_assert(start_step_of(&windows_stage) < start_step_of(&sampling_stage) &&
              start_step_of(&causal_stage) < start_step_of(&sampling_stage));

constexpr auto in_table_order = [] {
  std::array<const stage*, table.size()> rows{};
  std::ranges::transform(table, rows.begin(), &table_row::row);
  return rows;
}();

constexpr auto in_start_order = [] {
  auto rows = table;
  std::ranges::sort(rows, {}, &table_row::start_step);
  std::array<const stage*, table.size()> ordered{};
  std::ranges::transform(rows, ordered.begin(), &table_row::row);
  return ordered;
}();

}  // namespace

std::span<const stage* const> runtime_stages() noexcept { return in_table_order; }
std::span<const stage* const> runtime_stages_by_start() noexcept { return in_start_order; }

void add_stage_metadata(std::string_view key, std::string value) {
  add_database_metadata(std::string{key}, std::move(value));
}

void tick_reporting(const char* what, void (*work)()) { report(capture_problem(what, work)); }

}  // namespace kairos::runtime
