#!/usr/bin/env python3
"""The Perfetto trace (`perfetto` format, <stem>.perfetto-trace), decoded with python3-protobuf
against perfetto_schema.py (Perfetto's published field numbers), and checked against the profile
database it was written from: every interned reference, every track, every count. Also the Chrome
trace's size limit, past which it names the Perfetto file once and adds no more samples.

Run one test: perfetto_tests.py NAME (ctest does, one entry per test). Needs KAIROS_RUN,
KAIROS_REPORT, KAIROS_PHASED_PROGRAM and KAIROS_SAMPLED_PROGRAM in the environment.

No real viewer loads the file here: Perfetto's trace processor and UI are neither Debian packages
nor npm packages (docs/outputs.md, "perfetto").
"""
import collections
import glob
import json
import os
import re
import shutil
import sqlite3
import sys
import time

import perfetto_schema as schema
from harness import check, clean_environment, run_named_test, run_process, skip

KAIROS_RUN = os.environ.get("KAIROS_RUN", "")
KAIROS_REPORT = os.environ.get("KAIROS_REPORT", "")
PHASED = os.environ.get("KAIROS_PHASED_PROGRAM", "")
SAMPLED = os.environ.get("KAIROS_SAMPLED_PROGRAM", "")
TIMEOUT = 60


def environment(**extra):
    return clean_environment({"KAIROS_SAMPLING_DELAY": "0", "KAIROS_OUTPUT_FORMATS": "db,trace,perfetto",
                              "KAIROS_PROCESS_SAMPLING_PERIOD": "0.02"}, **extra)


def kairos(command, directory, **extra):
    result = run_process([KAIROS_RUN, "--", *command], TIMEOUT, cwd=directory, env=environment(**extra))
    check(result.returncode == 0, f"{command} under kairos-run failed: {result.stderr.decode()}")
    return result.stdout.decode(), result.stderr.decode()


def kairos_lines(stderr):
    """kairos's lines but its exit summary ("[kairos] 116 samples, 3 regions on 1 thread; ...")."""
    return [line for line in stderr.splitlines()
            if line.startswith("[kairos]") and not re.match(r"\[kairos\] \d+ samples, ", line)]


def only(pattern, directory):
    found = glob.glob(os.path.join(directory, "kairos-output", pattern))
    check(len(found) == 1, f"one {pattern} expected, found {found}")
    return found[0]


def decoded(path):
    if not schema.available():
        skip("python3-protobuf is not installed (scripts/install-deps.sh installs it)")
    with open(path, "rb") as file:
        data = file.read()
    trace = schema.decode(data)
    check(trace.ByteSize() == len(data), "the whole file is Trace packets, nothing left over")
    check(not schema.unknown_fields(trace), f"every field is one of Perfetto's: {schema.unknown_fields(trace)}")
    return trace, len(data)


