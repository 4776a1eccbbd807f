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
import sqlite3
import sys

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
    """The trace read as Perfetto reads a sequence: interned data and tracks must come before
    their first use; each use is checked here, in file order."""

    def __init__(self, trace):
        self.names, self.functions, self.paths, self.mappings, self.frames, self.callstacks = {}, {}, {}, {}, {}, {}
        self.tracks = {}
        self.slices = collections.defaultdict(list)  # track uuid: [(start, end, name)]
        self.counters = collections.defaultdict(list)  # track uuid: [(time, value)]
        self.samples = []  # (pid, tid, time, callstack iid)
        open_slices = collections.defaultdict(list)
        packets = list(trace.packet)
        check(packets and packets[0].sequence_flags & schema.SEQ_INCREMENTAL_STATE_CLEARED,
              "the first packet starts the sequence's state")
        events = []  # (time, file order, packet)
        for order, packet in enumerate(packets):
            check(packet.trusted_packet_sequence_id == 1, "one sequence")
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
        # Slices as a reader rebuilds them: events by time, those at one time in file order.
        for time, _, packet in sorted(events, key=lambda entry: entry[:2]):
            if packet.HasField("perf_sample"):
                sample = packet.perf_sample
                self.samples.append((sample.pid, sample.tid, time, sample.callstack_iid))
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
        for entry in data.mappings:
            check(all(path in self.paths for path in entry.path_string_ids), "a mapping's path is interned")
            once(self.mappings, entry.iid, entry, "mapping")
        for entry in data.frames:
            check(entry.function_name_id in self.functions, "a frame's function name is interned")
            check(entry.mapping_id == 0 or entry.mapping_id in self.mappings, "a frame's mapping is interned")
            once(self.frames, entry.iid, entry, "frame")
        for entry in data.callstacks:
            check(entry.frame_ids and all(frame in self.frames for frame in entry.frame_ids),
                  "a callstack's frames are interned")
            once(self.callstacks, entry.iid, list(entry.frame_ids), "callstack")


def run_phased(directory, **extra):
    out, err = kairos([PHASED, "0.3", "0.05"], directory, **extra)
    connection = sqlite3.connect(only("*.db", directory))
    return connection, only("*.perfetto-trace", directory)


def test_every_reference_track_and_count_matches_the_database(directory):
    connection, path = run_phased(directory)
    trace, size = decoded(path)
    sequence = Sequence(trace)
    # Interned strings, frames and callstacks are the database's, by id.
    strings = dict(connection.execute("SELECT id, value FROM string"))
    for iid, text in list(sequence.functions.items()) + list(sequence.paths.items()):
        check(strings.get(iid) == text, f"string {iid} is the database's: {text!r}")
    frames = {row[0]: row[1:] for row in connection.execute("SELECT id, function, module, offset FROM frame")}
    for iid, frame in sequence.frames.items():
        function, module, offset = frames[iid]
        check(frame.function_name_id == function and frame.mapping_id == (module or 0), f"frame {iid} as stored")
        check(not module or frame.rel_pc == offset, f"frame {iid}'s offset")
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
        (*threads[thread], time, stack) for thread, time, stack in
        connection.execute("SELECT thread, time_ns, stack FROM sample WHERE stack IS NOT NULL"))
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
    """Each sample as (pid, tid, time, its callstack's function names, root first)."""
    def names(iid):
        return tuple(sequence.functions[sequence.frames[frame].function_name_id] for frame in sequence.callstacks[iid])
    return collections.Counter((pid, tid, time, names(iid)) for pid, tid, time, iid in sequence.samples)


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
    per_thread = collections.Counter((pid, tid) for pid, tid, _, _ in streamed.samples)
    check(per_thread == collections.Counter((pid, tid) for pid, tid, _, _ in reported.samples),
          f"the samples per thread agree: {per_thread}")
    check(len(streamed.samples) > 50, f"a run of 0.9 s of CPU has samples: {len(streamed.samples)}")
    check(stacks_by_name(streamed) == stacks_by_name(reported), "each sample's stack is the same, frame by frame")
    for kind in ("tracks", "slices", "counters"):
        first, second = getattr(streamed, kind), getattr(reported, kind)
        check(set(first) == set(second) and all(
            (first[key] == second[key]) for key in first), f"the same {kind}")


def test_a_sample_costs_tens_of_bytes(directory):
    """One thread sampled at 2 kHz: the Perfetto file's bytes a sample against the Chrome trace's."""
    kairos([SAMPLED, "split", "1.5"], directory, KAIROS_SAMPLING_FREQ="2000", KAIROS_PROCESS_SAMPLING="off")
    connection = sqlite3.connect(only("*.db", directory))
    samples = connection.execute("SELECT COUNT(*) FROM sample").fetchone()[0]
    trace, size = decoded(only("*.perfetto-trace", directory))
    sequence = Sequence(trace)
    chrome = os.path.getsize(only("*.trace.json", directory))
    # What the samples add: the file less its tracks and interned stacks.
    per_sample = size / samples
    print(f"{samples} samples: perfetto {size} bytes ({per_sample:.1f} a sample), "
          f"chrome JSON {chrome} bytes ({chrome / samples:.1f} a sample)")
    check(len(sequence.samples) == samples - connection.execute(
        "SELECT COUNT(*) FROM sample WHERE stack IS NULL").fetchone()[0], "every stacked sample")
    check(per_sample < 40, f"tens of bytes a sample: {per_sample:.1f}")
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
