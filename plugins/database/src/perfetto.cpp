// The Perfetto trace (`perfetto` format, <stem>.perfetto-trace): Perfetto's own protobuf format,
// streamed a packet at a time. One packet sequence holds everything: a track descriptor for each
// process, thread, GPU stream, the windows and each process-sampling series; regions and
// instrumented functions as slices on their thread's track, MPI calls and GPU API calls on a
// track under their thread's, GPU kernels and copies on their stream's, windows on a track of their
// own; process sampling's values on counter tracks; CPU samples as PerfSample packets whose call
// stacks are interned (function names, mappings, frames and callstacks, each sent once, in the
// packet that first needs it). A sample costs a packet of about 25 bytes where the Chrome trace
// spends about 170 on its JSON (perfetto_tests.py, a_sample_costs_tens_of_bytes).
//
// Two ways to the samples, one for the rest: written from the database (write_perfetto: kairos-report,
// a run without the format), or streamed (write_perfetto_with_streamed_samples: a run that writes
// the format encodes each sample's packet as its writer commits it, profile_writer::
// stream_perfetto_samples; at exit every stack they use is interned up front and their packets
// follow as they are, so the exit's cost does not grow with the samples).
//
// The interning keys are the database's own ids (a string's, a frame's, a stack's), so a reader can
// check every reference against the database.
//
// Times are the database's, CLOCK_MONOTONIC: the sequence's TracePacketDefaults say so once, and a
// ClockSnapshot pairs that clock with CLOCK_BOOTTIME, Perfetto's trace clock, as the run read them
// (metadata clock.boottime_monotonic_ns): a reader places the trace beside a system trace of the
// same boot. A database without the pair (written before kairos stored it) gives a trace with
// neither, whose times a reader takes as its own clock's, as before.
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "output_helpers.hpp"
#include "perfetto_packets.hpp"
#include "trace_queries.hpp"

namespace kairos::database {
namespace {

using namespace output_helpers;
using namespace trace_queries;

using namespace perfetto;

// Track uuids: a kind in the top bits, the database row (or a dense number) below.
enum class track_kind : std::uint64_t { process = 1, thread, mpi, gpu_api, gpu_stream, windows, counter };
std::uint64_t track_of(track_kind kind, std::int64_t number) {
  return (static_cast<std::uint64_t>(kind) << 48) | static_cast<std::uint64_t>(number);
}

// The file: each packet as Trace's repeated field 1, out a megabyte at a time.
class packet_stream {
 public:
  explicit packet_stream(std::ostream& out) : out_{out} { buffer_.reserve(written_at + 4096); }
  ~packet_stream() { out_ << buffer_; }

  void write(const proto_message& packet) {
    append_packet(buffer_, packet);
    if (buffer_.size() >= written_at) {
      out_ << buffer_;
      buffer_.clear();
    }
  }
  // Packets encoded elsewhere, copied as they are after those written so far.
  void append(std::istream& packets) {
    out_ << buffer_;
    buffer_.resize(written_at);
    for (;;) {
      packets.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
      const auto read = packets.gcount();
      if (read <= 0) break;
      out_.write(buffer_.data(), read);
    }
    buffer_.clear();
  }

 private:
  static constexpr std::size_t written_at = 1 << 20;
  std::ostream& out_;
  std::string buffer_;
};

// One packet being built on the sequence, at `time_ns`; interned data it needs goes in with it.
struct packet_builder {
  proto_message packet, interned, body;

  void start() {
    packet.clear();
    interned.clear();
    body.clear();
  }
  // body_field 0: a packet of interned data only.
  void finish(packet_stream& stream, std::int64_t time_ns, std::uint32_t body_field) {
    event_packet(packet, time_ns, interned, body_field, body);
    stream.write(packet);
  }
};

// Slice and event names, interned as the sequence first needs them.
class event_names {
 public:
  std::uint64_t iid_of(std::string_view name, proto_message& interned) {
    if (const auto found = iids_.find(name); found != iids_.end()) return found->second;
    const auto iid = static_cast<std::uint64_t>(iids_.size()) + 1;
    iids_.emplace(std::string{name}, iid);
    proto_message entry;
    entry.varint(field::iid, iid).bytes(field::event_name_name, name);
    interned.message(field::interned_event_names, entry);
    return iid;
  }