class Sequence:
    """The trace read as Perfetto reads a sequence: the clocks paired before any time, interned data
    and tracks before their first use; each use is checked here, in file order."""

    def __init__(self, trace):
        self.names, self.functions, self.paths, self.sources = {}, {}, {}, {}
        self.mappings, self.frames, self.callstacks = {}, {}, {}
        self.tracks = {}
        self.slices = collections.defaultdict(list)  # track uuid: [(start, end, name)]
        self.counters = collections.defaultdict(list)  # track uuid: [(time, value)]
        self.samples = []  # (pid, tid, time, callstack iid, weight)
        open_slices = collections.defaultdict(list)
        packets = list(trace.packet)
        # The clocks paired first (when the database has them), then the sequence's start: its
        # interned state cleared, its defaults (the times' clock, the samples' timebase).
        self.clocks = packets[0].clock_snapshot if packets and packets[0].HasField("clock_snapshot") else None
        check(not any(p.HasField("clock_snapshot") for p in packets[1:]), "one clock snapshot, first")
        start_at = 1 if self.clocks else 0
        start = packets[start_at] if len(packets) > start_at else None
        check(start and start.sequence_flags & schema.SEQ_INCREMENTAL_STATE_CLEARED,
              "the sequence's first packet starts its state")
        self.defaults = start.trace_packet_defaults
        check(not any(p.HasField("trace_packet_defaults") for p in packets[start_at + 1:]), "defaults set once")
        check(not any(p.HasField("timestamp_clock_id") for p in packets), "no packet names a clock of its own")
        if self.clocks:
            check(self.defaults.timestamp_clock_id == schema.CLOCK_MONOTONIC, "the times are CLOCK_MONOTONIC's")
        else:
            check(not self.defaults.HasField("timestamp_clock_id"), "no clock declared without a pair to convert it")
        timebase = self.defaults.perf_sample_defaults.timebase
        check(timebase.name == "task-clock (us)" and not timebase.HasField("counter"),
              "the samples' timebase names its unit, us (a counter's would be taken as ns)")
        events = []  # (time, file order, packet)
        for order, packet in enumerate(packets):
            check(packet.trusted_packet_sequence_id == 1, "one sequence")
            # Past the defaults every packet says it needs the state (trace_packet.proto's rule).
            if order > start_at:
                check(packet.sequence_flags & schema.SEQ_NEEDS_INCREMENTAL_STATE, "a packet needs the state")
            self.intern(packet.interned_data)
            if packet.HasField("track_descriptor"):
                track = packet.track_descriptor
                check(track.uuid not in self.tracks, f"track {track.uuid} described once")
                check(not track.parent_uuid or track.parent_uuid in self.tracks, f"{track.name}: its parent comes first")
                self.tracks[track.uuid] = track
            if packet.HasField("track_event") or packet.HasField("perf_sample"):
                check(packet.sequence_flags & schema.SEQ_NEEDS_INCREMENTAL_STATE, "events say they need the state")
                events.append((packet.timestamp, order, packet))
            if packet.HasField("track_event"):
                event = packet.track_event
                check(event.track_uuid in self.tracks, f"event on track {event.track_uuid} after its descriptor")
                if event.type == schema.TYPE_SLICE_BEGIN:
                    check(event.name_iid in self.names, f"name {event.name_iid} interned before its use")
                if event.type == schema.TYPE_COUNTER:
                    check(self.tracks[event.track_uuid].HasField("counter"), "a counter event on a counter track")
            if packet.HasField("perf_sample"):
                check(packet.perf_sample.callstack_iid in self.callstacks, "callstack interned before its use")
                check(packet.perf_sample.HasField("timebase_count"), "a sample carries its weight")
        # Slices as a reader rebuilds them: events by time, those at one time in file order.
        for time, _, packet in sorted(events, key=lambda entry: entry[:2]):
            if packet.HasField("perf_sample"):
                sample = packet.perf_sample
                self.samples.append((sample.pid, sample.tid, time, sample.callstack_iid, sample.timebase_count))
                continue
            event = packet.track_event
            if event.type == schema.TYPE_SLICE_BEGIN:
                open_slices[event.track_uuid].append((time, self.names[event.name_iid]))
            elif event.type == schema.TYPE_SLICE_END:
                check(open_slices[event.track_uuid], f"an end on track {event.track_uuid} closes an open slice")
                start, name = open_slices[event.track_uuid].pop()
                self.slices[event.track_uuid].append((start, time, name))
            elif event.type == schema.TYPE_COUNTER:
                self.counters[event.track_uuid].append((time, event.double_counter_value))
        check(not any(open_slices.values()), "every slice is closed")

    def intern(self, data):
        def once(table, iid, value, what):
            check(iid != 0 and iid not in table, f"{what} {iid} interned once, nonzero")
            table[iid] = value
        for entry in data.event_names:
            once(self.names, entry.iid, entry.name, "event name")
        for entry in data.function_names:
            once(self.functions, entry.iid, entry.str.decode(), "function name")
        for entry in data.mapping_paths:
            once(self.paths, entry.iid, entry.str.decode(), "mapping path")
        for entry in data.source_paths:
            once(self.sources, entry.iid, entry.str.decode(), "source path")
        for entry in data.mappings:
            check(all(path in self.paths for path in entry.path_string_ids), "a mapping's path is interned")
            once(self.mappings, entry.iid, entry, "mapping")
        for entry in data.frames:
            check(entry.function_name_id in self.functions, "a frame's function name is interned")
            # mapping_id 0 drops the whole stack in a trace processor before Perfetto v53.
            check(entry.mapping_id in self.mappings, "a frame's mapping is interned, every frame has one")
            check(entry.source_path_iid == 0 or entry.source_path_iid in self.sources,
                  "a frame's source path is interned")
            once(self.frames, entry.iid, entry, "frame")
        for entry in data.callstacks:
            check(entry.frame_ids and all(frame in self.frames for frame in entry.frame_ids),
                  "a callstack's frames are interned")
            once(self.callstacks, entry.iid, list(entry.frame_ids), "callstack")

    def frame_keys(self):
        """Perfetto's importer tells a mapping's frames apart by rel_pc and name
        (virtual_memory_mapping.cc, InternFrameImpl): each frame's key."""
        return [(frame.mapping_id, frame.rel_pc, self.functions[frame.function_name_id])
                for frame in self.frames.values()]


