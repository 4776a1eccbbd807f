// The Chrome trace (`trace` format): samples, regions, MPI calls, GPU work and windows as
// trace events, and process sampling's metrics as counter tracks ("ph":"C"), streamed.
#include <kairos/plugins/database/outputs.hpp>

#include <charconv>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;

// `ns` in microseconds with three decimals, exactly what "{:.3f}" writes of ns * 1e-3, without
// formatting a double: the trace's regions are millions of events, and two floats an event were
// most of the trace's time.
void append_microseconds(std::string& out, std::int64_t ns) {
  std::uint64_t magnitude = static_cast<std::uint64_t>(ns);
  if (ns < 0) magnitude = 0 - magnitude;
  // Written backwards from the last decimal: at most 20 digits, the point and a sign.
  char text[24];
  char* at = std::end(text);
  for (int place = 0; place < 3; ++place, magnitude /= 10) *--at = static_cast<char>('0' + magnitude % 10);
  *--at = '.';
  do {
    *--at = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (ns < 0) *--at = '-';
  out.append(at, static_cast<std::size_t>(std::end(text) - at));
}

// The run's KAIROS_TRACE_MAX_BYTES, from the metadata (the setting's default for a database
// written without it).
std::int64_t size_limit(connection& profile) {
  auto query = profile.prepare("SELECT value FROM metadata WHERE key = 'setting.KAIROS_TRACE_MAX_BYTES'");
  std::int64_t limit = default_trace_max_bytes;
  if (query.step()) {
    const auto text = query.text(0);
    std::from_chars(text.data(), text.data() + text.size(), limit);
  }
  return limit;
}

}  // namespace

using namespace output_helpers;

std::string perfetto_path_of(std::string_view database_path) {
  std::string path{database_path};
  if (path.ends_with(".db")) path.resize(path.size() - 3);
  return path + std::string{format_of(format_id::perfetto).extension};
}

std::string perfetto_samples_path_of(std::string_view database_path) {
  std::string path{database_path};
  if (path.ends_with(".db")) path.resize(path.size() - 3);
  return path + ".perfetto-samples.part";
}

// GPU work in the trace: each (device, stream) a track of its own, under the process, with its
// kernels and copies as slices; API calls as slices on the calling thread's track.
template <class Separator>
void write_gpu_tracks(connection& profile, std::ostream& out, const window_range& range, std::int64_t origin_ns,
                      std::int64_t pid, Separator& separator) {
  constexpr std::int64_t first_gpu_track = 1'000'000'000;                // above any tid
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> tracks;  // (device row, stream) → tid
  auto track_of = [&](std::int64_t device, std::int64_t stream, std::string_view device_name) {
    const auto [found, added] =
        tracks.try_emplace({device, stream}, first_gpu_track + static_cast<std::int64_t>(tracks.size()));
    if (added) {
      out << separator();
      out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", pid,
                         found->second,
                         json_string(fmt::format("GPU {} stream {}", device_name,
                                                 stream == 0 ? std::string{"default"} : fmt::format("{:#x}", stream))));
    }
    return found->second;
  };
  auto work = profile.prepare(
      "SELECT 'kernel', COALESCE(gpu_kernel.device, -1), gpu_kernel.stream, string.value, gpu_kernel.start_ns, "
      "gpu_kernel.end_ns, COALESCE(gpu_device.name, '?'), gpu_kernel.grid_x, gpu_kernel.grid_y, gpu_kernel.grid_z, "
      "gpu_kernel.block_x, gpu_kernel.block_y, gpu_kernel.block_z, gpu_kernel.shared_bytes, gpu_kernel.correlation "
      "FROM gpu_kernel JOIN string ON string.id = gpu_kernel.name "
      "LEFT JOIN gpu_device ON gpu_device.id = gpu_kernel.device WHERE 1" +
      in_windows(range, "gpu_kernel.window") +
      " UNION ALL SELECT 'copy', COALESCE(gpu_memcpy.device, -1), gpu_memcpy.stream, gpu_memcpy.kind, "
      "gpu_memcpy.start_ns, gpu_memcpy.end_ns, COALESCE(gpu_device.name, '?'), gpu_memcpy.bytes, 0, 0, 0, 0, 0, 0, "
      "gpu_memcpy.correlation FROM gpu_memcpy LEFT JOIN gpu_device ON gpu_device.id = gpu_memcpy.device WHERE 1" +
      in_windows(range, "gpu_memcpy.window") + " ORDER BY 5");
  while (work.step()) {
    const auto tid = track_of(work.integer(1), work.integer(2), work.text(6));
    const bool kernel = work.text(0) == "kernel";
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"gpu_{}","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                       work.text(0), json_string(work.text(3)), pid, tid, (work.integer(4) - origin_ns) * 1e-3,
                       (work.integer(5) - work.integer(4)) * 1e-3);
    if (kernel)
      out << fmt::format(R"("grid":[{},{},{}],"block":[{},{},{}],"shared_bytes":{},)", work.integer(7), work.integer(8),
                         work.integer(9), work.integer(10), work.integer(11), work.integer(12), work.integer(13));
    else
      out << fmt::format(R"("bytes":{},)", work.integer(7));
    out << fmt::format(R"("correlation":{}}}}})", work.integer(14));
  }
  auto calls = profile.prepare(
      "SELECT gpu_api_calls.name, threads.pid, threads.tid, gpu_api_calls.start_ns, gpu_api_calls.duration_ns, "
      "gpu_api_calls.correlation FROM gpu_api_calls JOIN threads ON threads.id = gpu_api_calls.thread WHERE 1" +
      in_windows(range, "gpu_api_calls.window") + " ORDER BY gpu_api_calls.start_ns");
  while (calls.step()) {
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"gpu_api","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},)"
                       R"("args":{{"correlation":{}}}}})",
                       json_string(calls.text(0)), calls.integer(1), calls.integer(2),
                       (calls.integer(3) - origin_ns) * 1e-3, calls.integer(4) * 1e-3, calls.integer(5));
  }
}

