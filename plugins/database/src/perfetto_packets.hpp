#pragma once
// Perfetto's trace packets as kairos writes them, the pieces two writers share: the trace's writer
// (perfetto.cpp) and the profile writer (writer.cpp), which encodes the CPU samples' packets as it
// commits them when the run writes a Perfetto trace (profile_writer::stream_perfetto_samples). A
// sample's packet is encoded here only, so a trace whose samples were streamed holds the bytes the
// trace written from the database would.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "proto_encoder.hpp"

namespace kairos::database::perfetto {

// Field numbers and enum values of Perfetto's published protos, for the messages kairos writes; each
// names its file under protos/perfetto/ (perfetto_schema.py, the tests' decoder, says the same).
namespace field {
constexpr std::uint32_t trace_packet = 1;  // trace/trace.proto: Trace
// trace/trace_packet.proto: TracePacket
constexpr std::uint32_t clock_snapshot = 6, timestamp = 8, trusted_packet_sequence_id = 10, track_event = 11,
                        interned_data = 12, sequence_flags = 13, trace_packet_defaults = 59, track_descriptor = 60,
                        perf_sample = 66;
// trace/trace_packet_defaults.proto: TracePacketDefaults; profiling/profile_packet.proto: PerfSampleDefaults;
// common/perf_events.proto: PerfEvents.Timebase
constexpr std::uint32_t defaults_timestamp_clock_id = 58, defaults_perf_sample = 12;
constexpr std::uint32_t perf_defaults_timebase = 1;
constexpr std::uint32_t timebase_name_field = 10;
// trace/clock_snapshot.proto: ClockSnapshot, ClockSnapshot.Clock
constexpr std::uint32_t snapshot_clocks = 1, snapshot_primary_trace_clock = 2;
constexpr std::uint32_t clock_id = 1, clock_timestamp = 2;
// trace/track_event/track_descriptor.proto: TrackDescriptor; process_descriptor.proto,
// thread_descriptor.proto, counter_descriptor.proto: ProcessDescriptor, ThreadDescriptor, CounterDescriptor
constexpr std::uint32_t track_uuid = 1, track_name = 2, track_process = 3, track_thread = 4, track_parent_uuid = 5,
                        track_counter = 8;
constexpr std::uint32_t process_pid = 1, process_name = 6;
constexpr std::uint32_t thread_pid = 1, thread_tid = 2, thread_name = 5;
constexpr std::uint32_t counter_unit_name = 6;
// trace/track_event/track_event.proto: TrackEvent
constexpr std::uint32_t event_type = 9, event_name_iid = 10, event_track_uuid = 11, event_double_counter_value = 44;
// trace/interned_data/interned_data.proto: InternedData; track_event.proto: EventName;
// trace/profiling/profile_common.proto: InternedString, Mapping, Frame, Callstack
constexpr std::uint32_t interned_event_names = 2, interned_function_names = 5, interned_frames = 6,
                        interned_callstacks = 7, interned_mapping_paths = 17, interned_source_paths = 18,
                        interned_mappings = 19;
constexpr std::uint32_t iid = 1, event_name_name = 2, interned_string_str = 2;
constexpr std::uint32_t mapping_path_string_ids = 7;
constexpr std::uint32_t frame_function_name_id = 2, frame_mapping_id = 3, frame_rel_pc = 4, frame_source_path_iid = 5,
                        frame_line_number = 6, frame_kind = 7;
constexpr std::uint32_t callstack_frame_ids = 2;
// trace/profiling/profile_packet.proto: PerfSample
constexpr std::uint32_t sample_pid = 2, sample_tid = 3, sample_callstack_iid = 4, sample_timebase_count = 6;
}  // namespace field

constexpr std::uint64_t sequence_id = 1;
constexpr std::uint64_t incremental_state_cleared = 1, needs_incremental_state = 2;  // TracePacket.SequenceFlags
constexpr std::uint64_t slice_begin = 1, slice_end = 2, counter_event = 4;           // TrackEvent.Type
constexpr std::uint64_t clock_monotonic = 3, clock_boottime = 6;  // common/builtin_clock.proto: BuiltinClock
constexpr std::uint64_t frame_interpreted = 3, frame_jit = 4;     // Frame.Kind: KIND_INTERPRETED, KIND_JIT

// `packet` as one of Trace's repeated field 1, at the end of `out`.
inline void append_packet(std::string& out, const proto_message& packet) {
  out.push_back(static_cast<char>(field::trace_packet << 3 | 2));  // length-delimited
  std::uint64_t length = packet.data().size();
  while (length >= 0x80) {
    out.push_back(static_cast<char>((length & 0x7f) | 0x80));
    length >>= 7;
  }
  out.push_back(static_cast<char>(length));
  out += packet.data();
}

// A packet on the sequence at `time_ns` that needs its interned state: `interned` (none when
// empty) and `body` as field `body_field` (none when 0).
inline void event_packet(proto_message& packet, std::int64_t time_ns, const proto_message& interned,
                         std::uint32_t body_field, const proto_message& body) {
  packet.clear();
  packet.varint(field::timestamp, static_cast<std::uint64_t>(time_ns));
  packet.varint(field::trusted_packet_sequence_id, sequence_id);
  packet.varint(field::sequence_flags, needs_incremental_state);
  if (!interned.empty()) packet.message(field::interned_data, interned);
  if (body_field != 0) packet.message(body_field, body);
}

// A CPU sample's PerfSample body; its callstack's iid is the stack's row id. The sample's weight,
// the CPU time it stands for, is its timebase_count: Perfetto's importer reads that field
// (src/trace_processor/importers/proto/profile_module.cc, ProfileModule::ParsePerfSample) as a
// value of the sequence's timebase counter, the one TracePacketDefaults names (timebase_name,
// start_sequence), and its UI weighs the flame graph by those values, summed per call site
// (ui/src/plugins/dev.perfetto.StackSamples/index.ts, _callstacks_for_callsites_weighted). The
// field's comment in profile_packet.proto calls it cumulative, as traced_perf reads it from the
// kernel; kairos writes each sample's own share, which is what that sum needs. No other
// PerfSample field carries a weight. In microseconds, rounded: 2 bytes where nanoseconds take 3
// or 4, which keeps a sample's packet within 30 bytes.
constexpr std::string_view timebase_name = "task-clock (us)";
constexpr std::uint64_t weight_us(std::int64_t weight_ns) {
  return (static_cast<std::uint64_t>(std::max<std::int64_t>(weight_ns, 0)) + 500) / 1000;
}
inline void perf_sample_body(proto_message& body, std::int64_t pid, std::int64_t tid, std::int64_t stack,
                             std::int64_t weight_ns) {
  body.clear();
  body.varint(field::sample_pid, static_cast<std::uint64_t>(pid))
      .varint(field::sample_tid, static_cast<std::uint64_t>(tid))
      .varint(field::sample_callstack_iid, static_cast<std::uint64_t>(stack))
      .varint(field::sample_timebase_count, weight_us(weight_ns));
}

// A sample's whole packet, its callstack interned before it, appended to `out`: what the profile
// writer streams, the bytes event_packet and perf_sample_body give (database_tests.cpp checks),
// written straight into `out` in one append, a fifth of the cost of building it through
// proto_messages (docs/performance.md, "Database").
struct sample_encoder {
  void append(std::string& out, std::int64_t pid, std::int64_t tid, std::int64_t time_ns, std::int64_t stack,
              std::int64_t weight_ns) {
    char body[4 * (1 + 10)];
    char* body_end = body;
    body_end = put(body_end, field::sample_pid, 0, static_cast<std::uint64_t>(pid));
    body_end = put(body_end, field::sample_tid, 0, static_cast<std::uint64_t>(tid));
    body_end = put(body_end, field::sample_callstack_iid, 0, static_cast<std::uint64_t>(stack));
    body_end = put(body_end, field::sample_timebase_count, 0, weight_us(weight_ns));
    // The packet, after its key and its length: under 128 bytes, a length of one byte.
    char framed[2 + 3 * (1 + 10) + 2 + 1 + sizeof body];
    static_assert(sizeof framed - 2 < 128);
    char* packet = framed + 2;
    char* packet_end = packet;
    packet_end = put(packet_end, field::timestamp, 0, static_cast<std::uint64_t>(time_ns));
    packet_end = put(packet_end, field::trusted_packet_sequence_id, 0, sequence_id);
    packet_end = put(packet_end, field::sequence_flags, 0, needs_incremental_state);
    packet_end = put(packet_end, field::perf_sample, 2, static_cast<std::uint64_t>(body_end - body));
    packet_end = std::copy(body, body_end, packet_end);
    framed[0] = static_cast<char>(field::trace_packet << 3 | 2);
    framed[1] = static_cast<char>(packet_end - packet);
    out.append(framed, packet_end);
  }

 private:
  static char* varint(char* at, std::uint64_t value) {
    while (value >= 0x80) {
      *at++ = static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    *at++ = static_cast<char>(value);
    return at;
  }
  // A field's key, then `value` (a varint, or a length-delimited field's length).
  static char* put(char* at, std::uint32_t field, std::uint32_t wire_type, std::uint64_t value) {
    return varint(varint(at, (std::uint64_t{field} << 3) | wire_type), value);
  }
};

}  // namespace kairos::database::perfetto