 private:
  std::map<std::string, std::uint64_t, std::less<>> iids_;
};

class trace_writer {
 public:
  trace_writer(connection& profile, std::ostream& out) : stacks_{profile}, stream_{out} {}

  void descriptor(const proto_message& track, std::int64_t time_ns) {
    proto_message packet;
    packet.varint(field::timestamp, static_cast<std::uint64_t>(time_ns));
    packet.varint(field::trusted_packet_sequence_id, sequence_id);
    packet.varint(field::sequence_flags, needs_incremental_state);  // its time's clock is the defaults'
    packet.message(field::track_descriptor, track);
    stream_.write(packet);
  }

  void slice_edge(std::uint64_t track, std::int64_t time_ns, std::uint64_t type, std::string_view name = {}) {
    builder_.start();
    builder_.body.varint(field::event_type, type).varint(field::event_track_uuid, track);
    if (type == slice_begin) builder_.body.varint(field::event_name_iid, names_.iid_of(name, builder_.interned));
    builder_.finish(stream_, time_ns, field::track_event);
  }
  void slice(std::uint64_t track, std::int64_t start_ns, std::int64_t end_ns, std::string_view name) {
    slice_edge(track, start_ns, slice_begin, name);
    slice_edge(track, end_ns, slice_end);
  }

  void counter(std::uint64_t track, std::int64_t time_ns, double value) {
    builder_.start();
    builder_.body.varint(field::event_type, counter_event)
        .varint(field::event_track_uuid, track)
        .real(field::event_double_counter_value, value);
    builder_.finish(stream_, time_ns, field::track_event);
  }

  void sample(std::int64_t pid, std::int64_t tid, std::int64_t time_ns, std::int64_t stack, std::int64_t weight_ns) {
    builder_.start();
    intern_callstack(stack, builder_.interned);
    perf_sample_body(builder_.body, pid, tid, stack, weight_ns);
    builder_.finish(stream_, time_ns, field::perf_sample);
  }

  // Each of `stacks` interned, with what it needs, in packets of their own at `time_ns` (as few
  // as their size allows: one for most programs' stacks).
  void intern_callstacks(const std::vector<std::int64_t>& stacks, std::int64_t time_ns) {
    builder_.start();
    auto send = [&] {
      if (!builder_.interned.empty()) builder_.finish(stream_, time_ns, 0);
      builder_.start();
    };
    for (const auto stack : stacks) {
      intern_callstack(stack, builder_.interned);
      if (builder_.interned.data().size() >= interned_packet_bytes) send();
    }
    send();
  }

  // Sample packets encoded as the run went (perfetto_packets.hpp's sample_encoder), whose call
  // stacks the sequence has had.
  void append_samples(std::istream& packets) { stream_.append(packets); }

  // The first packets: the clocks paired, when the run read them (before any time a reader must
  // convert), then the start of the sequence's interned state and its defaults. The timestamps'
  // clock is declared once there rather than on each packet (3 bytes a sample); Perfetto's reader
  // takes a packet's clock from the sequence's defaults when the packet names none
  // (src/trace_processor/importers/proto/proto_trace_reader.cc, TimestampTokenizeAndPushToSorter).
  // The samples' timebase is named for what their weights are: the thread's CPU time, in us (it
  // names no PerfEvents counter, whose unit Perfetto would take as ns).
  void start_sequence(std::int64_t time_ns, const std::optional<clock_pair>& clocks) {
    proto_message packet, defaults, perf_defaults, timebase;
    if (clocks) {
      proto_message snapshot, boottime, monotonic;
      boottime.varint(field::clock_id, clock_boottime)
          .varint(field::clock_timestamp, static_cast<std::uint64_t>(clocks->boottime_ns));
      monotonic.varint(field::clock_id, clock_monotonic)
          .varint(field::clock_timestamp, static_cast<std::uint64_t>(clocks->monotonic_ns));
      snapshot.message(field::snapshot_clocks, boottime)
          .message(field::snapshot_clocks, monotonic)
          .varint(field::snapshot_primary_trace_clock, clock_boottime);
      packet.varint(field::trusted_packet_sequence_id, sequence_id).message(field::clock_snapshot, snapshot);
      stream_.write(packet);
      packet.clear();
      defaults.varint(field::defaults_timestamp_clock_id, clock_monotonic);
    }
    timebase.bytes(field::timebase_name_field, timebase_name);
    perf_defaults.message(field::perf_defaults_timebase, timebase);
    defaults.message(field::defaults_perf_sample, perf_defaults);
    packet.varint(field::timestamp, static_cast<std::uint64_t>(time_ns));
    packet.varint(field::trusted_packet_sequence_id, sequence_id);
    packet.varint(field::sequence_flags, incremental_state_cleared);
    packet.message(field::trace_packet_defaults, defaults);
    stream_.write(packet);
  }