def run_phased(directory, **extra):
    out, err = kairos([PHASED, "0.3", "0.05"], directory, **extra)
    connection = sqlite3.connect(only("*.db", directory))
    return connection, only("*.perfetto-trace", directory)


UNMAPPED = "[unknown]"  # the placeholder mapping's path


def check_frames_as_stored(connection, sequence):
    """Interned strings and frames are the database's, by id; a frame with no module is in the
    placeholder mapping, whose iid and path's are past every string's."""
    strings = dict(connection.execute("SELECT id, value FROM string"))
    for iid, text in (list(sequence.functions.items()) + list(sequence.paths.items())
                      + list(sequence.sources.items())):
        check(strings.get(iid) == text or (text == UNMAPPED and iid > max(strings)),
              f"string {iid} is the database's: {text!r}")
    frames = {row[0]: row[1:] for row in connection.execute(
        "SELECT id, function, module, offset, file, line, language FROM frame")}
    for iid, frame in sequence.frames.items():
        function, module, offset, file, line, language = frames[iid]
        check(frame.function_name_id == function, f"frame {iid}'s function as stored")
        if module:
            check(frame.mapping_id == module, f"frame {iid}'s mapping is its module")
        else:
            check(sequence.paths[sequence.mappings[frame.mapping_id].path_string_ids[0]] == UNMAPPED,
                  f"frame {iid}, without a module, in the placeholder mapping")
        # A Python frame has no address: its line is its rel_pc.
        check(frame.rel_pc == ((line or 0) if language == "python" else (offset or 0)), f"frame {iid}'s rel_pc")
        check(frame.source_path_iid == (file or 0) and frame.line_number == (line or 0),
              f"frame {iid}'s source file and line as stored: {file} {line}")
        expected_kind = {"python": schema.KIND_INTERPRETED, "jit": schema.KIND_JIT}.get(language, 0)
        check(frame.kind == expected_kind, f"frame {iid}'s kind ({language})")
    keys = sequence.frame_keys()
    check(len(set(keys)) == len(keys), "no two frames one in Perfetto's frame table")


def weight_us(weight_ns):
    """A sample's weight as its packet carries it: CPU microseconds, rounded."""
    return (max(weight_ns, 0) + 500) // 1000


def clock_pair(connection):
    row = connection.execute("SELECT value FROM metadata WHERE key = 'clock.boottime_monotonic_ns'").fetchone()
    check(row is not None, "the run stored its clock pair")
    boottime, monotonic = (int(number) for number in row[0].split(" "))
    return boottime, monotonic


