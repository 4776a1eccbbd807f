// The traces' queries (trace_queries.hpp).
#include "trace_queries.hpp"

#include <charconv>
#include <stdexcept>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>

#include "output_helpers.hpp"

namespace kairos::database::trace_queries {

using output_helpers::in_windows;

std::string process_track::track_name() const { return rank ? fmt::format("rank {}: {}", *rank, command) : command; }

std::vector<process_track> process_tracks(connection& profile) {
  std::vector<process_track> rows;
  auto query = profile.prepare(
      "SELECT process.id, process.pid, COALESCE(command.value, ''), process.rank FROM process "
      "LEFT JOIN string AS command ON command.id = process.command");
  while (query.step())
    rows.push_back({query.integer(0), query.integer(1), std::string{query.text(2)},
                    query.is_null(3) ? std::nullopt : std::optional{query.integer(3)}});
  return rows;
}

std::string thread_track::track_name() const { return name.empty() ? fmt::format("thread {}", sequent_id) : name; }

std::vector<thread_track> thread_tracks(connection& profile) {
  std::vector<thread_track> rows;
  auto query = profile.prepare("SELECT id, process, pid, tid, COALESCE(name, ''), sequent_id FROM threads");
  while (query.step())
    rows.push_back({query.integer(0), query.integer(1), query.integer(2), query.integer(3), std::string{query.text(4)},
                    query.integer(5)});
  return rows;
}

void for_each_mpi_call(connection& profile, const window_range& windows,
                       const std::function<void(const call_row&)>& visit) {
  auto query = profile.prepare("SELECT thread, name, start_ns, end_ns, bytes, peer FROM mpi_calls WHERE 1" +
                               in_windows(windows, "window") + " ORDER BY start_ns");
  while (query.step())
    visit({query.integer(0), query.text(1), query.integer(2), query.integer(3),
           query.is_null(4) ? std::nullopt : std::optional{query.integer(4)},
           query.is_null(5) ? std::nullopt : std::optional{query.integer(5)}});
}

void for_each_gpu_api_call(connection& profile, const window_range& windows,
                           const std::function<void(const call_row&)>& visit) {
  auto query =
      profile.prepare("SELECT thread, name, start_ns, end_ns, correlation FROM gpu_api_calls WHERE thread IS NOT NULL" +
                      in_windows(windows, "window") + " ORDER BY start_ns");
  while (query.step())
    visit({query.integer(0), query.text(1), query.integer(2), query.integer(3), std::nullopt, std::nullopt,
           query.integer(4)});
}

std::string gpu_work_row::stream_name() const {
  return fmt::format("GPU {} stream {}", device_name,
                     stream == 0 ? std::string{"default"} : fmt::format("{:#x}", stream));
}

void for_each_gpu_work(connection& profile, const window_range& windows,
                       const std::function<void(const gpu_work_row&)>& visit) {
  auto query = profile.prepare(
      "SELECT 1, gpu_kernel.process, COALESCE(gpu_kernel.device, -1), gpu_kernel.stream, string.value, "
      "gpu_kernel.start_ns, gpu_kernel.end_ns, COALESCE(gpu_device.name, '?'), gpu_kernel.grid_x, gpu_kernel.grid_y, "
      "gpu_kernel.grid_z, gpu_kernel.block_x, gpu_kernel.block_y, gpu_kernel.block_z, gpu_kernel.shared_bytes, 0, "
      "gpu_kernel.correlation FROM gpu_kernel JOIN string ON string.id = gpu_kernel.name "
      "LEFT JOIN gpu_device ON gpu_device.id = gpu_kernel.device WHERE 1" +
      in_windows(windows, "gpu_kernel.window") +
      " UNION ALL SELECT 0, gpu_memcpy.process, COALESCE(gpu_memcpy.device, -1), gpu_memcpy.stream, gpu_memcpy.kind, "
      "gpu_memcpy.start_ns, gpu_memcpy.end_ns, COALESCE(gpu_device.name, '?'), 0, 0, 0, 0, 0, 0, 0, gpu_memcpy.bytes, "
      "gpu_memcpy.correlation FROM gpu_memcpy LEFT JOIN gpu_device ON gpu_device.id = gpu_memcpy.device WHERE 1" +
      in_windows(windows, "gpu_memcpy.window") + " ORDER BY 6");
  while (query.step())
    visit({query.integer(0) != 0,
           query.integer(1),
           query.integer(2),
           query.integer(3),
           query.text(4),
           query.text(7),
           query.integer(5),
           query.integer(6),
           {query.integer(8), query.integer(9), query.integer(10)},
           {query.integer(11), query.integer(12), query.integer(13)},
           query.integer(14),
           query.integer(15),
           query.integer(16)});
}

void for_each_annotation_range(connection& profile, const window_range& windows,
                               const std::function<void(const annotation_range_row&)>& visit) {
  auto query = profile.prepare("SELECT id, name, kind, thread, start_ns, end_ns FROM annotation_ranges WHERE 1" +
                               in_windows(windows, "window") + " ORDER BY start_ns");
  while (query.step())
    visit({query.integer(0), query.text(1), query.text(2), query.integer(3), query.integer(4), query.integer(5)});
}

std::map<std::string, std::string, std::less<>> region_kinds(connection& profile) {
  std::map<std::string, std::string, std::less<>> kinds;
  auto query = profile.prepare(
      "SELECT string.value, region_kind.kind FROM region_kind JOIN string ON string.id = region_kind.name");
  while (query.step()) kinds.emplace(std::string{query.text(0)}, std::string{query.text(1)});
  return kinds;
}

std::int64_t trace_size_limit(connection& profile) {
  auto query = profile.prepare("SELECT value FROM metadata WHERE key = ?");
  query.bind(1, metadata_key::setting_trace_max_bytes);
  std::int64_t limit = default_trace_max_bytes;
  if (query.step()) {
    const auto text = query.text(0);
    std::from_chars(text.data(), text.data() + text.size(), limit);
  }
  return limit;
}

std::optional<clock_pair> run_clocks(connection& profile) {
  auto query = profile.prepare(
      "SELECT COALESCE((SELECT value FROM metadata WHERE key = ?1), "
      "(SELECT value FROM process_metadata WHERE key = ?1 ORDER BY process LIMIT 1))");
  query.bind(1, metadata_key::clock_boottime_monotonic_ns);
  if (!query.step() || query.is_null(0)) return std::nullopt;
  const auto text = query.text(0);
  clock_pair clocks{};
  const auto* end = text.data() + text.size();
  auto [boot_end, boot_error] = std::from_chars(text.data(), end, clocks.boottime_ns);
  if (boot_error == std::errc{} && boot_end != end && *boot_end == ' ') {
    auto [mono_end, mono_error] = std::from_chars(boot_end + 1, end, clocks.monotonic_ns);
    if (mono_error == std::errc{} && mono_end == end) return clocks;
  }
  throw std::runtime_error{fmt::format("the profile's metadata {} is \"{}\": expected \"<boottime_ns> <monotonic_ns>\"",
                                       metadata_key::clock_boottime_monotonic_ns, text)};
}

std::vector<std::int64_t> sampled_stacks(connection& profile) {
  std::vector<std::int64_t> stacks;
  auto query = profile.prepare("SELECT DISTINCT stack FROM stack_total WHERE stack > 0 ORDER BY stack");
  while (query.step()) stacks.push_back(query.integer(0));
  return stacks;
}

const std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>>& stack_reader::nodes() {
  if (!loaded_) {
    loaded_ = true;
    auto query = profile_.prepare("SELECT id, COALESCE(parent, 0), frame FROM stack");
    while (query.step()) nodes_.emplace(query.integer(0), std::pair{query.integer(1), query.integer(2)});
  }
  return nodes_;
}

std::int64_t stack_reader::past_last_string() {
  auto query = profile_.prepare("SELECT COALESCE(MAX(id), 0) + 1 FROM string");
  query.step();
  return query.integer(0);
}

frame_row stack_reader::frame(std::int64_t id) {
  if (!frame_query_)
    frame_query_.emplace(profile_.prepare(
        "SELECT function, COALESCE(module, 0), COALESCE(offset, 0), COALESCE(file, 0), COALESCE(line, 0), language "
        "FROM frame WHERE id = ?"));
  auto& query = *frame_query_;
  query.reset();
  query.bind(1, id);
  if (!query.step()) return {};
  return {query.integer(0), query.integer(1), query.integer(2),
          query.integer(3), query.integer(4), std::string{query.text(5)}};
}

std::string stack_reader::text(std::int64_t string_id) {
  if (!string_query_) string_query_.emplace(profile_.prepare("SELECT value FROM string WHERE id = ?"));
  auto& query = *string_query_;
  query.reset();
  query.bind(1, string_id);
  return query.step() ? std::string{query.text(0)} : std::string{};
}

std::optional<std::string> stack_reader::leaf_function(std::int64_t stack) {
  if (!leaf_query_)
    leaf_query_.emplace(
        profile_.prepare("SELECT function.value FROM stack JOIN frame ON frame.id = stack.frame "
                         "JOIN string AS function ON function.id = frame.function WHERE stack.id = ?"));
  auto& query = *leaf_query_;
  query.reset();
  query.bind(1, stack);
  if (!query.step()) return std::nullopt;
  return std::string{query.text(0)};
}

void stack_reader::for_each_named_node(const std::function<void(const named_node&)>& visit) {
  auto query = profile_.prepare(
      "SELECT stack.id, stack.parent, function.value FROM stack "
      "JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function "
      "ORDER BY stack.id");
  while (query.step())
    visit({query.integer(0), query.is_null(1) ? std::nullopt : std::optional{query.integer(1)}, query.text(2)});
}

}  // namespace kairos::database::trace_queries
