// The Chrome trace (`trace` format): samples, regions, MPI calls, GPU work and windows as
// trace events, and process sampling's metrics as counter tracks ("ph":"C"), streamed. A list of
// sections (write_trace), each formatting what a query returns (trace_queries.hpp,
// output_helpers.hpp).
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "output_helpers.hpp"
#include "trace_queries.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;
using namespace trace_queries;

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

// Events go out a megabyte at a time: one stream write an event was a fifth of the trace's time.
constexpr std::size_t written_at = 1 << 20;

// What every section writes with: the stream, the time origin, the threads' ids and the comma
// that goes before every event but the first of a list.
struct trace_context {
  std::ostream& out;
  std::int64_t origin_ns;
  std::int64_t first_pid;                                                 // the windows' and notes' pid
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> pid_tid;  // thread.id -> (pid, tid)
  bool first = true;

  std::string_view separator() {
    const std::string_view text = first ? "" : ",\n";
    first = false;
    return text;
  }
  double microseconds(std::int64_t time_ns) const { return (time_ns - origin_ns) * 1e-3; }
};

// A process of an MPI launch is named by its rank first: a merged launch shows a track per rank.
void write_names(trace_context& trace, const std::vector<process_track>& processes,
                 const std::vector<thread_track>& threads) {
  for (const auto& process : processes)
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", process.pid,
                             json_string(process.track_name()));
  for (const auto& thread : threads)
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", thread.pid,
                             thread.tid, json_string(thread.track_name()));
}

// The windows on a track of their own (tid 0 is no thread's), so the gaps between them show.
void write_windows(trace_context& trace, const std::vector<window_row>& windows) {
  if (!windows.empty())
    trace.out << trace.separator()
              << fmt::format(
                     R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"kairos time windows"}}}})",
                     trace.first_pid);
  for (const auto& window : windows) {
    if (!window.opened) continue;
    trace.out << trace.separator()
              << fmt::format(
                     R"({{"ph":"X","cat":"window","name":"window {}","pid":{},"tid":0,"ts":{:.3f},"dur":{:.3f},)"
                     R"("args":{{"spec":{},"clock":"{}","planned_start":{},"planned_end":{},"actual_start":{},)"
                     R"("actual_end":{},"samples":{}}}}})",
                     window.ordinal, trace.first_pid, trace.microseconds(window.start_ns),
                     (window.end_ns - window.start_ns) * 1e-3, json_string(window.spec), window.clock,
                     window.planned_start, window.planned_end, window.actual_start, window.actual_end, window.samples);
  }
}

// GPU work: each (device, stream) a track of its own, under the first process, with its kernels
// and copies as slices; API calls as slices on the calling thread's track.
void write_gpu(trace_context& trace, connection& profile, const window_range& range) {
  constexpr std::int64_t first_gpu_track = 1'000'000'000;                // above any tid
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> tracks;  // (device row, stream) -> tid
  for_each_gpu_work(profile, range, [&](const gpu_work_row& work) {
    const auto [track, added] =
        tracks.try_emplace({work.device, work.stream}, first_gpu_track + static_cast<std::int64_t>(tracks.size()));
    if (added)
      trace.out << trace.separator()
                << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                               trace.first_pid, track->second, json_string(work.stream_name()));
    trace.out << trace.separator()
              << fmt::format(
                     R"({{"ph":"X","cat":"gpu_{}","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                     work.kernel ? "kernel" : "copy", json_string(work.name), trace.first_pid, track->second,
                     trace.microseconds(work.start_ns), (work.end_ns - work.start_ns) * 1e-3);
    if (work.kernel)
      trace.out << fmt::format(R"("grid":[{},{},{}],"block":[{},{},{}],"shared_bytes":{},)", work.grid[0], work.grid[1],
                               work.grid[2], work.block[0], work.block[1], work.block[2], work.shared_bytes);
    else
      trace.out << fmt::format(R"("bytes":{},)", work.bytes);
    trace.out << fmt::format(R"("correlation":{}}}}})", work.correlation);
  });
  for_each_gpu_api_call(profile, range, [&](const call_row& call) {
    const auto owner = trace.pid_tid.find(call.thread);
    if (owner == trace.pid_tid.end()) return;
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"X","cat":"gpu_api","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},)"
                             R"("args":{{"correlation":{}}}}})",
                             json_string(call.name), owner->second.first, owner->second.second,
                             trace.microseconds(call.start_ns), (call.end_ns - call.start_ns) * 1e-3, call.correlation);
  });
}

// A region's event up to its name: its kind's category for an annotation's regions (OpenMP,
// NVTX, Kokkos: docs/openmp.md), "region" for the rest; each formatted once.
class region_categories {
 public:
  explicit region_categories(connection& profile) : kinds_{region_kinds(profile)} {}
  const std::string& of(std::string_view name) {
    const auto kind = kinds_.find(name);
    if (kind == kinds_.end()) return plain_;
    auto start = categories_.find(kind->second);
    if (start == categories_.end())
      start =
          categories_.emplace(kind->second, R"({"ph":"X","cat":)" + json_string(kind->second) + R"(,"name":)").first;
    return start->second;
  }

