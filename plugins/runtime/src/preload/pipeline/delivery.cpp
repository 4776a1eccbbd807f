#include "preload/pipeline/delivery.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/gpu/gpu_activity.hpp"
#include "preload/mpi/mpi_calls.hpp"
#include "preload/process_sampling/process_sampling.hpp"
#include "preload/regions/function_trace.hpp"
#include "preload/regions/regions.hpp"
#include "preload/sampling/python_frames.hpp"
#include "preload/sink/profile_database.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/own_frames.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"
#include "preload/windows/windows.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t counter_interval_ns = 100'000'000;

struct delivery_state {
  std::mutex mutex;                        // the service thread and finalize may flush at once
  std::size_t thread_cursor = 0;           // threads of the registry seen so far
  std::vector<thread_record*> unfinished;  // threads whose end is not in the database yet
  std::unordered_map<const thread_record*, std::int64_t> last_counter_ns;
  std::unordered_map<pid_t, thread_record*> program_threads;  // by tid: who asked for GPU work
  gpu::activity_batch gpu_activity;                           // kept across flushes: the collector reuses its storage
  mpi_call_batch mpi_calls;                                   // likewise
  process_sample_batch process_samples;                       // likewise
  annotation_range_batch annotation_ranges;                   // likewise
  own_work_totals own_work;                                   // samples folded to [kairos]
  std::vector<database::profile_writer::region_input> drained_regions;  // reused by each flush
  bool forget_parent = false;  // set in a fork child; done by the child's first flush
};
delivery_state* state = new delivery_state;     // never destroyed: used until the process ends
constexpr std::size_t drained_per_call = 4096;  // regions a call to the sink

sample_clock clock_of(sample_source source) {
  return source == sample_source::cpu_time ? sample_clock::cpu_time : sample_clock::real_time;
}

// Under the mutex.
void forget_parent_if_forked() {
  if (!state->forget_parent) return;
  state->forget_parent = false;
  state->thread_cursor = 0;
  state->unfinished.clear();
  state->last_counter_ns.clear();
  state->program_threads.clear();
  state->own_work = {};
}

database_window database_row(const window_record& window) {
  database_window row{
      window.ordinal, window.spec, clock_name(window.clock), window.planned_start, window.planned_end, {}, {}, {}, {}};
  if (window.opened) {
    row.actual_start = window.actual_start;
    row.start_ns = window.start_ns;
  }
  if (window.closed) {
    row.actual_end = window.actual_end;
    row.end_ns = window.end_ns;
  }
  return row;
}

thread_record* thread_of(std::int64_t tid) {
  const auto found = state->program_threads.find(static_cast<pid_t>(tid));
  return found == state->program_threads.end() ? nullptr : found->second;
}

// The window the program was in when it asked for the work; nullopt when windows govern and none
// was open then (nothing is collected outside the windows).
std::optional<std::int32_t> window_at(std::int64_t call_ns) {
  if (!windows_govern()) return 0;
  std::optional<std::int32_t> found;
  for_each_window_between(call_ns, call_ns, [&](const window_span& span) { found = span.ordinal; });
  return found;
}

void add_gpu_rows(database_batch& rows, const gpu::activity_batch& activity) {
  for (const auto& device : activity.devices)
    rows.add_gpu_device({std::string{gpu::name_of(device.api)}, device.index, device.name, device.architecture,
                         static_cast<std::int64_t>(device.memory_bytes), device.multiprocessors, device.clock_khz,
                         device.memory_clock_khz});
  auto origin = [](const gpu::call_site& site, std::uint64_t correlation, std::int32_t window) {
    return gpu_origin{thread_of(site.tid), site.stack, site.call_ns, static_cast<std::int64_t>(correlation), window};
  };
  for (const auto& kernel : activity.kernels) {
    const auto window = window_at(kernel.site.call_ns);
    if (!window) continue;
    database::gpu_kernel_info row{kernel.name,
                                  kernel.function_address,
                                  static_cast<std::int64_t>(kernel.stream),
                                  kernel.start_ns,
                                  kernel.end_ns,
                                  {},
                                  {},
                                  kernel.shared_bytes};
    for (std::size_t axis = 0; axis < 3; ++axis) {
      row.grid[axis] = kernel.grid[axis];
      row.block[axis] = kernel.block[axis];
    }
    rows.add_gpu_kernel(gpu::name_of(kernel.api), kernel.device, row, origin(kernel.site, kernel.correlation, *window));
  }
  for (const auto& copy : activity.copies) {
    const auto window = window_at(copy.site.call_ns);
    if (!window) continue;
    rows.add_gpu_copy(gpu::name_of(copy.api), copy.device,
                      {gpu::name_of(copy.kind), static_cast<std::int64_t>(copy.stream),
                       static_cast<std::int64_t>(copy.bytes), copy.start_ns, copy.end_ns, copy.asynchronous},
                      origin(copy.site, copy.correlation, *window));
  }
  for (const auto& call : activity.calls) {
    const auto window = window_at(call.start_ns);
    if (!window) continue;
    rows.add_gpu_api_call(
        gpu::name_of(call.api), call.name, call.start_ns, call.end_ns,
        gpu_origin{thread_of(call.tid), {}, call.start_ns, static_cast<std::int64_t>(call.correlation), *window});
  }
}