 private:
  // An interning packet's size past which the next stack goes in another: a reader never meets a
  // packet of many megabytes.
  static constexpr std::size_t interned_packet_bytes = 1 << 20;

  // The placeholder mapping's iid, and its path's: past every string's id.
  std::int64_t unmapped() {
    if (!unmapped_) unmapped_ = stacks_.past_last_string();
    return *unmapped_;
  }

  const frame_row& frame(std::int64_t id) {
    if (const auto found = frames_.find(id); found != frames_.end()) return found->second;
    return frames_.emplace(id, stacks_.frame(id)).first->second;
  }

  void intern_string(std::unordered_set<std::int64_t>& sent, std::uint32_t table, std::int64_t id,
                     proto_message& interned) {
    if (!sent.insert(id).second) return;
    proto_message entry;
    entry.varint(field::iid, static_cast<std::uint64_t>(id))
        .bytes(field::interned_string_str, id == unmapped() ? std::string{unmapped_path} : stacks_.text(id));
    interned.message(table, entry);
  }

  // The mapping `module` (a string's id; unmapped(), the placeholder), with its path, once.
  void intern_mapping(std::int64_t module, proto_message& interned) {
    if (!sent_mappings_.insert(module).second) return;
    intern_string(sent_mapping_paths_, field::interned_mapping_paths, module, interned);
    proto_message mapping;
    mapping.varint(field::iid, static_cast<std::uint64_t>(module))
        .varint(field::mapping_path_string_ids, static_cast<std::uint64_t>(module));
    interned.message(field::interned_mappings, mapping);
  }