def test_every_reference_track_and_count_matches_the_database(directory):
    connection, path = run_phased(directory)
    trace, size = decoded(path)
    sequence = Sequence(trace)
    check_frames_as_stored(connection, sequence)
    nodes = {row[0]: (row[1], row[2]) for row in connection.execute("SELECT id, parent, frame FROM stack")}
    for iid, frame_ids in sequence.callstacks.items():
        path_frames, node = [], iid
        while node:
            parent, frame = nodes[node]
            path_frames.append(frame)
            node = parent
        check(frame_ids == path_frames[::-1], f"callstack {iid} is stack {iid}, root first")
    # Every stacked sample, on its thread.
    threads = {row[0]: (row[1], row[2]) for row in connection.execute("SELECT id, pid, tid FROM threads")}
    expected = collections.Counter(
        (*threads[thread], time, stack, weight_us(weight)) for thread, time, stack, weight in
        connection.execute("SELECT thread, time_ns, stack, weight_ns FROM sample WHERE stack IS NOT NULL"))
    check(collections.Counter(sequence.samples) == expected,
          f"the samples are the database's: {len(sequence.samples)} of {sum(expected.values())}")
    check(len(sequence.samples) > 50, f"a run of 0.9 s of CPU has samples: {len(sequence.samples)}")
    # A process track, a track per thread under it; each thread's slices are its regions.
    processes = [t for t in sequence.tracks.values() if t.HasField("process")]
    thread_tracks = {(t.thread.pid, t.thread.tid): t for t in sequence.tracks.values() if t.HasField("thread")}
    check(len(processes) == 1 and set(thread_tracks) == set(threads.values()), "a track per process and thread")
    for thread, (pid, tid) in threads.items():
        regions = sorted(connection.execute(
            "SELECT start_ns, end_ns, name FROM regions WHERE thread = ?", (thread,)))
        check(sorted(sequence.slices[thread_tracks[(pid, tid)].uuid]) == regions,
              f"thread {tid}'s slices are its regions: {regions}")
    check(sum(len(s) for s in sequence.slices.values()) >= 3, "alpha, beta and gamma are slices")
    # Each process-sampling series a counter track, its values the database's.
    counter_tracks = {t.name: t.uuid for t in sequence.tracks.values() if t.HasField("counter")}
    rows = connection.execute("SELECT COUNT(*) FROM process_metric").fetchone()[0]
    check(sum(len(v) for v in sequence.counters.values()) == rows, f"a counter event a row ({rows})")
    resident = [(t, v) for t, v in connection.execute(
        "SELECT time_ns, value FROM process_metrics WHERE metric = 'memory_resident_bytes' ORDER BY time_ns")]
    check(sequence.counters[counter_tracks["memory_resident_bytes"]] == resident, "resident memory as stored")
    check(any(name.startswith("thread_cpu_percent (") for name in counter_tracks), "per-thread CPU tracks")
    print(f"{size} bytes, {len(sequence.samples)} samples, {len(sequence.frames)} frames, "
          f"{len(sequence.callstacks)} callstacks, {len(sequence.tracks)} tracks, {rows} counter values")


def stacks_by_name(sequence):
    """Each sample as (pid, tid, time, weight, its callstack's function names, root first)."""
    def names(iid):
        return tuple(sequence.functions[sequence.frames[frame].function_name_id] for frame in sequence.callstacks[iid])
    return collections.Counter((pid, tid, time, weight, names(iid)) for pid, tid, time, iid, weight in sequence.samples)


def test_streamed_trace_agrees_with_kairos_report(directory):
    """The run encodes its samples' packets as it commits them; kairos-report writes them from the
    database: the same samples on the same threads, with the same stacks."""
    connection, path = run_phased(directory)
    check(not glob.glob(os.path.join(directory, "kairos-output", "*.part")), "the streamed packets' file is gone")
    again = os.path.join(directory, "again.perfetto-trace")
    result = run_process([KAIROS_REPORT, only("*.db", directory), "-f", "perfetto", "-o", again], TIMEOUT)
    check(result.returncode == 0, result.stderr.decode())
    streamed_trace, _ = decoded(path)
    report_trace, _ = decoded(again)
    streamed, reported = Sequence(streamed_trace), Sequence(report_trace)
    # Streamed: the stacks interned up front, the samples' packets carrying none.
    check(not any(p.HasField("perf_sample") and p.HasField("interned_data") for p in streamed_trace.packet),
          "the streamed samples' packets intern nothing")
    check(any(p.HasField("perf_sample") and p.HasField("interned_data") for p in report_trace.packet),
          "kairos-report interns as the samples first need it")
    per_thread = collections.Counter((pid, tid) for pid, tid, *_ in streamed.samples)
    check(per_thread == collections.Counter((pid, tid) for pid, tid, *_ in reported.samples),
          f"the samples per thread agree: {per_thread}")
    check(len(streamed.samples) > 50, f"a run of 0.9 s of CPU has samples: {len(streamed.samples)}")
    check(stacks_by_name(streamed) == stacks_by_name(reported),
          "each sample's weight and stack are the same, frame by frame")
    # Written later, the trace still pairs the clocks as the run read them.
    check(streamed.clocks is not None and streamed.clocks == reported.clocks, "the same clock pair")
    for kind in ("tracks", "slices", "counters"):
        first, second = getattr(streamed, kind), getattr(reported, kind)
        check(set(first) == set(second) and all(
            (first[key] == second[key]) for key in first), f"the same {kind}")