 private:
  std::map<std::string, std::string, std::less<>> kinds_;
  std::map<std::string, std::string, std::less<>> categories_;  // kind -> its event's start
  const std::string plain_ = R"({"ph":"X","cat":"region","name":)";
};

// Regions thread by thread, a parent before what it encloses (trace viewers order slices by
// time themselves; a parent first keeps one that starts with its child above it).
void write_regions(trace_context& trace, connection& profile, const window_range& range) {
  region_categories categories{profile};
  std::map<std::string, std::string, std::less<>> quoted;  // each name escaped once
  const std::string* category = nullptr;
  std::int64_t current_thread = -1;
  std::string owner;  // the thread's ,"pid":..,"tid":.. (empty: no such thread)
  std::string events;
  events.reserve(written_at + 4096);
  std::string_view last_name;
  const std::string* quoted_name = nullptr;
  for_each_region(profile, range, [&](const region_visit& region) {
    if (region.thread != current_thread) {
      current_thread = region.thread;
      const auto found = trace.pid_tid.find(region.thread);
      owner = found == trace.pid_tid.end()
                  ? std::string{}
                  : fmt::format(R"(,"pid":{},"tid":{})", found->second.first, found->second.second);
    }
    if (owner.empty()) return;                     // as the view's JOIN with threads
    if (region.name.data() != last_name.data()) {  // names come in runs, each from one stable string
      auto found = quoted.find(region.name);
      if (found == quoted.end()) found = quoted.emplace(std::string{region.name}, json_string(region.name)).first;
      quoted_name = &found->second;
      last_name = region.name;
      category = &categories.of(region.name);
    }
    events += trace.separator();
    events += *category;
    events += *quoted_name;
    events += owner;
    events += R"(,"ts":)";
    append_microseconds(events, region.start_ns - trace.origin_ns);
    events += R"(,"dur":)";
    append_microseconds(events, region.end_ns - region.start_ns);
    if (region.clipped != 0) {
      events += R"(,"args":{"clipped":)";
      events += fmt::format_int{region.clipped}.c_str();
      events += '}';
    }
    events += '}';
    if (events.size() >= written_at) {
      trace.out << events;
      events.clear();
    }
  });
  trace.out << events;
}

// MPI calls as slices on the calling thread's track, with what they moved and with whom.
void write_mpi_calls(trace_context& trace, connection& profile, const window_range& range) {
  for_each_mpi_call(profile, range, [&](const call_row& call) {
    const auto owner = trace.pid_tid.find(call.thread);
    if (owner == trace.pid_tid.end()) return;
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"X","cat":"mpi","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{)",
                             json_string(call.name), owner->second.first, owner->second.second,
                             trace.microseconds(call.start_ns), (call.end_ns - call.start_ns) * 1e-3);
    if (call.bytes) trace.out << fmt::format(R"("bytes":{})", *call.bytes);
    if (call.peer) trace.out << fmt::format(R"({}"peer":{})", call.bytes ? "," : "", *call.peer);
    trace.out << "}}";
  });
}

// Process sampling: a counter track per series, under its process.
void write_metrics(trace_context& trace, connection& profile, const window_range& range) {
  for_each_metric_value(profile, range, [&](const metric_series& series, std::int64_t time_ns, double value) {
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"C","cat":"process","name":{},"pid":{},"ts":{:.3f},"args":{{"value":{}}}}})",
                             json_string(series.name), series.pid, trace.microseconds(time_ns), value);
  });
}

// Ranges that need not nest (NVTX's start/end, Kokkos's sections) as async slices: one track
// each, beside the thread that started it.
void write_annotation_ranges(trace_context& trace, connection& profile, const window_range& range) {
  for_each_annotation_range(profile, range, [&](const annotation_range_row& annotation) {
    const auto owner = trace.pid_tid.find(annotation.thread);
    if (owner == trace.pid_tid.end()) return;
    const auto head =
        fmt::format(R"("cat":{},"name":{},"id":{},"pid":{},"tid":{})", json_string(annotation.kind),
                    json_string(annotation.name), annotation.id, owner->second.first, owner->second.second);
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"b",{},"ts":{:.3f}}})", head, trace.microseconds(annotation.start_ns));
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"e",{},"ts":{:.3f}}})", head, trace.microseconds(annotation.end_ns));
  });
}

