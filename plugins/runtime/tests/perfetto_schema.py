"""The messages of Perfetto's trace format that kairos writes (plugins/database/src/perfetto.cpp), as
a protobuf schema built in memory: each message's fields with the numbers Perfetto publishes, each
message naming the file under protos/perfetto/ that defines it (and so its fields' numbers). Written
here from those files, not copied: a file that decodes against it decodes against Perfetto's.
Nested messages are flattened (ClockSnapshot.Clock is Clock here, PerfEvents.Timebase is Timebase):
a name does not reach the wire.

decode(bytes) gives a Trace message; it needs python3-protobuf (Debian), tried from the running
interpreter and then from Debian's own dist-packages.
"""
import sys

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        descriptor_pb2 = None

# message: (its file under protos/perfetto/, [(field, number, type, label)]); type is a scalar's
# name or a message of this table.
MESSAGES = {
    "Trace": ("trace/trace.proto", [("packet", 1, "TracePacket", "repeated")]),
    "TracePacket": ("trace/trace_packet.proto", [
        ("clock_snapshot", 6, "ClockSnapshot", "optional"),
        ("timestamp", 8, "uint64", "optional"),
        ("trusted_packet_sequence_id", 10, "uint32", "optional"),
        ("track_event", 11, "TrackEvent", "optional"),
        ("interned_data", 12, "InternedData", "optional"),
        ("sequence_flags", 13, "uint32", "optional"),
        ("timestamp_clock_id", 58, "uint32", "optional"),
        ("trace_packet_defaults", 59, "TracePacketDefaults", "optional"),
        ("track_descriptor", 60, "TrackDescriptor", "optional"),
        ("perf_sample", 66, "PerfSample", "optional"),
    ]),
    "TracePacketDefaults": ("trace/trace_packet_defaults.proto", [
        ("perf_sample_defaults", 12, "PerfSampleDefaults", "optional"),
        ("timestamp_clock_id", 58, "uint32", "optional"),
    ]),
    "PerfSampleDefaults": ("trace/profiling/profile_packet.proto", [("timebase", 1, "Timebase", "optional")]),
    "Timebase": ("common/perf_events.proto", [("counter", 4, "int32", "optional"), ("name", 10, "string", "optional")]),
    "ClockSnapshot": ("trace/clock_snapshot.proto", [("clocks", 1, "Clock", "repeated"),
                                                    ("primary_trace_clock", 2, "int32", "optional")]),
    "Clock": ("trace/clock_snapshot.proto", [("clock_id", 1, "uint32", "optional"),
                                            ("timestamp", 2, "uint64", "optional")]),
    "TrackDescriptor": ("trace/track_event/track_descriptor.proto", [
        ("uuid", 1, "uint64", "optional"),
        ("name", 2, "string", "optional"),
        ("process", 3, "ProcessDescriptor", "optional"),
        ("thread", 4, "ThreadDescriptor", "optional"),
        ("parent_uuid", 5, "uint64", "optional"),
        ("counter", 8, "CounterDescriptor", "optional"),
    ]),
    "ProcessDescriptor": ("trace/track_event/process_descriptor.proto",
                          [("pid", 1, "int32", "optional"), ("process_name", 6, "string", "optional")]),
    "ThreadDescriptor": ("trace/track_event/thread_descriptor.proto",
                         [("pid", 1, "int32", "optional"), ("tid", 2, "int64", "optional"),
                          ("thread_name", 5, "string", "optional")]),
    "CounterDescriptor": ("trace/track_event/counter_descriptor.proto",
                          [("unit", 3, "int32", "optional"), ("unit_name", 6, "string", "optional")]),
    "TrackEvent": ("trace/track_event/track_event.proto", [
        ("type", 9, "int32", "optional"),
        ("name_iid", 10, "uint64", "optional"),
        ("track_uuid", 11, "uint64", "optional"),
        ("name", 23, "string", "optional"),
        ("counter_value", 30, "int64", "optional"),
        ("double_counter_value", 44, "double", "optional"),
    ]),
    "InternedData": ("trace/interned_data/interned_data.proto", [
        ("event_names", 2, "EventName", "repeated"),
        ("function_names", 5, "InternedString", "repeated"),
        ("frames", 6, "Frame", "repeated"),
        ("callstacks", 7, "Callstack", "repeated"),
        ("mapping_paths", 17, "InternedString", "repeated"),
        ("source_paths", 18, "InternedString", "repeated"),
        ("mappings", 19, "Mapping", "repeated"),
    ]),
    "EventName": ("trace/track_event/track_event.proto",
                  [("iid", 1, "uint64", "optional"), ("name", 2, "string", "optional")]),
    "InternedString": ("trace/profiling/profile_common.proto",
                       [("iid", 1, "uint64", "optional"), ("str", 2, "bytes", "optional")]),
    "Mapping": ("trace/profiling/profile_common.proto",
                [("iid", 1, "uint64", "optional"), ("build_id", 2, "uint64", "optional"),
                 ("start_offset", 3, "uint64", "optional"), ("start", 4, "uint64", "optional"),
                 ("end", 5, "uint64", "optional"), ("path_string_ids", 7, "uint64", "repeated")]),
    "Frame": ("trace/profiling/profile_common.proto",
              [("iid", 1, "uint64", "optional"), ("function_name_id", 2, "uint64", "optional"),
               ("mapping_id", 3, "uint64", "optional"), ("rel_pc", 4, "uint64", "optional"),
               ("source_path_iid", 5, "uint64", "optional"), ("line_number", 6, "uint32", "optional"),
               ("kind", 7, "int32", "optional")]),
    "Callstack": ("trace/profiling/profile_common.proto",
                  [("iid", 1, "uint64", "optional"), ("frame_ids", 2, "uint64", "repeated")]),
    "PerfSample": ("trace/profiling/profile_packet.proto",
                   [("cpu", 1, "uint32", "optional"), ("pid", 2, "uint32", "optional"),
                    ("tid", 3, "uint32", "optional"), ("callstack_iid", 4, "uint64", "optional"),
                    ("cpu_mode", 5, "int32", "optional"), ("timebase_count", 6, "uint64", "optional")]),
}