def test_clock_is_declared_and_paired_as_the_run_read_it(directory):
    """The run reads CLOCK_BOOTTIME and CLOCK_MONOTONIC together and stores the pair; the trace
    declares its times CLOCK_MONOTONIC's and pairs the clocks in a ClockSnapshot, so that Perfetto
    converts them to its trace clock, boot time. kairos-report, later, writes the run's pair, not
    one read at report time. A database without the pair gives a trace that declares no clock
    (a clock a reader could not convert would cost every packet)."""
    connection, path = run_phased(directory)
    boottime, monotonic = clock_pair(connection)
    start, end = connection.execute("SELECT start_ns, end_ns FROM process").fetchone()
    check(start <= monotonic <= end, f"the pair was read during the run: {monotonic} in [{start}, {end}]")
    # The clocks part only at a suspend, which this test does not expect: 0.1 s is slack enough.
    offset_now = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    check(abs((boottime - monotonic) - offset_now) < 100_000_000,
          f"boot time less monotonic time as now: {boottime - monotonic} against {offset_now}")
    sequence = Sequence(decoded(path)[0])
    check(sequence.clocks is not None, "the trace pairs the clocks")
    check({clock.clock_id: clock.timestamp for clock in sequence.clocks.clocks}
          == {schema.CLOCK_BOOTTIME: boottime, schema.CLOCK_MONOTONIC: monotonic}, "the run's pair")
    check(sequence.clocks.primary_trace_clock == schema.CLOCK_BOOTTIME, "boot time is the trace's clock")
    later = os.path.join(directory, "later.perfetto-trace")
    result = run_process([KAIROS_REPORT, only("*.db", directory), "-f", "perfetto", "-o", later], TIMEOUT)
    check(result.returncode == 0, result.stderr.decode())
    check(Sequence(decoded(later)[0]).clocks == sequence.clocks, "kairos-report writes the run's pair")
    # A database without the pair: the times as they are, no clock declared (Sequence checks).
    older = os.path.join(directory, "older.db")
    shutil.copy(only("*.db", directory), older)
    with sqlite3.connect(older) as copy:
        copy.execute("DELETE FROM metadata WHERE key = 'clock.boottime_monotonic_ns'")
    unpaired = os.path.join(directory, "unpaired.perfetto-trace")
    result = run_process([KAIROS_REPORT, older, "-f", "perfetto", "-o", unpaired], TIMEOUT)
    check(result.returncode == 0, result.stderr.decode())
    without = Sequence(decoded(unpaired)[0])
    check(without.clocks is None and len(without.samples) == len(sequence.samples), "no pair, every sample")
    # A pair that does not parse is named, with what is accepted.
    with sqlite3.connect(older) as copy:
        copy.execute("INSERT INTO metadata (key, value) VALUES ('clock.boottime_monotonic_ns', 'soon')")
    result = run_process([KAIROS_REPORT, older, "-f", "perfetto", "-o", unpaired], TIMEOUT)
    message = result.stderr.decode()
    check(result.returncode != 0 and "clock.boottime_monotonic_ns" in message and "<boottime_ns> <monotonic_ns>"
          in message, f"a malformed pair is named: {message}")


PYTHON_PROGRAM = r"""
import sys, time

def inner(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

def outer(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        inner(3000)

outer(float(sys.argv[1]))
"""