trace_summary write_trace(connection& profile, std::ostream& out, const window_range& range) {
  // Timestamps in microseconds from the earliest event, as the format expects.
  const auto origin_ns = earliest_event_ns(profile);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  // What goes before the next event (or frame): a comma, except before the first.
  auto separator = [&first]() -> std::string_view {
    const std::string_view text = first ? "" : ",\n";
    first = false;
    return text;
  };
  // A process of an MPI launch is named by its rank first: a merged launch shows a track per rank.
  auto processes = profile.prepare(
      "SELECT process.pid, COALESCE(command.value, ''), process.rank FROM process "
      "LEFT JOIN string AS command ON command.id = process.command");
  while (processes.step()) {
    out << separator();
    const auto name = processes.is_null(2) ? std::string{processes.text(1)}
                                           : fmt::format("rank {}: {}", processes.integer(2), processes.text(1));
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})",
                       processes.integer(0), json_string(name));
  }
  auto threads = profile.prepare("SELECT pid, tid, COALESCE(name, ''), sequent_id FROM threads");
  while (threads.step()) {
    out << separator();
    const auto name =
        threads.text(2).empty() ? fmt::format("thread {}", threads.integer(3)) : std::string{threads.text(2)};
    out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                       threads.integer(0), threads.integer(1), json_string(name));
  }
  // The windows on a track of their own (tid 0 is no thread's), so the gaps between them show.
  const auto windows = windows_in(profile, range);
  const auto first_pid = scalar(profile, "SELECT MIN(pid) FROM process");
  if (!windows.empty()) {
    out << separator();
    out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"kairos time windows"}}}})",
                       first_pid);
  }
  for (const auto& window : windows) {
    if (!window.opened) continue;
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"window","name":"window {}","pid":{},"tid":0,"ts":{:.3f},"dur":{:.3f},)"
                       R"("args":{{"spec":{},"clock":"{}","planned_start":{},"planned_end":{},"actual_start":{},)"
                       R"("actual_end":{},"samples":{}}}}})",
                       window.ordinal, first_pid, (window.start_ns - origin_ns) * 1e-3,
                       (window.end_ns - window.start_ns) * 1e-3, json_string(window.spec), window.clock,
                       window.planned_start, window.planned_end, window.actual_start, window.actual_end,
                       window.samples);
  }
  write_gpu_tracks(profile, out, range, origin_ns, first_pid, separator);
  // Regions thread by thread, a parent before what it encloses (trace viewers order slices by
  // time themselves; a parent first keeps one that starts with its child above it).
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> pid_tid;  // thread.id -> (pid, tid)
  auto owners = profile.prepare("SELECT id, pid, tid FROM threads");
  while (owners.step()) pid_tid.emplace(owners.integer(0), std::pair{owners.integer(1), owners.integer(2)});
  std::map<std::string, std::string, std::less<>> quoted;  // each name escaped once
  // An annotation's regions (OpenMP, NVTX, Kokkos: docs/openmp.md) carry its kind as their category.
  std::map<std::string, std::string, std::less<>> kinds;
  auto kind_rows = profile.prepare(
      "SELECT string.value, region_kind.kind FROM region_kind "
      "JOIN string ON string.id = region_kind.name");
  while (kind_rows.step()) kinds.emplace(std::string{kind_rows.text(0)}, std::string{kind_rows.text(1)});
  const std::string region_category = R"({"ph":"X","cat":"region","name":)";
  const std::string* category = &region_category;
  std::map<std::string, std::string, std::less<>> categories;  // kind -> its event's start
  std::int64_t current_thread = -1;
  std::string owner;  // the thread's ,"pid":..,"tid":.. (empty: no such thread)
  // Events go out a megabyte at a time: one stream write an event was a fifth of the trace's time.
  constexpr std::size_t written_at = 1 << 20;
  std::string events;
  events.reserve(written_at + 4096);
  std::string_view last_name;
  const std::string* quoted_name = nullptr;
  for_each_region(profile, range, [&](const region_visit& region) {
    if (region.thread != current_thread) {
      current_thread = region.thread;
      const auto found = pid_tid.find(region.thread);
      owner = found == pid_tid.end() ? std::string{}
                                     : fmt::format(R"(,"pid":{},"tid":{})", found->second.first, found->second.second);
    }
    if (owner.empty()) return;                     // as the view's JOIN with threads
    if (region.name.data() != last_name.data()) {  // names come in runs, each from one stable string
      auto found = quoted.find(region.name);
      if (found == quoted.end()) found = quoted.emplace(std::string{region.name}, json_string(region.name)).first;
      quoted_name = &found->second;
      last_name = region.name;
      category = &region_category;
      if (const auto kind = kinds.find(region.name); kind != kinds.end()) {
        auto start = categories.find(kind->second);
        if (start == categories.end())
          start =
              categories.emplace(kind->second, R"({"ph":"X","cat":)" + json_string(kind->second) + R"(,"name":)").first;
        category = &start->second;
      }
    }
    events += separator();
    events += *category;
    events += *quoted_name;
    events += owner;
    events += R"(,"ts":)";
    append_microseconds(events, region.start_ns - origin_ns);
    events += R"(,"dur":)";
    append_microseconds(events, region.end_ns - region.start_ns);
    if (region.clipped != 0) {
      events += R"(,"args":{"clipped":)";
      events += fmt::format_int{region.clipped}.c_str();
      events += '}';
    }
    events += '}';
    if (events.size() >= written_at) {
      out << events;
      events.clear();
    }
  });
  out << events;
  // MPI calls as slices on the calling thread's track, with what they moved and with whom.
  auto mpi_calls = profile.prepare(
      "SELECT mpi_calls.name, threads.pid, threads.tid, mpi_calls.start_ns, mpi_calls.duration_ns, mpi_calls.bytes, "
      "mpi_calls.peer FROM mpi_calls JOIN threads ON threads.id = mpi_calls.thread WHERE 1" +
      in_windows(range, "mpi_calls.window") + " ORDER BY mpi_calls.start_ns");
  while (mpi_calls.step()) {
    out << separator();
    out << fmt::format(R"({{"ph":"X","cat":"mpi","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                       json_string(mpi_calls.text(0)), mpi_calls.integer(1), mpi_calls.integer(2),
                       (mpi_calls.integer(3) - origin_ns) * 1e-3, mpi_calls.integer(4) * 1e-3);
    const char* comma = "";
    if (!mpi_calls.is_null(5)) {
      out << fmt::format(R"("bytes":{})", mpi_calls.integer(5));
      comma = ",";
    }
    if (!mpi_calls.is_null(6)) out << fmt::format(R"({}"peer":{})", comma, mpi_calls.integer(6));
    out << "}}";
  }
  // Process sampling: a counter track per series, under its process.
  for_each_metric_value(profile, range, [&](const metric_series& series, std::int64_t time_ns, double value) {
    out << separator();
    out << fmt::format(R"({{"ph":"C","cat":"process","name":{},"pid":{},"ts":{:.3f},"args":{{"value":{}}}}})",
                       json_string(series.name), series.pid, (time_ns - origin_ns) * 1e-3, value);
  });
  // Ranges that need not nest (NVTX's start/end, Kokkos's sections) as async slices: one track
  // each, beside the thread that started it.
  auto ranges = profile.prepare(
      "SELECT annotation_ranges.id, annotation_ranges.name, annotation_ranges.kind, threads.pid, threads.tid, "
      "annotation_ranges.start_ns, annotation_ranges.end_ns FROM annotation_ranges "
      "JOIN threads ON threads.id = annotation_ranges.thread WHERE 1" +
      in_windows(range, "annotation_ranges.window") + " ORDER BY annotation_ranges.start_ns");
  while (ranges.step()) {
    const auto head = fmt::format(R"("cat":{},"name":{},"id":{},"pid":{},"tid":{})", json_string(ranges.text(2)),
                                  json_string(ranges.text(1)), ranges.integer(0), ranges.integer(3), ranges.integer(4));
    out << separator();
    out << fmt::format(R"({{"ph":"b",{},"ts":{:.3f}}})", head, (ranges.integer(5) - origin_ns) * 1e-3);
    out << separator();
    out << fmt::format(R"({{"ph":"e",{},"ts":{:.3f}}})", head, (ranges.integer(6) - origin_ns) * 1e-3);
  }
  // Samples in the order they were stored (each thread's in time order), as the slices: sorting
  // them by time made SQLite hold every sample (output_helpers.hpp, "samples"). A stack's leaf
  // name and a thread's ids are formatted once; the sample table is read alone, without the
  // samples view's joins. Past the run's KAIROS_TRACE_MAX_BYTES, no more: one event says where
  // they all are, the Perfetto trace, and the rest is counted from stack_total, not read.
  const auto limit = size_limit(profile);
  std::int64_t written = std::max<std::int64_t>(0, static_cast<std::int64_t>(out.tellp()));
  std::int64_t left_out = 0, stopped_at_ns = 0, written_samples = 0;
  std::unordered_map<std::int64_t, std::string> sample_heads;  // by stack: the event up to "pid"
  auto leaf_of = profile.prepare(
      "SELECT function.value FROM stack JOIN frame ON frame.id = stack.frame "
      "JOIN string AS function ON function.id = frame.function WHERE stack.id = ?");
  auto head_of = [&](std::int64_t stack) -> const std::string& {
    auto found = sample_heads.find(stack);
    if (found != sample_heads.end()) return found->second;
    std::string leaf = "<no stack>";
    if (stack != 0) {
      leaf_of.reset();
      leaf_of.bind(1, stack);
      if (leaf_of.step()) leaf = leaf_of.text(0);
    }
    return sample_heads.emplace(stack, R"({"ph":"i","s":"t","cat":"sample","name":)" + json_string(leaf)).first->second;
  };
  std::map<std::int64_t, std::string> sample_owners;  // thread.id -> ,"pid":..,"tid":..,"ts":
  for (const auto& [thread, ids] : pid_tid)
    sample_owners.emplace(thread, fmt::format(R"(,"pid":{},"tid":{},"ts":)", ids.first, ids.second));
  auto samples = profile.prepare("SELECT thread, time_ns, COALESCE(stack, 0), weight_ns FROM sample WHERE 1" +
                                 in_windows(range, "window") + " ORDER BY id");
  events.clear();
  std::string event;
  while (samples.step()) {
    const auto owner_of = sample_owners.find(samples.integer(0));
    if (owner_of == sample_owners.end()) continue;  // as the view's JOIN with threads
    const auto stack = samples.integer(2);
    event = head_of(stack);
    event += owner_of->second;
    append_microseconds(event, samples.integer(1) - origin_ns);
    if (stack != 0) {
      event += R"(,"sf":")";
      event += fmt::format_int{stack}.c_str();
      event += '"';
    }
    event += R"(,"args":{"weight_ns":)";
    event += fmt::format_int{samples.integer(3)}.c_str();
    event += "}}";
    if (written + static_cast<std::int64_t>(event.size()) > limit) {
      stopped_at_ns = samples.integer(1);
      const auto in_range = scalar(profile,
                                   "SELECT COALESCE(SUM(samples), 0) FROM stack_total JOIN thread ON thread.id = "
                                   "stack_total.thread WHERE 1" +
                                       in_windows(range, "stack_total.window"));
      left_out = std::max<std::int64_t>(1, in_range - written_samples);
      break;
    }
    const auto before = separator();
    written += static_cast<std::int64_t>(before.size() + event.size());
    ++written_samples;
    events += before;
    events += event;
    if (events.size() >= written_at) {
      out << events;
      events.clear();
    }
  }
  out << events;
  if (left_out > 0) {
    out << separator();
    out << fmt::format(R"({{"ph":"i","s":"g","cat":"kairos","name":{},"pid":{},"tid":0,"ts":{:.3f},)"
                       R"("args":{{"samples_left_out":{},"perfetto_trace":{}}}}})",
                       json_string(fmt::format("samples stop here: the trace reached KAIROS_TRACE_MAX_BYTES ({}); "
                                               "the Perfetto trace has them all",
                                               limit)),
                       first_pid, (stopped_at_ns - origin_ns) * 1e-3, left_out,
                       json_string(perfetto_path_of(profile.path())));
  }
  out << "\n],\"stackFrames\":{";
  auto frames = profile.prepare(
      "SELECT stack.id, stack.parent, function.value FROM stack "
      "JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function "
      "ORDER BY stack.id");
  first = true;
  while (frames.step()) {
    out << separator();
    out << fmt::format(R"("{}":{{"name":{})", frames.integer(0), json_string(frames.text(2)));
    if (!frames.is_null(1)) out << fmt::format(R"(,"parent":"{}")", frames.integer(1));
    out << '}';
  }
  out << "}}\n";
  return {written_samples, left_out, limit};
}

}  // namespace kairos::database