  // The stack's callstack (root frame first) and every frame, function name and mapping it needs
  // that the sequence has not had yet.
  void intern_callstack(std::int64_t stack, proto_message& interned) {
    if (sent_callstacks_.contains(stack)) return;
    const auto& stack_nodes = stacks_.nodes();
    std::vector<std::int64_t> frames;  // leaf first
    for (auto node = stack; node != 0;) {
      const auto found = stack_nodes.find(node);
      if (found == stack_nodes.end()) break;
      frames.push_back(found->second.second);
      node = found->second.first;
    }
    // InternedData's repeated fields may come in any order; a reader resolves them all before the
    // packet's body. Function names and mappings first reads the most naturally.
    proto_message callstack;
    callstack.varint(field::iid, static_cast<std::uint64_t>(stack));
    for (auto frame_id = frames.rbegin(); frame_id != frames.rend(); ++frame_id) {
      callstack.varint(field::callstack_frame_ids, static_cast<std::uint64_t>(*frame_id));
      if (!sent_frames_.insert(*frame_id).second) continue;
      const auto row = frame(*frame_id);
      intern_string(sent_function_names_, field::interned_function_names, row.function, interned);
      // Every frame has a mapping: a trace processor before Perfetto v53 drops a whole stack with
      // one frame of mapping_id 0 (stack_profile_sequence_state.cc, FindOrInsertFrame). Those with
      // no module share the placeholder, `[unknown]` as perf names one.
      const auto module = row.module != 0 ? row.module : unmapped();
      intern_mapping(module, interned);
      // A mapping's frames are told apart by rel_pc and name (virtual_memory_mapping.cc,
      // InternFrameImpl). A Python frame (its mapping its source file) has no address: its line
      // stands in, so that each line stays a frame of its own, as in the database.
      const bool python = row.language == "python";
      proto_message entry;
      entry.varint(field::iid, static_cast<std::uint64_t>(*frame_id))
          .varint(field::frame_function_name_id, static_cast<std::uint64_t>(row.function))
          .varint(field::frame_mapping_id, static_cast<std::uint64_t>(module))
          .varint(field::frame_rel_pc, static_cast<std::uint64_t>(python ? row.line : row.offset));
      // Source file and line where the database has them (a Python frame's, a native one's with
      // source lines on): read from Perfetto v53 on, skipped as unknown fields before.
      if (row.file != 0) {
        intern_string(sent_source_paths_, field::interned_source_paths, row.file, interned);
        entry.varint(field::frame_source_path_iid, static_cast<std::uint64_t>(row.file));
      }
      if (row.line != 0) entry.varint(field::frame_line_number, static_cast<std::uint64_t>(row.line));
      if (python) entry.varint(field::frame_kind, frame_interpreted);
      if (row.language == "jit") entry.varint(field::frame_kind, frame_jit);
      interned.message(field::interned_frames, entry);
    }
    interned.message(field::interned_callstacks, callstack);
    sent_callstacks_.insert(stack);
  }

  static constexpr std::string_view unmapped_path = "[unknown]";

  stack_reader stacks_;
  packet_stream stream_;
  packet_builder builder_;
  event_names names_;
  std::optional<std::int64_t> unmapped_;  // the placeholder mapping's iid, once asked
  std::unordered_map<std::int64_t, frame_row> frames_;
  std::unordered_set<std::int64_t> sent_callstacks_, sent_frames_, sent_function_names_, sent_mapping_paths_,
      sent_source_paths_, sent_mappings_;
};

// The tracks the trace's contents go on, and what every section needs to make more.
struct trace_tracks {
  std::int64_t origin_ns = 0;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> pid_tid;  // thread.id → (pid, tid)
  std::map<std::int64_t, std::int64_t> pid_of_process;                    // process.id → pid
  std::int64_t first_process = 1;  // the lowest process.id: the windows' and stray counters' parent