def test_python_frames_carry_their_source_file_and_line(directory):
    """A Python frame: its source file and line in Frame's own fields (source_path_iid,
    line_number), its kind interpreted, its mapping its file and its line its rel_pc, so that each
    line stays a frame of its own in Perfetto's frame table."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        skip("Debian's python3 is not installed")
    script = os.path.join(directory, "spin.py")
    with open(script, "w") as file:
        file.write(PYTHON_PROGRAM)
    kairos([python, script, "0.5"], directory, KAIROS_PROCESS_SAMPLING="off")
    connection = sqlite3.connect(only("*.db", directory))
    rows = connection.execute(
        "SELECT frame.id, name.value, source.value, frame.line FROM frame JOIN string AS name ON name.id = "
        "frame.function JOIN string AS source ON source.id = frame.file WHERE frame.language = 'python'").fetchall()
    if not rows:
        note = connection.execute("SELECT value FROM metadata WHERE key = 'python.note'").fetchone()
        skip(f"no Python frames were read here: {note[0] if note else 'no note'}")
    sequence = Sequence(decoded(only("*.perfetto-trace", directory))[0])
    check_frames_as_stored(connection, sequence)
    ours = [(iid, name, line) for iid, name, source, line in rows if source == script and iid in sequence.frames]
    check({name.split(" (")[0] for _, name, _ in ours} >= {"inner", "outer"}, f"the script's functions: {ours}")
    for iid, name, line in ours:
        frame = sequence.frames[iid]
        check(sequence.sources[frame.source_path_iid] == script and frame.line_number == line > 0,
              f"{name}: {script}:{line} in the frame's own fields")
        check(sequence.paths[sequence.mappings[frame.mapping_id].path_string_ids[0]] == script,
              f"{name}: its mapping is its file")


def framed_size(packet):
    """A packet's bytes in the file: Trace's field key, its length, the packet."""
    size, length_bytes = packet.ByteSize(), 1
    while size >= 0x80 << 7 * (length_bytes - 1):
        length_bytes += 1
    return 1 + length_bytes + size


def test_a_sample_costs_tens_of_bytes(directory):
    """One thread sampled at 2 kHz: the Perfetto file's bytes a sample against the Chrome trace's.
    A sample's own packet, weight included, stays within 30 bytes: what a long run's file costs a
    sample once its fixed part (tracks, interned stacks) no longer counts."""
    kairos([SAMPLED, "split", "1.5"], directory, KAIROS_SAMPLING_FREQ="2000", KAIROS_PROCESS_SAMPLING="off")
    connection = sqlite3.connect(only("*.db", directory))
    samples = connection.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    trace, size = decoded(only("*.perfetto-trace", directory))
    sequence = Sequence(trace)
    chrome = os.path.getsize(only("*.trace.json", directory))
    per_sample = size / samples
    packets = [packet for packet in trace.packet if packet.HasField("perf_sample")]
    per_packet = sum(framed_size(packet) for packet in packets) / len(packets)
    print(f"{samples} samples: perfetto {size} bytes ({per_sample:.1f} a sample, its own packet {per_packet:.1f}), "
          f"chrome JSON {chrome} bytes ({chrome / samples:.1f} a sample)")
    check(len(sequence.samples) == samples - connection.execute(
        "SELECT COUNT(*) FROM sample WHERE stack IS NULL").fetchone()[0], "every stacked sample")
    check(per_packet <= 30, f"a sample's packet within 30 bytes: {per_packet:.1f}")
    check(per_sample < 40, f"tens of bytes a sample, the whole file: {per_sample:.1f}")
    check(chrome / samples > 3 * per_sample, "a few times smaller than the Chrome trace")


def test_chrome_trace_stops_adding_samples_past_its_size(directory):
    # Without process sampling's counters, which alone would fill 20 kB.
    out, err = kairos([PHASED, "0.3", "0.05"], directory, KAIROS_TRACE_MAX_BYTES="20000", KAIROS_PROCESS_SAMPLING="off")
    connection = sqlite3.connect(only("*.db", directory))
    with open(only("*.trace.json", directory)) as file:
        trace = json.load(file)
    events = trace["traceEvents"]
    samples = [e for e in events if e.get("cat") == "sample"]
    stored = connection.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    check(0 < len(samples) < stored, f"samples stop past the size: {len(samples)} of {stored}")
    regions = [e for e in events if e.get("cat") == "region"]
    check(len(regions) == connection.execute("SELECT COUNT(*) FROM regions").fetchone()[0], "every region stays")
    perfetto = os.path.basename(only("*.perfetto-trace", directory))
    notes = [e for e in events if e.get("name", "").startswith("samples stop here")]
    check(len(notes) == 1 and perfetto in notes[0]["args"]["perfetto_trace"], f"the trace names the file: {notes}")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "KAIROS_TRACE_MAX_BYTES" in lines[0] and perfetto in lines[0],
          f"one line names the Perfetto file: {lines}")
    # Without the Perfetto file, the line says how to write it.
    other = os.path.join(directory, "without")
    os.makedirs(other)
    out, err = kairos([PHASED, "0.3", "0.05"], other, KAIROS_TRACE_MAX_BYTES="20000", KAIROS_PROCESS_SAMPLING="off",
                      KAIROS_OUTPUT_FORMATS="db,trace")
    lines = kairos_lines(err)
    check(len(lines) == 1 and "kairos-report" in lines[0] and "-f perfetto" in lines[0], f"how to write it: {lines}")


if __name__ == "__main__":
    sys.exit(run_named_test(globals(), "kairos-perfetto"))
