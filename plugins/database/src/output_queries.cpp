// The queries several outputs share (output_helpers.hpp).
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/ranges.h>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/plugins/database/region_block.hpp>

#include "output_helpers.hpp"

namespace kairos::database::output_helpers {

std::vector<thread_row> sampled_threads(connection& profile, const window_range& windows) {
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> sums;  // thread -> samples, weight
  for (const auto& sum : sample_sums(profile, windows)) {
    sums[sum.thread].first += sum.samples;
    sums[sum.thread].second += sum.weight_ns;
  }
  std::vector<thread_row> rows;
  auto query = profile.prepare(
      "SELECT id, sequent_id, tid, pid, COALESCE(name, ''), process, rank FROM threads "
      "ORDER BY rank, process, sequent_id");
  while (query.step()) {
    const auto found = sums.find(query.integer(0));
    const auto [samples, weight_ns] = found == sums.end() ? std::pair<std::int64_t, std::int64_t>{} : found->second;
    rows.push_back({query.integer(0), query.integer(1), query.integer(2), query.integer(3), std::string{query.text(4)},
                    samples, weight_ns, query.integer(5),
                    query.is_null(6) ? std::nullopt : std::optional{query.integer(6)}});
  }
  return rows;
}

std::map<std::int64_t, std::string> thread_labels(connection& profile) {
  std::map<std::int64_t, std::string> labels;
  auto query = profile.prepare("SELECT id, sequent_id, tid, COALESCE(name, ''), rank FROM threads");
  while (query.step())
    labels.emplace(query.integer(0), thread_label(query.is_null(4) ? std::nullopt : std::optional{query.integer(4)},
                                                  query.integer(1), query.integer(2), query.text(3)));
  return labels;
}

std::int64_t earliest_event_ns(connection& profile) {
  return scalar(profile,
                "SELECT MIN(t) FROM (SELECT MIN(first_ns) AS t FROM stack_total "
                "UNION ALL SELECT MIN(start_ns) FROM region_block "
                "UNION ALL SELECT MIN(start_ns) FROM gpu_kernel "
                "UNION ALL SELECT MIN(start_ns) FROM gpu_memcpy "
                "UNION ALL SELECT MIN(start_ns) FROM gpu_api_call "
                "UNION ALL SELECT MIN(start_ns) FROM mpi_call "
                "UNION ALL SELECT MIN(time_ns) FROM process_metric "
                "UNION ALL SELECT MIN(start_ns) FROM annotation_range "
                "UNION ALL SELECT MIN(start_ns) FROM window)");
}

std::vector<sample_sum> sample_sums(connection& profile, const window_range& windows) {
  std::vector<sample_sum> rows;
  auto query = profile.prepare(
      "SELECT thread, window, SUM(samples), SUM(weight_ns), MIN(first_ns), MAX(last_ns) FROM stack_total WHERE 1" +
      in_windows(windows, "window") + " GROUP BY thread, window");
  while (query.step())
    rows.push_back(
        {query.integer(0), query.integer(1), query.integer(2), query.integer(3), query.integer(4), query.integer(5)});
  return rows;
}

sample_totals totals_of(const std::vector<sample_sum>& sums) {
  sample_totals totals;
  for (const auto& sum : sums) {
    totals.samples += sum.samples;
    totals.weight_ns += sum.weight_ns;
    totals.first_ns = std::min(totals.first_ns.value_or(sum.first_ns), sum.first_ns);
    totals.last_ns = std::max(totals.last_ns.value_or(sum.last_ns), sum.last_ns);
  }
  return totals;
}

void for_each_metric_value(connection& profile, const window_range& windows,
                           const std::function<void(const metric_series&, std::int64_t, double)>& visit) {
  auto query = profile.prepare(
      "SELECT m.process, process.pid, process.rank, string.value, m.thread, thread.sequent_id, m.instance, "
      "m.time_ns, m.value FROM process_metric AS m JOIN string ON string.id = m.metric "
      "JOIN process ON process.id = m.process LEFT JOIN thread ON thread.id = m.thread WHERE 1" +
      in_windows(windows, "m.window") + " ORDER BY m.id");
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>, metric_series> series;
  std::map<std::string, std::int64_t, std::less<>> metric_ids;  // each metric's name, by its string
  while (query.step()) {
    const auto metric = query.text(3);
    const auto metric_id = metric_ids.try_emplace(std::string{metric}, static_cast<std::int64_t>(metric_ids.size()));
    const auto thread = query.is_null(4) ? -1 : query.integer(4);
    const auto instance = query.is_null(6) ? -1 : query.integer(6);
    auto [found, added] = series.try_emplace({query.integer(0), metric_id.first->second, thread, instance});
    if (added) {
      auto& entry = found->second;
      entry.ordinal = static_cast<std::int64_t>(series.size()) - 1;
      entry.pid = query.integer(1);
      entry.metric = std::string{metric};
      const auto rank = query.is_null(2) ? std::nullopt : std::optional<std::int64_t>{query.integer(2)};
      if (thread >= 0)
        entry.name =
            fmt::format("{} ({})", metric,
                        query.is_null(5) ? fmt::format("thread row {}", thread) : thread_name(rank, query.integer(5)));
      else if (instance >= 0)
        entry.name = fmt::format("{} ({} {})", metric, metric.starts_with("gpu_") ? "GPU" : "core", instance);
      else
        entry.name = rank ? fmt::format("{} (rank {})", metric, *rank) : std::string{metric};
    }
    visit(found->second, query.integer(7), query.real(8));
  }
}

std::vector<stack_sum> stack_sums(connection& profile, const window_range& windows) {
  std::vector<stack_sum> rows;
  auto query = profile.prepare("SELECT thread, window, stack, samples, weight_ns FROM stack_total WHERE 1" +
                               in_windows(windows, "window") + " ORDER BY thread, window, stack");
  while (query.step())
    rows.push_back({query.integer(0), query.integer(1), query.integer(2), query.integer(3), query.integer(4)});
  return rows;
}

void rank(std::vector<function_row>& rows, std::size_t limit) {
  std::sort(rows.begin(), rows.end(), [](const function_row& a, const function_row& b) {
    return std::tie(b.self_ns, b.total_ns, a.name) < std::tie(a.self_ns, a.total_ns, b.name);
  });
  if (rows.size() > limit) rows.resize(limit);
}

namespace {
// The string table's values for `ids`; an id the table lacks is left out.
std::map<std::int64_t, std::string> string_values(connection& profile, const std::set<std::int64_t>& ids) {
  std::map<std::int64_t, std::string> values;
  auto value = profile.prepare("SELECT value FROM string WHERE id = ?");
  for (const auto id : ids) {
    value.reset();
    value.bind(1, id);
    if (value.step()) values.emplace(id, std::string{value.text(0)});
  }
  return values;
}
}  // namespace

// What the top_functions_by_thread view computes: self weight to a stack's leaf function, total
// weight once to each distinct function on it. In C++ over the samples' sums and the stack trie:
// through the view, its materialized CTEs and temporary b-trees made a 0.6 s run's text and trace
// 3.5-6 ms, 2.6-2.9 ms this way, and sorted every sample. Held in memory: the trie (24 bytes a
// node) and a sum per stack and group, then per function and group.
std::map<std::int64_t, std::map<std::string, function_row>> weigh_functions_by(
    connection& profile, const window_range& windows,
    const std::function<std::optional<std::int64_t>(const stack_sum&)>& group_of) {
  struct node {
    std::int64_t id, parent, function;
  };
  std::vector<node> trie;  // sorted by id
  auto nodes = profile.prepare(
      "SELECT stack.id, COALESCE(stack.parent, 0), frame.function FROM stack JOIN frame ON frame.id = stack.frame "
      "ORDER BY stack.id");
  while (nodes.step()) trie.push_back({nodes.integer(0), nodes.integer(1), nodes.integer(2)});
  auto find = [&trie](std::int64_t id) -> const node* {
    const auto at =
        std::lower_bound(trie.begin(), trie.end(), id, [](const node& n, std::int64_t v) { return n.id < v; });
    return at != trie.end() && at->id == id ? &*at : nullptr;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> stack_weights;  // (group, stack) -> weight
  for (const auto& sum : stack_sums(profile, windows)) {
    if (sum.stack == 0) continue;
    if (const auto group = group_of(sum)) stack_weights[{*group, sum.stack}] += sum.weight_ns;
  }
  struct sums {
    std::int64_t self = 0, total = 0;
  };
  std::map<std::int64_t, std::map<std::int64_t, sums>> by_group;  // group -> function id -> sums
  std::vector<std::int64_t> on_stack;
  for (const auto& [group_and_stack, weight] : stack_weights) {
    const auto* leaf = find(group_and_stack.second);
    if (leaf == nullptr) continue;  // as the view's joins: a stack row the trie lacks weighs nothing
    auto& functions = by_group[group_and_stack.first];
    functions[leaf->function].self += weight;
    on_stack.clear();
    for (const node* at = leaf; at != nullptr; at = at->parent != 0 ? find(at->parent) : nullptr)
      if (std::find(on_stack.begin(), on_stack.end(), at->function) == on_stack.end()) on_stack.push_back(at->function);
    for (const auto function : on_stack) functions[function].total += weight;
  }
  std::set<std::int64_t> function_ids;
  for (const auto& [group, functions] : by_group)
    for (const auto& [function, sum] : functions) function_ids.insert(function);
  const auto names = string_values(profile, function_ids);
  std::map<std::int64_t, std::map<std::string, function_row>> result;
  for (const auto& [group, functions] : by_group) {
    auto& rows = result[group];
    for (const auto& [function, sum] : functions) {
      const auto named = names.find(function);
      if (named == names.end()) continue;  // the view's JOIN with the string table leaves it out
      auto& row = rows.try_emplace(named->second, function_row{named->second, 0, 0}).first->second;
      row.self_ns += sum.self;
      row.total_ns += sum.total;
    }
  }
  return result;
}

function_weights weigh_functions(connection& profile, std::size_t limit, const window_range& windows) {
  function_weights result;
  std::map<std::string, function_row> overall;  // by name, as the view's rows are grouped
  for (auto& [thread, rows] : weigh_functions_by(profile, windows, [](const stack_sum& sum) { return sum.thread; })) {
    auto& ranked = result.by_thread[thread];
    for (auto& [name, row] : rows) {
      auto& whole = overall.try_emplace(name, function_row{name, 0, 0}).first->second;
      whole.self_ns += row.self_ns;
      whole.total_ns += row.total_ns;
      ranked.push_back(std::move(row));
    }
    rank(ranked, limit);
  }
  for (auto& [name, row] : overall) result.overall.push_back(std::move(row));
  rank(result.overall, limit);
  return result;
}

double percent(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

namespace {
// A number the runtime stored in the metadata: summed over a merged database's processes, else the
// profile's own; 0 when absent.
double metadata_number(connection& profile, std::string_view key, bool summed) {
  auto query = profile.prepare(
      fmt::format("SELECT COALESCE((SELECT {0}(CAST(value AS REAL)) FROM process_metadata WHERE key = ?1), "
                  "(SELECT CAST(value AS REAL) FROM metadata WHERE key = ?1), 0)",
                  summed ? "SUM" : "MAX"));
  query.bind(1, key);
  return query.step() ? query.real(0) : 0;
}

std::string seconds(std::int64_t ns) { return fmt::format("{:.3f} s", static_cast<double>(ns) * 1e-9); }
// A part of the CPU time worth a phrase: one that shows in seconds with three decimals (threads
// block every signal for a moment in pthread_create, for microseconds).
bool worth_saying(std::int64_t ns) { return ns >= 1'000'000; }
}  // namespace

sampling_coverage coverage_of(connection& profile) {
  sampling_coverage coverage;
  const auto integer = [&](std::string_view key) {
    return static_cast<std::int64_t>(metadata_number(profile, key, true));
  };
  coverage.sampled_ns = sample_totals_in(profile, {}).weight_ns;
  coverage.program_cpu_ns = integer(metadata_key::program_cpu_ns);
  coverage.blocked_ns = integer(metadata_key::unsampled_cpu_ns);
  coverage.blocked_threads = integer(metadata_key::unsampled_threads);
  coverage.own_work_ns = integer(metadata_key::kairos_own_cpu_ns);
  coverage.dropped_samples = integer(metadata_key::dropped_samples);
  coverage.lost_ns = integer(metadata_key::lost_cpu_ns);
  coverage.dropped_regions = integer(metadata_key::dropped_region_rows);
  coverage.rows_lost = integer(metadata_key::rows_lost);
  coverage.delay_s = metadata_number(profile, metadata_key::setting_sampling_delay, false);
  coverage.duration_s = metadata_number(profile, metadata_key::setting_sampling_duration, false);
  coverage.windows = scalar(profile, "SELECT COUNT(*) FROM window") > 0;
  coverage.before_sampling_ns = integer(metadata_key::before_sampling_cpu_ns);
  coverage.paused_ns = integer(metadata_key::paused_cpu_ns);
  coverage.after_last_sample_ns = integer(metadata_key::after_last_sample_cpu_ns);
  coverage.handler_ns = integer(metadata_key::signal_handler_cpu_ns);
  coverage.ring_excess_ns = integer(metadata_key::ring_count_excess_ns);
  coverage.weights_shortfall_ns = integer(metadata_key::weights_shortfall_ns);
  return coverage;
}

std::string coverage_text(const sampling_coverage& coverage) {
  std::string text;
  if (coverage.program_cpu_ns > 0)
    text = fmt::format("samples stand for {} of the program's {} of CPU time ({:.1f}%)", seconds(coverage.sampled_ns),
                       seconds(coverage.program_cpu_ns), 100.0 * coverage.sampled_fraction());
  else
    text = fmt::format("samples stand for {} of CPU time (the program's whole CPU time was not recorded)",
                       seconds(coverage.sampled_ns));
  if (worth_saying(coverage.own_work_ns))
    text += fmt::format(", {} of it ({:.1f}%) kairos's own work on the program's threads, shown as [kairos]",
                        seconds(coverage.own_work_ns), percent(coverage.own_work_ns, coverage.sampled_ns));
  std::vector<std::string> unseen;
  if (worth_saying(coverage.blocked_ns))
    unseen.push_back(fmt::format("{} in {} thread{} that blocked the sampling signal", seconds(coverage.blocked_ns),
                                 coverage.blocked_threads, coverage.blocked_threads == 1 ? "" : "s"));
  if (worth_saying(coverage.before_sampling_ns))
    unseen.push_back(fmt::format("{} before sampling began ({})", seconds(coverage.before_sampling_ns),
                                 coverage.delay_s > 0 ? fmt::format("KAIROS_SAMPLING_DELAY={:g} s", coverage.delay_s)
                                 : coverage.windows   ? std::string{"the first time window"}
                                                      : std::string{"the process's start"}));
  if (worth_saying(coverage.paused_ns)) {
    std::vector<std::string> why;
    if (coverage.duration_s > 0)
      why.push_back(fmt::format("after KAIROS_SAMPLING_DURATION={:g} s", coverage.duration_s));
    if (coverage.windows) why.emplace_back("outside the time windows");
    unseen.push_back(fmt::format("{} while sampling was off{}", seconds(coverage.paused_ns),
                                 why.empty() ? "" : fmt::format(" ({})", fmt::join(why, ", "))));
  }
  if (worth_saying(coverage.after_last_sample_ns))
    unseen.push_back(fmt::format("{} after a thread's last sample", seconds(coverage.after_last_sample_ns)));
  if (worth_saying(coverage.handler_ns))
    unseen.push_back(fmt::format("{} in kairos's signal handler", seconds(coverage.handler_ns)));
  if (coverage.dropped_samples > 0)
    unseen.push_back(fmt::format("{} in {} lost sample{} (the writers fell behind)", seconds(coverage.lost_ns),
                                 coverage.dropped_samples, coverage.dropped_samples == 1 ? "" : "s"));
  else if (worth_saying(coverage.lost_ns))
    unseen.push_back(fmt::format("{} that the kernel did not sample (throttled)", seconds(coverage.lost_ns)));
  if (worth_saying(coverage.weights_shortfall_ns))
    unseen.push_back(
        fmt::format("{} between samples that their weights fall short of", seconds(coverage.weights_shortfall_ns)));
  if (!unseen.empty()) text += fmt::format("; not sampled: {}", fmt::join(unseen, "; "));
  if (worth_saying(-coverage.weights_shortfall_ns))
    text +=
        fmt::format("; the weights exceed the CPU time they stand for by {}{}", seconds(-coverage.weights_shortfall_ns),
                    worth_saying(coverage.ring_excess_ns)
                        ? fmt::format(" (perf rings' task-clock counted {} more than their threads' CPU clocks)",
                                      seconds(coverage.ring_excess_ns))
                        : "");
  if (coverage.dropped_regions > 0)
    text += fmt::format("; {} rows of regions and instrumented calls lost", coverage.dropped_regions);
  if (coverage.rows_lost > 0) text += fmt::format("; {} database rows could not be written", coverage.rows_lost);
  return text;
}

nlohmann::json coverage_json(const sampling_coverage& coverage) {
  nlohmann::json json{{"sampled_cpu_ns", coverage.sampled_ns},
                      {"not_sampled",
                       {{"blocked_signal_cpu_ns", coverage.blocked_ns},
                        {"blocked_signal_threads", coverage.blocked_threads},
                        {"before_sampling_cpu_ns", coverage.before_sampling_ns},
                        {"paused_cpu_ns", coverage.paused_ns},
                        {"after_last_sample_cpu_ns", coverage.after_last_sample_ns},
                        {"signal_handler_cpu_ns", coverage.handler_ns},
                        {"weights_shortfall_ns", coverage.weights_shortfall_ns},
                        {"ring_count_excess_ns", coverage.ring_excess_ns},
                        {"dropped_samples", coverage.dropped_samples},
                        {"lost_cpu_ns", coverage.lost_ns},
                        {"dropped_region_rows", coverage.dropped_regions},
                        {"rows_lost", coverage.rows_lost}}},
                      {"kairos_own_cpu_ns", coverage.own_work_ns},
                      {"text", coverage_text(coverage)}};
  if (coverage.program_cpu_ns > 0) {
    json["program_cpu_ns"] = coverage.program_cpu_ns;
    json["sampled_percent"] = 100.0 * coverage.sampled_fraction();
  } else {
    json["program_cpu_ns"] = nullptr;
    json["sampled_percent"] = nullptr;
  }
  return json;
}

std::vector<window_row> windows_in(connection& profile, const window_range& windows) {
  std::vector<window_row> rows;
  auto query = profile.prepare(
      "SELECT window.ordinal, window.spec, window.clock, window.planned_start, window.planned_end, "
      "       MAX(window.actual_start IS NOT NULL), COALESCE(MIN(window.actual_start), 0), "
      "       COALESCE(MAX(COALESCE(window.actual_end, window.actual_start)), 0), COALESCE(MIN(window.start_ns), 0), "
      "       COALESCE(MAX(COALESCE(window.end_ns, window.start_ns)), 0) "
      "FROM window WHERE 1" +
      in_windows(windows, "window.ordinal") + " GROUP BY window.ordinal ORDER BY window.ordinal");
  while (query.step())
    rows.push_back({query.integer(0), std::string{query.text(1)}, std::string{query.text(2)}, query.integer(3),
                    query.integer(4), query.integer(5) != 0, query.integer(6), query.integer(7), query.integer(8),
                    query.integer(9)});
  if (rows.empty()) return rows;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> sums;  // window -> samples, weight
  for (const auto& sum : sample_sums(profile, windows)) {
    sums[sum.window].first += sum.samples;
    sums[sum.window].second += sum.weight_ns;
  }
  for (auto& row : rows)
    if (const auto found = sums.find(row.ordinal); found != sums.end())
      std::tie(row.samples, row.weight_ns) = found->second;
  return rows;
}

std::map<std::int64_t, std::vector<function_row>> functions_by_window(connection& profile, std::size_t limit,
                                                                      const window_range& windows) {
  std::map<std::int64_t, std::vector<function_row>> by_window;
  const auto weights = weigh_functions_by(profile, windows, [](const stack_sum& sum) -> std::optional<std::int64_t> {
    if (sum.window > 0) return sum.window;
    return std::nullopt;
  });
  for (const auto& [window, rows] : weights) {
    auto& ranked = by_window[window];
    for (const auto& [name, row] : rows) ranked.push_back(row);
    rank(ranked, limit);
  }
  return by_window;
}

gpu_summary gpu_summary_of(connection& profile, const window_range& range) {
  gpu_summary gpu;
  auto devices = profile.prepare(
      "SELECT api, device_index, name, architecture, memory_bytes, multiprocessors FROM gpu_device ORDER BY id");
  while (devices.step())
    gpu.devices.push_back({std::string{devices.text(0)}, devices.integer(1), std::string{devices.text(2)},
                           std::string{devices.text(3)}, devices.integer(4), devices.integer(5)});
  auto kernels = profile.prepare("SELECT name, COUNT(*), SUM(duration_ns), MAX(duration_ns) FROM gpu_kernels WHERE 1" +
                                 in_windows(range, "window") + " GROUP BY name ORDER BY SUM(duration_ns) DESC LIMIT " +
                                 std::to_string(kernels_shown));
  while (kernels.step())
    gpu.top_kernels.push_back(
        {std::string{kernels.text(0)}, kernels.integer(1), kernels.integer(2), kernels.integer(3)});
  auto copies = profile.prepare("SELECT kind, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM gpu_memcpy WHERE 1" +
                                in_windows(range, "window") + " GROUP BY kind ORDER BY kind");
  while (copies.step())
    gpu.by_kind.push_back({std::string{copies.text(0)}, copies.integer(1), copies.integer(2), copies.integer(3)});
  return gpu;
}

nlohmann::json gpu_json(const gpu_summary& summary) {
  nlohmann::json gpu{{"devices", nlohmann::json::array()},
                     {"top_kernels", nlohmann::json::array()},
                     {"copies", nlohmann::json::array()}};
  for (const auto& device : summary.devices)
    gpu["devices"].push_back({{"api", device.api},
                              {"index", device.index},
                              {"name", printable(device.name)},
                              {"architecture", device.architecture},
                              {"memory_bytes", device.memory_bytes},
                              {"multiprocessors", device.multiprocessors}});
  for (const auto& kernel : summary.top_kernels)
    gpu["top_kernels"].push_back({{"name", printable(kernel.name)},
                                  {"launches", kernel.launches},
                                  {"total_ns", kernel.total_ns},
                                  {"max_ns", kernel.max_ns}});
  for (const auto& copies : summary.by_kind)
    gpu["copies"].push_back(
        {{"kind", copies.kind}, {"count", copies.count}, {"bytes", copies.bytes}, {"total_ns", copies.total_ns}});
  return gpu;
}

metadata_map read_metadata(connection& profile) {
  metadata_map metadata;
  auto rows = profile.prepare("SELECT key, value FROM metadata ORDER BY key");
  while (rows.step()) metadata[std::string{rows.text(0)}] = rows.text(1);
  return metadata;
}

std::string metadata_value(const metadata_map& metadata, std::string_view key) {
  const auto found = metadata.find(key);
  return found == metadata.end() ? std::string{} : found->second;
}

run_process first_process(connection& profile, const metadata_map& metadata) {
  run_process process;
  auto query = profile.prepare(
      "SELECT process.pid, COALESCE(command.value, ''), COALESCE(host.value, ''), COALESCE(process.start_ns, 0), "
      "COALESCE(process.end_ns, 0) FROM process LEFT JOIN string AS command ON command.id = process.command "
      "LEFT JOIN string AS host ON host.id = process.hostname ORDER BY process.id LIMIT 1");
  if (query.step())
    process = {query.integer(0), query.integer(3), query.integer(4), std::string{query.text(1)},
               std::string{query.text(2)}};
  if (process.command.empty()) process.command = metadata_value(metadata, metadata_key::command);
  if (process.host.empty()) process.host = metadata_value(metadata, metadata_key::host);
  return process;
}

std::int64_t region_count(connection& profile, const window_range& windows) {
  // The blocks know their rows' count; only a window filter needs the rows decoded (here, not
  // through the view).
  if (windows.all) return scalar(profile, "SELECT COALESCE(SUM(count), 0) FROM region_block");
  std::int64_t count = 0;
  for_each_region(profile, windows, [&](const region_visit&) { ++count; });
  return count;
}

time_extent samples_and_regions_extent(connection& profile) {
  const auto samples = sample_totals_in(profile, {});
  auto regions = profile.prepare("SELECT MIN(start_ns), MAX(end_ns) FROM region_block");
  regions.step();
  std::optional<std::int64_t> first = samples.first_ns, last = samples.last_ns;
  if (!regions.is_null(0)) first = std::min(first.value_or(regions.integer(0)), regions.integer(0));
  if (!regions.is_null(1)) last = std::max(last.value_or(regions.integer(1)), regions.integer(1));
  return {first.value_or(0), last.value_or(0)};
}

void for_each_region(connection& profile, const window_range& windows,
                     const std::function<void(const region_visit&)>& visit,
                     const std::set<std::int64_t>& skipped_threads) {
  // Each thread's blocks by id (a few bytes a block of 4,096 regions; the rows' text stays on
  // disk), read back newest first.
  std::map<std::int64_t, std::vector<std::int64_t>> blocks_of_thread;
  auto ids = profile.prepare("SELECT thread, id FROM region_block ORDER BY id");
  while (ids.step())
    if (!skipped_threads.contains(ids.integer(0))) blocks_of_thread[ids.integer(0)].push_back(ids.integer(1));
  auto block_query = profile.prepare("SELECT " + std::string{region_block_columns} + " FROM region_block WHERE id = ?");
  auto name_query = profile.prepare("SELECT value FROM string WHERE id = ?");
  std::map<std::int64_t, std::optional<std::string>> names;  // string.id -> value (none: not in the table)
  const auto name_of = [&](std::int64_t id) -> const std::optional<std::string>& {
    auto [found, added] = names.try_emplace(id);
    if (added) {
      name_query.reset();
      name_query.bind(1, id);
      if (name_query.step()) found->second = std::string{name_query.text(0)};
    }
    return found->second;
  };
  std::vector<region_fields> rows;
  for (const auto& [thread, blocks] : blocks_of_thread) {
    for (auto id = blocks.rbegin(); id != blocks.rend(); ++id) {
      block_query.reset();
      block_query.bind(1, *id);
      if (!block_query.step()) continue;
      rows.clear();
      stored_block(block_query).decode([&](const region_fields& row) { rows.push_back(row); });
      std::int64_t last_name = -1;
      const std::optional<std::string>* name = nullptr;
      for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
        if (!windows.all && (row->window < windows.first || row->window > windows.last)) continue;
        if (row->name != last_name) {
          name = &name_of(row->name);
          last_name = row->name;
        }
        if (!*name) continue;  // the view's JOIN with the string table leaves it out
        visit({thread, static_cast<std::size_t>(std::max<std::int64_t>(0, row->depth)), row->start_ns, row->end_ns,
               row->clipped, **name});
      }
    }
  }
}

namespace {
// The threads' counted calls (the call_tree table) merged into `root`; returns the threads it held.
std::set<std::int64_t> add_call_trees(connection& profile, const window_range& windows, region_node& root) {
  std::set<std::int64_t> threads;
  auto rows = profile.prepare(
      "SELECT c.thread, c.node, c.parent, s.value, c.calls, c.total_ns, c.min_ns, c.max_ns, c.sum_squares_ms "
      "FROM call_tree AS c JOIN string AS s ON s.id = c.name WHERE 1" +
      in_windows(windows, "c.window") + " ORDER BY c.thread, c.node");
  std::map<std::int64_t, region_node*> nodes;  // the current thread's, by its node numbers
  std::int64_t current_thread = -1;
  while (rows.step()) {
    const auto thread = rows.integer(0);
    if (thread != current_thread) {
      current_thread = thread;
      threads.insert(thread);
      nodes.clear();
    }
    // A parent precedes its children (a node is numbered when first called); one a window filter
    // left out has none of its children in the windows either.
    const auto parent = nodes.find(rows.integer(2));
    region_node& caller = parent == nodes.end() ? root : *parent->second;
    region_node& node = caller.child(rows.text(3));
    nodes[rows.integer(1)] = &node;
    const auto calls = rows.integer(4), total_ns = rows.integer(5);
    node.count += calls;
    node.total_ns += total_ns;
    node.min_ns = std::min(node.min_ns, rows.integer(6));
    node.max_ns = std::max(node.max_ns, rows.integer(7));
    node.sum_squares += rows.real(8);
    node.threads.insert(thread);
    if (&caller != &root) caller.children_ns += total_ns;
  }
  return threads;
}
}  // namespace

region_node region_call_graph(connection& profile, const window_range& windows,
                              const std::function<void(const region_visit&)>& visit) {
  region_node root;
  // Threads whose calls were counted have exact counts there; their rows (only the calls at least
  // KAIROS_INSTRUMENT_MIN_DURATION long) are only visited. A profile its program never finished
  // (killed) has no counts: its rows make the graph.
  const auto counted = add_call_trees(profile, windows, root);
  std::int64_t current_thread = -1;
  bool thread_counted = false;
  std::vector<region_node*> open;  // open[d]: the node of the latest region read at depth d
  const auto read = [&](const region_visit& region) {
    if (region.thread != current_thread) {
      current_thread = region.thread;
      thread_counted = counted.contains(region.thread);
      open.clear();
    }
    if (thread_counted) {
      if (visit) visit(region);
      return;
    }
    // A parent a window clipped away, a filtered function or a lost row left out: the deepest
    // region read before adopts it.
    open.resize(std::min(open.size(), region.depth));
    region_node& parent = open.empty() ? root : *open.back();
    region_node& node = parent.child(region.name);
    node.add(region.end_ns - region.start_ns, region.thread);
    if (!open.empty()) parent.children_ns += region.end_ns - region.start_ns;
    open.push_back(&node);
    if (visit) visit(region);
  };
  // Without a visitor, the counted threads' rows have nothing to give.
  for_each_region(profile, windows, read, visit ? std::set<std::int64_t>{} : counted);
  return root;
}

unprofiled_children unprofiled_children_of(connection& profile) {
  // A merged database keeps each process's metadata in process_metadata.
  auto lines = profile.prepare(
      "SELECT value FROM process_metadata WHERE key = ?1 UNION ALL "
      "SELECT value FROM metadata WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM process_metadata WHERE key = ?1)");
  lines.bind(1, metadata_key::children_unprofiled_by_name);
  std::map<std::string, unprofiled_children::group, std::less<>> groups;
  while (lines.step()) {
    std::string_view text = lines.text(0);
    while (!text.empty()) {
      const auto line = text.substr(0, text.find('\n'));
      text.remove_prefix(std::min(text.size(), line.size() + 1));
      const auto first = line.find('\t'), second = line.find('\t', first + 1);
      if (second == std::string_view::npos) continue;
      auto& group = groups[std::string{line.substr(0, first)}];
      group.name = line.substr(0, first);
      group.processes += std::strtoll(std::string{line.substr(first + 1, second - first - 1)}.c_str(), nullptr, 10);
      group.cpu_ns += std::strtoll(std::string{line.substr(second + 1)}.c_str(), nullptr, 10);
    }
  }
  unprofiled_children children;
  for (auto& [name, group] : groups) {
    children.processes += group.processes;
    children.cpu_ns += group.cpu_ns;
    children.by_name.push_back(std::move(group));
  }
  std::ranges::stable_sort(children.by_name, std::greater{}, &unprofiled_children::group::cpu_ns);
  return children;
}

std::string unprofiled_children_text(const unprofiled_children& children, std::int64_t program_cpu_ns) {
  if (children.by_name.empty()) return {};
  std::string names;
  for (const auto& group : children.by_name)
    names += fmt::format("{}{} {}{}", names.empty() ? "" : ", ", printable(group.name), seconds(group.cpu_ns),
                         group.processes == 0   ? std::string{}
                         : group.processes == 1 ? std::string{" (1 process)"}
                                                : fmt::format(" ({} processes)", group.processes));
  const auto count = children.processes == 0   ? std::string{"child processes"}
                     : children.processes == 1 ? std::string{"1 child process"}
                                               : fmt::format("{} child processes", children.processes);
  const auto share = program_cpu_ns > 0 ? fmt::format(", {:.1f}% of the program's and theirs",
                                                      percent(children.cpu_ns, children.cpu_ns + program_cpu_ns))
                                        : std::string{};
  return fmt::format("{} not profiled used {} of CPU time{}: {}; kairos-run --follow-children profiles them", count,
                     seconds(children.cpu_ns), share, names);
}

nlohmann::json unprofiled_children_json(const unprofiled_children& children) {
  nlohmann::json by_name = nlohmann::json::array();
  for (const auto& group : children.by_name)
    by_name.push_back({{"name", printable(group.name)}, {"processes", group.processes}, {"cpu_ns", group.cpu_ns}});
  return {{"processes", children.processes}, {"cpu_ns", children.cpu_ns}, {"by_name", std::move(by_name)}};
}

}  // namespace kairos::database::output_helpers

namespace kairos::database {

using namespace output_helpers;

cpu_timeline bin_cpu_time(connection& profile, const window_range& windows, std::int64_t origin_ns,
                          std::int64_t span_ns, int bins, bool read_samples) {
  cpu_timeline timeline;
  span_ns = std::max<std::int64_t>(1, span_ns);
  auto add = [&](std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns) {
    auto& weights = timeline.weight_ns[thread];
    if (weights.empty()) weights.resize(static_cast<std::size_t>(bins));
    const auto offset = static_cast<__int128>(std::max<std::int64_t>(0, time_ns - origin_ns));
    const auto bin = std::min<std::int64_t>(bins - 1, static_cast<std::int64_t>(offset * bins / span_ns));
    weights[static_cast<std::size_t>(bin)] += weight_ns;
  };
  // A bucket of at most 1/16 of a bin: its samples are drawn at most half a bucket from their time.
  const auto widest =
      scalar(profile, "SELECT COALESCE(MAX(width_ns), 0) FROM sample_timeline WHERE 1" + in_windows(windows, "window"));
  timeline.from_buckets = !read_samples && widest > 0 && static_cast<__int128>(widest) * 16 * bins <= span_ns;
  if (timeline.from_buckets) {
    auto buckets = profile.prepare("SELECT thread, start_ns + width_ns / 2, weight_ns FROM sample_timeline WHERE 1" +
                                   in_windows(windows, "window"));
    while (buckets.step()) add(buckets.integer(0), buckets.integer(1), buckets.integer(2));
  } else {
    for_each_sample(profile, windows,
                    [&](const sample_fields& sample) { add(sample.thread, sample.time_ns, sample.weight_ns); });
  }
  return timeline;
}

}  // namespace kairos::database