  // A named track under `parent`.
  std::uint64_t child(trace_writer& trace, track_kind kind, std::int64_t number, std::uint64_t parent,
                      std::string_view name) const {
    proto_message track;
    track.varint(field::track_uuid, track_of(kind, number))
        .varint(field::track_parent_uuid, parent)
        .bytes(field::track_name, name);
    trace.descriptor(track, origin_ns);
    return track_of(kind, number);
  }
};

// Processes (a merged launch's named by rank first) and their threads.
trace_tracks write_process_tracks(trace_writer& trace, connection& profile, std::int64_t origin_ns) {
  trace_tracks tracks{origin_ns, {}, {}, 1};
  for (const auto& row : process_tracks(profile)) {
    tracks.pid_of_process[row.id] = row.pid;
    proto_message process, track;
    process.varint(field::process_pid, static_cast<std::uint64_t>(row.pid))
        .bytes(field::process_name, row.track_name());
    track.varint(field::track_uuid, track_of(track_kind::process, row.id)).message(field::track_process, process);
    trace.descriptor(track, origin_ns);
  }
  for (const auto& row : thread_tracks(profile)) {
    tracks.pid_tid[row.id] = {row.pid, row.tid};
    proto_message thread, track;
    thread.varint(field::thread_pid, static_cast<std::uint64_t>(row.pid))
        .varint(field::thread_tid, static_cast<std::uint64_t>(row.tid))
        .bytes(field::thread_name, row.track_name());
    track.varint(field::track_uuid, track_of(track_kind::thread, row.id))
        .varint(field::track_parent_uuid, track_of(track_kind::process, row.process))
        .message(field::track_thread, thread);
    trace.descriptor(track, origin_ns);
  }
  if (!tracks.pid_of_process.empty()) tracks.first_process = tracks.pid_of_process.begin()->first;
  return tracks;
}

// The windows, on a track of their own under the first process.
void write_windows(trace_writer& trace, const trace_tracks& tracks, const std::vector<window_row>& windows) {
  if (windows.empty()) return;
  const auto track = tracks.child(trace, track_kind::windows, tracks.first_process,
                                  track_of(track_kind::process, tracks.first_process), "kairos time windows");
  for (const auto& window : windows)
    if (window.opened) trace.slice(track, window.start_ns, window.end_ns, fmt::format("window {}", window.ordinal));
}

// A region's begin, held back until no region still to come can end at or after its start: at one
// timestamp a reader must see an end before the next begin, and a parent's begin before its child's
// (Perfetto orders a sequence's events by timestamp, those at one time as they were written).
struct held_begin {
  std::int64_t start_ns;
  std::size_t depth;
  std::string name;
};

// Regions and instrumented functions on their thread's track, each begin held back (held_begin).
void write_regions(trace_writer& trace, const trace_tracks& tracks, connection& profile, const window_range& range) {
  std::int64_t current_thread = -1;
  std::uint64_t track = 0;
  std::vector<held_begin> held;
  auto release_begins = [&](std::optional<std::int64_t> after_ns) {
    auto due = std::partition(held.begin(), held.end(),
                              [&](const held_begin& begin) { return after_ns && begin.start_ns <= *after_ns; });
    std::sort(due, held.end(), [](const held_begin& a, const held_begin& b) {
      return std::tie(a.start_ns, a.depth) < std::tie(b.start_ns, b.depth);
    });
    for (auto begin = due; begin != held.end(); ++begin)
      trace.slice_edge(track, begin->start_ns, slice_begin, begin->name);
    held.erase(due, held.end());
  };
  for_each_region(profile, range, [&](const region_visit& region) {
    if (region.thread != current_thread) {
      release_begins(std::nullopt);
      current_thread = region.thread;
      track = tracks.pid_tid.contains(region.thread) ? track_of(track_kind::thread, region.thread) : 0;
    }
    if (track == 0) return;  // as the regions view's JOIN with threads
    release_begins(region.end_ns);
    if (region.start_ns >= region.end_ns) {
      trace.slice(track, region.start_ns, region.end_ns, region.name);
      return;
    }
    trace.slice_edge(track, region.end_ns, slice_end);
    held.push_back({region.start_ns, region.depth, std::string{region.name}});
  });
  release_begins(std::nullopt);
}

// MPI calls and GPU API calls on a track under their thread's, in time order.
void write_calls(trace_writer& trace, const trace_tracks& tracks, connection& profile, const window_range& range) {
  std::map<std::pair<track_kind, std::int64_t>, std::uint64_t> call_tracks;
  auto slice_on = [&](track_kind kind, const call_row& call) {
    if (!tracks.pid_tid.contains(call.thread)) return;
    const auto [found, added] = call_tracks.try_emplace({kind, call.thread}, 0);
    if (added)
      found->second = tracks.child(trace, kind, call.thread, track_of(track_kind::thread, call.thread),
                                   kind == track_kind::mpi ? "MPI calls" : "GPU API calls");
    trace.slice(found->second, call.start_ns, call.end_ns, call.name);
  };
  for_each_mpi_call(profile, range, [&](const call_row& call) { slice_on(track_kind::mpi, call); });
  for_each_gpu_api_call(profile, range, [&](const call_row& call) { slice_on(track_kind::gpu_api, call); });
}

// GPU kernels and copies: a track a (device, stream), under the process.
void write_gpu_work(trace_writer& trace, const trace_tracks& tracks, connection& profile, const window_range& range) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::uint64_t> stream_tracks;
  for_each_gpu_work(profile, range, [&](const gpu_work_row& work) {
    auto [found, added] = stream_tracks.try_emplace({work.process, work.device, work.stream}, 0);
    if (added)
      found->second = tracks.child(trace, track_kind::gpu_stream, static_cast<std::int64_t>(stream_tracks.size()),
                                   track_of(track_kind::process, work.process), work.stream_name());
    trace.slice(found->second, work.start_ns, work.end_ns,
                work.kernel ? std::string{work.name} : fmt::format("copy {}", work.name));
  });
}

// The unit a metric's name ends in: memory_resident_bytes, cpu_percent, read_bytes_per_s.
std::string_view unit_of(std::string_view metric) {
  return metric.ends_with("_bytes_per_s") ? std::string_view{"bytes/s"}
         : metric.ends_with("_per_s")     ? std::string_view{"1/s"}
                                          : metric.substr(metric.rfind('_') + 1);
}

// Process sampling: a counter track a series, under its process.
void write_counters(trace_writer& trace, const trace_tracks& tracks, connection& profile, const window_range& range) {
  std::map<std::int64_t, std::int64_t> process_of_pid;
  for (const auto& [process, pid] : tracks.pid_of_process) process_of_pid.emplace(pid, process);
  std::vector<std::uint64_t> counter_tracks;
  for_each_metric_value(profile, range, [&](const metric_series& series, std::int64_t time_ns, double value) {
    if (static_cast<std::size_t>(series.ordinal) >= counter_tracks.size()) {
      counter_tracks.resize(static_cast<std::size_t>(series.ordinal) + 1, 0);
      proto_message counter, descriptor;
      counter.bytes(field::counter_unit_name, unit_of(series.metric));
      const auto process = process_of_pid.contains(series.pid) ? process_of_pid.at(series.pid) : tracks.first_process;
      descriptor.varint(field::track_uuid, track_of(track_kind::counter, series.ordinal))
          .varint(field::track_parent_uuid, track_of(track_kind::process, process))
          .bytes(field::track_name, series.name)
          .message(field::track_counter, counter);
      trace.descriptor(descriptor, tracks.origin_ns);
      counter_tracks[static_cast<std::size_t>(series.ordinal)] = track_of(track_kind::counter, series.ordinal);
    }
    trace.counter(counter_tracks[static_cast<std::size_t>(series.ordinal)], time_ns, value);
  });
}

// Everything but the CPU samples: the sequence's start, the tracks, the windows, regions, calls,
// GPU work and process sampling's counters.
trace_tracks write_all_but_samples(trace_writer& trace, connection& profile, const window_range& range) {
  const auto origin_ns = earliest_event_ns(profile);
  trace.start_sequence(origin_ns, run_clocks(profile));
  const auto tracks = write_process_tracks(trace, profile, origin_ns);
  write_windows(trace, tracks, windows_in(profile, range));
  write_regions(trace, tracks, profile, range);
  write_calls(trace, tracks, profile, range);
  write_gpu_work(trace, tracks, profile, range);
  write_counters(trace, tracks, profile, range);
  return tracks;
}

}  // namespace

void write_perfetto(connection& profile, std::ostream& out, const window_range& range) {
  trace_writer trace{profile, out};
  const auto tracks = write_all_but_samples(trace, profile, range);
  // CPU samples in the order they were stored, each with its interned call stack.
  for_each_sample(profile, range, [&](const sample_fields& sample) {
    if (sample.stack == 0) return;  // no stack to show
    const auto owner = tracks.pid_tid.find(sample.thread);
    if (owner == tracks.pid_tid.end()) return;
    trace.sample(owner->second.first, owner->second.second, sample.time_ns, sample.stack, sample.weight_ns);
  });
}

void write_perfetto_with_streamed_samples(connection& profile, std::ostream& out, std::istream& samples) {
  trace_writer trace{profile, out};
  const auto tracks = write_all_but_samples(trace, profile, {});
  // Every stack a sample was counted under (stack_total, as the samples' commits left it), then
  // the samples, as the writer encoded them in the order it stored them.
  trace.intern_callstacks(sampled_stacks(profile), tracks.origin_ns);
  trace.append_samples(samples);
}

}  // namespace kairos::database