void add_mpi_rows(database_batch& rows, const mpi_call_batch& batch) {
  if (batch.world) rows.set_process_rank(batch.world->rank, batch.world->size);
  for (const auto& [thread, call] : batch.calls)
    rows.add_mpi_call(*thread, name_of(call.function), call.start_ns, call.end_ns,
                      call.bytes >= 0 ? std::optional<std::int64_t>{call.bytes} : std::nullopt,
                      call.peer >= 0 ? std::optional<std::int64_t>{call.peer} : std::nullopt, call.window);
}

// Process sampling's rows wait for the database (they do not create it: a program that records
// nothing else costs no file); outside the windows nothing is kept.
void add_process_rows(database_batch& rows, const process_sample_batch& batch) {
  for (const auto& row : batch) {
    const auto window = window_at(row.time_ns);
    if (!window) continue;
    rows.add_process_metric(row.time_ns, definition_of(row.metric).name, row.thread,
                            row.instance >= 0 ? std::optional<std::int64_t>{row.instance} : std::nullopt, row.value,
                            *window);
  }
}

}  // namespace

bool named_frame(std::uint64_t address, database::frame_info& frame) {
  if (address == own_work_frame_address) {
    frame.address = address;
    frame.module = own_module_path();
    frame.function = "[kairos]";
    return true;
  }
  if (address == cut_stack_address) {
    frame.address = address;
    frame.function = "[stack cut]";
    return true;
  }
  python_frame_name name;
  if (!python_frame_named(address, name)) return false;
  frame.address = address;
  frame.module = name.file;  // a Python function's module is its source file
  frame.function = std::move(name.function);
  frame.file = std::move(name.file);
  frame.line = name.line;
  frame.language = "python";
  return true;
}

void deliver_samples(const sample_batch& batch) {
  std::lock_guard lock{state->mutex};
  own_cost_timer cost{own_cost::sample_delivery};
  forget_parent_if_forked();
  database_batch rows;
  std::uint64_t folded[sample_stack_depth];
  for (const auto& sample : batch) {
    std::copy_n(sample.addresses, sample.frame_count, folded);
    const auto stack = fold_own_frames(folded, sample.frame_count);
    if (stack.own_work) {
      ++state->own_work.samples;
      (sample.source == sample_source::cpu_time ? state->own_work.cpu_ns : state->own_work.real_ns) += sample.weight_ns;
    }
    rows.add_sample(*sample.thread, clock_of(sample.source), sample.time_ns, sample.weight_ns, {folded, stack.count},
                    sample.window);
    // The thread's CPU time as a counter track, at most every 100 ms per thread.
    if (sample.source != sample_source::cpu_time) continue;
    auto& last = state->last_counter_ns[sample.thread];
    if (last != 0 && sample.time_ns - last < counter_interval_ns) continue;
    last = sample.time_ns;
    rows.add_counter(*sample.thread, sample.time_ns, "thread_cpu_time_ns", static_cast<double>(sample.thread_cpu_ns),
                     sample.window);
  }
  rows.commit(false);
}

void deliver_causal_experiment(const causal_experiment_record& experiment) {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  std::vector<database::causal_progress_info> progress;
  progress.reserve(experiment.progress.size());
  for (const auto& point : experiment.progress) {
    if (point.latency)
      progress.push_back({point.name, "latency", point.visits, point.visits, point.departures, point.in_flight});
    else
      progress.push_back({point.name, "throughput", point.visits, 0, 0, 0});
  }
  database_batch rows;
  rows.add_causal_experiment(
      {experiment.scope, experiment.selected, experiment.speedup, experiment.start_ns, experiment.duration_ns,
       experiment.delay_ns, experiment.selected_samples, experiment.window},
      progress);
  rows.commit(false);
}

