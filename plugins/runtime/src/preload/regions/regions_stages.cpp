// The regions stage (the user API's stored regions, KAIROS_COMPONENTS) and the function_trace
// stage (instrumented calls and traced regions, KAIROS_INSTRUMENT_*).
#include <dlfcn.h>

#include <chrono>
#include <cstdint>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "preload/process/stages.hpp"
#include "preload/process/termination.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/regions.hpp"

namespace kairos::runtime {
namespace {

// At the end, how long the outputs wait for threads still inside a user-API call.
constexpr std::chrono::milliseconds user_api_wait{200};

// First of the stages: a refused KAIROS_COMPONENTS value turns kairos off.
stage_start start_regions(start_context& context) {
  stage_start started;
  if (auto failure = configure_regions(context.run.values.list(setting::components), context.database_wanted)) {
    started.problems.push_back(std::move(failure));
    started.disables = true;
  }
  return started;
}

// The user library (libkairos_user), if the program links it, is attached to the runtime.
void connect_user_api() {
  auto attach = reinterpret_cast<void (*)(const kairos_entry_points*)>(dlsym(RTLD_DEFAULT, "kairos_user_attach"));
  if (attach) attach(&user_entry_points());
}

// Traced calls: instrumented functions (off when a KAIROS_INSTRUMENT_* value was refused: said by
// the settings) and the default user-API regions.
stage_start start_function_trace(start_context& context) {
  const auto& values = context.run.values;
  function_trace_options options;
  if (values.category_usable(setting_category::instrument))
    options = {values.boolean(setting::instrument),
               values.text(setting::instrument_include),
               values.text(setting::instrument_exclude),
               values.text(setting::instrument_file_include),
               values.text(setting::instrument_file_exclude),
               values.boolean(setting::instrument_system),
               static_cast<std::int64_t>(values.number(setting::instrument_min_duration) * 1e9)};
  else
    options.hooks = false;
  if (context.database_wanted) options.request_drain = &request_early_tick;
  stage_start started;
  if (auto failure = configure_function_trace(options)) started.problems.push_back(std::move(failure));
  return started;
}

void function_trace_metadata(const run_facts&) {
  namespace key = database::metadata_key;
  add_stage_metadata_number(key::dropped_region_rows, traced_rows_dropped());
  add_stage_metadata_number(key::traced_events, traced_events());
}

}  // namespace

extern constexpr stage regions_stage{
    .name = "regions",
    .start = &start_regions,
    .activate =
        [](start_context&) {
          set_regions_accepting(true);
          connect_user_api();
          return stage_start{};
        },
    .deactivate = []() noexcept { set_regions_accepting(false); },
    .recorded = [] { return regions_recorded() > 0; },
    .quiesce = [] { wait_for_user_api_calls(user_api_wait); },
    .lock_for_fork = [] { regions_lock_for_fork(); },
    .unlock_in_parent = [] { regions_unlock_after_fork(); },
    .in_child =
        []() noexcept {
          regions_unlock_after_fork();
          regions_forget_after_fork_in_child();
        },
    .off_in_child = []() noexcept { set_regions_accepting(false); },
};

// Last of the producers to stop: the calls still open are closed once nothing runs.
extern constexpr stage function_trace_stage{
    .name = "function_trace",
    .start = &start_function_trace,
    .activate =
        [](start_context&) {
          set_function_trace_accepting(true);
          return stage_start{};
        },
    .deactivate = []() noexcept { set_function_trace_accepting(false); },
    .recorded = [] { return traced_anything(); },
    .stop = [] { process_function_events(true); },
    .add_losses = [](losses& lost) { lost.region_rows += traced_rows_dropped(); },
    .add_metadata = &function_trace_metadata,
    .lock_for_fork = [] { function_trace_lock_for_fork(); },
    .unlock_in_parent = [] { function_trace_unlock_after_fork(); },
    .in_child =
        []() noexcept {
          function_trace_unlock_after_fork();
          function_trace_forget_after_fork_in_child();
        },
    .off_in_child = []() noexcept { function_trace_off_in_child(); },
    .window_edge = []() noexcept { function_trace_windows_changed(); },
};

}  // namespace kairos::runtime