// A sample's event: its stack's leaf name and its thread's ids formatted once each.
class sample_events {
 public:
  sample_events(connection& profile, const trace_context& trace) : stacks_{profile}, origin_ns_{trace.origin_ns} {
    for (const auto& [thread, ids] : trace.pid_tid)
      owners_.emplace(thread, fmt::format(R"(,"pid":{},"tid":{},"ts":)", ids.first, ids.second));
  }
  // False for a sample of no thread the trace has (as the view's JOIN with threads).
  bool format(const sample_fields& sample, std::string& event) {
    const auto owner = owners_.find(sample.thread);
    if (owner == owners_.end()) return false;
    event = head(sample.stack);
    event += owner->second;
    append_microseconds(event, sample.time_ns - origin_ns_);
    if (sample.stack != 0) {
      event += R"(,"sf":")";
      event += fmt::format_int{sample.stack}.c_str();
      event += '"';
    }
    event += R"(,"args":{"weight_ns":)";
    event += fmt::format_int{sample.weight_ns}.c_str();
    event += "}}";
    return true;
  }

 private:
  const std::string& head(std::int64_t stack) {
    auto found = heads_.find(stack);
    if (found != heads_.end()) return found->second;
    const auto leaf = stack != 0 ? stacks_.leaf_function(stack) : std::nullopt;
    return heads_
        .emplace(stack, R"({"ph":"i","s":"t","cat":"sample","name":)" + json_string(leaf ? *leaf : "<no stack>"))
        .first->second;
  }

  stack_reader stacks_;
  std::int64_t origin_ns_;
  std::unordered_map<std::int64_t, std::string> heads_;  // by stack: the event up to "pid"
  std::map<std::int64_t, std::string> owners_;           // thread.id -> ,"pid":..,"tid":..,"ts":
};

// Samples in the order they were stored (each thread's in time order), as the slices: sorting
// them by time made SQLite hold every sample (output_helpers.hpp, "samples"). Past the run's
// KAIROS_TRACE_MAX_BYTES, no more: one event says where they all are, the Perfetto trace, and the
// rest is counted from the samples' sums, not read.
trace_summary write_samples(trace_context& trace, connection& profile, const window_range& range) {
  const auto limit = trace_size_limit(profile);
  std::int64_t written = std::max<std::int64_t>(0, static_cast<std::int64_t>(trace.out.tellp()));
  std::int64_t left_out = 0, stopped_at_ns = 0, written_samples = 0;
  sample_events formatter{profile, trace};
  std::string events, event;
  for_each_sample_while(profile, range, [&](const sample_fields& sample) {
    if (!formatter.format(sample, event)) return true;
    if (written + static_cast<std::int64_t>(event.size()) > limit) {
      stopped_at_ns = sample.time_ns;
      std::int64_t in_range = 0;
      for (const auto& sum : sample_sums(profile, range))
        if (trace.pid_tid.contains(sum.thread)) in_range += sum.samples;
      left_out = std::max<std::int64_t>(1, in_range - written_samples);
      return false;
    }
    const auto before = trace.separator();
    written += static_cast<std::int64_t>(before.size() + event.size());
    ++written_samples;
    events += before;
    events += event;
    if (events.size() >= written_at) {
      trace.out << events;
      events.clear();
    }
    return true;
  });
  trace.out << events;
  if (left_out > 0)
    trace.out << trace.separator()
              << fmt::format(R"({{"ph":"i","s":"g","cat":"kairos","name":{},"pid":{},"tid":0,"ts":{:.3f},)"
                             R"("args":{{"samples_left_out":{},"perfetto_trace":{}}}}})",
                             json_string(fmt::format("samples stop here: the trace reached KAIROS_TRACE_MAX_BYTES "
                                                     "({}); the Perfetto trace has them all",
                                                     limit)),
                             trace.first_pid, trace.microseconds(stopped_at_ns), left_out,
                             json_string(perfetto_path_of(profile.path())));
  return {written_samples, left_out, limit};
}

// The call stacks the samples' "sf" name, each node once with its parent.
void write_stack_frames(trace_context& trace, connection& profile) {
  trace.first = true;
  stack_reader{profile}.for_each_named_node([&](const stack_reader::named_node& node) {
    trace.out << trace.separator() << fmt::format(R"("{}":{{"name":{})", node.id, json_string(node.function));
    if (node.parent) trace.out << fmt::format(R"(,"parent":"{}")", *node.parent);
    trace.out << '}';
  });
}

}  // namespace

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

trace_summary write_trace(connection& profile, std::ostream& out, const window_range& range) {
  const auto processes = process_tracks(profile);
  const auto threads = thread_tracks(profile);
  // Timestamps in microseconds from the earliest event, as the format expects.
  trace_context trace{out, earliest_event_ns(profile), 0, {}};
  if (!processes.empty()) trace.first_pid = std::ranges::min(processes, {}, &process_track::pid).pid;
  for (const auto& thread : threads) trace.pid_tid.emplace(thread.id, std::pair{thread.pid, thread.tid});
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  write_names(trace, processes, threads);
  write_windows(trace, windows_in(profile, range));
  write_gpu(trace, profile, range);
  write_regions(trace, profile, range);
  write_mpi_calls(trace, profile, range);
  write_metrics(trace, profile, range);
  write_annotation_ranges(trace, profile, range);
  const auto summary = write_samples(trace, profile, range);
  out << "\n],\"stackFrames\":{";
  write_stack_frames(trace, profile);
  out << "}}\n";
  return summary;
}

}  // namespace kairos::database