void deliver_causal_samples(const std::vector<causal_location_samples>& locations) {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  database_batch rows;
  for (const auto& location : locations) rows.add_causal_samples(location.scope, location.location, location.samples);
  rows.commit(false);
}

void flush_to_database(bool force) {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  threads().for_each_new(state->thread_cursor, [](thread_record& thread) {
    if (thread.kairos_owned) return;
    state->unfinished.push_back(&thread);
    state->program_threads[thread.tid] = &thread;
  });
  database_batch rows;
  // A thread's log goes to the sink a few thousand rows a call, not one: one lookup of the thread's
  // row, one guard against failure.
  const auto add_log = [&](thread_record& thread, region_log& log) {
    auto& drained = state->drained_regions;
    drained.clear();
    log.drain([&](const region_row& row) {
      // Field by field: a whole region_input built first went through the stack in pieces and was
      // read back in other pieces (a store-forwarding stall, 40% of this loop).
      auto& input = drained.emplace_back();
      input.name = row.function == 0 ? std::string_view{*row.name} : std::string_view{};
      input.function_address = row.function;
      input.start_ns = row.start_ns;
      input.end_ns = row.end_ns;
      input.depth = row.depth;
      input.window = row.window;
      input.clipped = row.clipped;
      if (drained.size() == drained_per_call) {
        rows.add_regions(thread, drained);
        drained.clear();
      }
    });
    rows.add_regions(thread, drained);
  };
  process_function_events(false);
  for_each_function_log(add_log);
  for (const auto& window : take_window_changes()) rows.add_window(database_row(window));
  take_gpu_activity(state->gpu_activity);
  add_gpu_rows(rows, state->gpu_activity);
  take_mpi_calls(state->mpi_calls);
  add_mpi_rows(rows, state->mpi_calls);
  take_annotation_ranges(state->annotation_ranges);
  for (const auto& range : state->annotation_ranges.rows)
    rows.add_annotation_range(*range.start_thread, range.end_thread, name_of(range.kind), range.name, range.start_ns,
                              range.end_ns, range.window);
  // Threads get their rows once the database exists (it is created by the first sample or
  // region); until then they wait here, so a thread that ended early is still listed.
  if (rows.has_file()) {
    take_process_samples(state->process_samples);
    add_process_rows(rows, state->process_samples);
    std::erase_if(state->unfinished, [&](thread_record* thread) {
      rows.add_thread(*thread);
      if (thread->running.load(std::memory_order_acquire)) return false;
      rows.end_thread(*thread);
      return true;
    });
  }
  rows.commit(force);
}

void deliver_call_trees() {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  database_batch rows;
  std::vector<database::profile_writer::call_tree_input> nodes;
  for_each_call_tree([&](thread_record& thread, std::span<const call_tree_row> tree) {
    nodes.clear();
    for (const auto& row : tree)
      nodes.push_back({row.node, row.parent, row.name, row.function_address, row.stats.window, row.stats.calls,
                       row.stats.total_ns, row.stats.min_ns, row.stats.max_ns, row.stats.sum_squares_ms});
    rows.add_call_tree(thread, nodes);
  });
  rows.commit(false);
}

void deliver_annotation_summaries() {
  std::lock_guard lock{state->mutex};
  forget_parent_if_forked();
  database_batch rows;
  if (!rows.has_file()) return;  // nothing was recorded: the names and sums alone make no file
  for_each_annotated_name([&](std::string_view name, region_kind kind) { rows.add_region_kind(name, name_of(kind)); });
  for (const auto& time : openmp_thread_times())
    rows.add_openmp_thread_time(time.region, time.thread, static_cast<std::int64_t>(time.instances), time.work_ns,
                                time.wait_ns);
  rows.commit(false);
}

own_work_totals own_work_in_samples() {
  std::lock_guard lock{state->mutex};
  return state->own_work;
}

void delivery_lock_for_fork() { state->mutex.lock(); }
void delivery_unlock_after_fork_in_parent() { state->mutex.unlock(); }
void delivery_forget_after_fork_in_child() noexcept {
  state->forget_parent = true;
  state->mutex.unlock();  // taken by this thread in delivery_lock_for_fork
}

}  // namespace kairos::runtime