# TracePacket.SequenceFlags, TrackEvent.Type (their messages' files); BuiltinClock
# (common/builtin_clock.proto); Frame.Kind
# (trace/profiling/profile_common.proto)
SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
CLOCK_MONOTONIC, CLOCK_BOOTTIME = 3, 6
KIND_INTERPRETED, KIND_JIT = 3, 4

_trace_class = None


def available():
    return descriptor_pb2 is not None


def _build():
    scalar = descriptor_pb2.FieldDescriptorProto
    types = {"uint64": scalar.TYPE_UINT64, "uint32": scalar.TYPE_UINT32, "int64": scalar.TYPE_INT64,
             "int32": scalar.TYPE_INT32, "double": scalar.TYPE_DOUBLE, "string": scalar.TYPE_STRING,
             "bytes": scalar.TYPE_BYTES}
    labels = {"optional": scalar.LABEL_OPTIONAL, "repeated": scalar.LABEL_REPEATED}
    file = descriptor_pb2.FileDescriptorProto(name="kairos_perfetto_subset.proto", package="perfetto.protos",
                                              syntax="proto2")
    for name, (_, fields) in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, kind, label in fields:
            entry = message.field.add(name=field, number=number, label=labels[label])
            if kind in types:
                entry.type = types[kind]
            else:
                entry.type = scalar.TYPE_MESSAGE
                entry.type_name = f".perfetto.protos.{kind}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("perfetto.protos.Trace")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def decode(data):
    global _trace_class
    if _trace_class is None:
        _trace_class = _build()
    trace = _trace_class()
    trace.ParseFromString(data)
    return trace


def unknown_fields(message):
    """Every field the schema does not know, anywhere in `message`: a writer's typo in a number."""
    found = []
    if hasattr(message, "UnknownFields") and len(message.UnknownFields()):
        found.append(message.DESCRIPTOR.name)
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            for item in (value if field.label == field.LABEL_REPEATED else [value]):
                found += unknown_fields(item)
    return found
