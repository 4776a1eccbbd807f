#pragma once
// The outputs derived from a profile database by streaming queries: memory stays bounded by the
// number of threads and distinct names, never by the number of samples or regions.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/plugins/database/formats.hpp>
#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

// Time windows first..last (docs/windows.md); the default, 0..0 with `all`, is every row.
struct window_range {
  std::int64_t first = 0, last = 0;
  bool all = true;
  static window_range only(std::int64_t first, std::int64_t last) { return {first, last, false}; }
};

struct text_options {
  std::size_t functions = 20;  // rows per table
  bool per_thread = true;
  window_range windows;
  std::size_t causal_locations = 10;  // locations in the causal profile's section
};

// Top functions by self and by total weighted samples, overall and per thread; with time
// windows, then the top functions of each window. A database of several MPI ranks (kairos-merge)
// starts with the ranks side by side: per function and per region, the min, median, mean and max
// across ranks, the imbalance (max / mean) and the slowest rank; the MPI time of each rank. A
// causal profile (docs/causal.md) comes first: its top locations' curves and what they predict.
void write_text(connection& profile, std::ostream& out, const text_options& options = {});

// From here on, every query of `profile` sees only the processes of MPI rank `rank` (several when
// launches were merged): each table holding a process's rows, and every view, is shadowed by a
// temporary view that keeps that rank's rows, so every output above is restricted alike. Throws
// database_error naming the ranks present when none has that rank.
void restrict_to_rank(connection& profile, std::int64_t rank);

// Chrome Trace Event JSON (Perfetto UI, chrome://tracing, speedscope): regions as complete
// events, samples as instant events carrying their stack ("sf") into "stackFrames", each time
// window as a slice on a track of its own, process sampling's values as counter events. Past the
// run's KAIROS_TRACE_MAX_BYTES (from the metadata) it adds no more samples: one event says so and
// names the Perfetto trace beside the database (perfetto_path_of), which holds them all.
struct trace_summary {
  std::int64_t samples_written = 0, samples_left_out = 0, limit_bytes = 0;
};
trace_summary write_trace(connection& profile, std::ostream& out, const window_range& windows = {});
// Where the perfetto format's file of a profile database goes: <stem>.perfetto-trace beside <stem>.db.
std::string perfetto_path_of(std::string_view database_path);

// Perfetto's own trace format (protobuf, docs/outputs.md): the same content as write_trace, the
// samples as PerfSample packets with interned call stacks, streamed; tens of bytes a sample.
void write_perfetto(connection& profile, std::ostream& out, const window_range& windows = {});
// The same trace, every window, for a run whose writer streamed its CPU samples' packets as it
// committed them (profile_writer::stream_perfetto_samples): all but the samples from `profile`,
// every call stack the samples use interned in one packet (one a megabyte), then `samples`, the
// streamed packets as they are. Its cost does not grow with the samples.
void write_perfetto_with_streamed_samples(connection& profile, std::ostream& out, std::istream& samples);
// Where a run keeps its streamed sample packets until the exit: <stem>.perfetto-samples.part.
std::string perfetto_samples_path_of(std::string_view database_path);

// Folded stacks ("main;solve;step 1200"), weights in microseconds of CPU time, for flamegraph.pl
// and speedscope.
void write_folded(connection& profile, std::ostream& out, const window_range& windows = {});

// speedscope's own file format (speedscope.app, or `speedscope FILE`): one sampled profile per
// thread, heaviest first, each distinct stack once with its weight in nanoseconds of CPU time.
// `exporter` names the writer ("kairos 0.1.0").
void write_speedscope(connection& profile, std::ostream& out, const window_range& windows = {},
                      std::string_view exporter = "kairos");

// A flame graph: one self-contained SVG (its script inline, nothing fetched), a graph for all
// threads and one per thread; click to zoom, search with the matched share, icicle view, tooltips
// with self and total time. Frames narrower than `minimum_width_fraction` of their graph are merged
// into "[narrow frames]"; the summary says how much.
struct flamegraph_summary {
  std::size_t graphs = 0;          // all threads, then one per sampled thread
  std::int64_t frames = 0;         // boxes in the all-threads graph
  std::int64_t total_ns = 0;       // CPU time sampled
  std::int64_t merged_frames = 0;  // frames merged into [narrow frames] (all-threads graph)
  std::int64_t merged_ns = 0;
};
flamegraph_summary write_flamegraph(connection& profile, std::ostream& out, const window_range& windows = {},
                                    double minimum_width_fraction = 0.001);

// The HTML report: one self-contained page (nothing fetched; readable printed) with the run's
// summary and settings, the top functions (sortable), the flame graph, the regions' call graph with
// statistics, a per-thread timeline of regions and CPU use, and the time windows and GPU work where
// the profile has them. `generator` names the writer ("kairos 0.1.0").
void write_html(connection& profile, std::ostream& out, const window_range& windows = {},
                std::string_view generator = "kairos");

// The HTML timeline's CPU use: each thread's sampled weight in `bins` equal bins of
// [origin_ns, origin_ns + span_ns) (earlier: the first bin, later: the last), by thread id. Read
// from the time buckets the writer summed (table sample_timeline), each bucket's weight put at its
// middle, where the widest bucket is at most 1/16 of a bin: a weight is then drawn within 1/32 of a
// bin of its sample, and the cost follows the buckets, not the samples. Else, or with
// `read_samples`, from the sample rows, each at its time.
struct cpu_timeline {
  std::map<std::int64_t, std::vector<std::int64_t>> weight_ns;  // by thread id, `bins` each
  bool from_buckets = false;
};
cpu_timeline bin_cpu_time(connection& profile, const window_range& windows, std::int64_t origin_ns,
                          std::int64_t span_ns, int bins, bool read_samples = false);

// Phase behaviour: the functions whose share of the samples changed most between time windows.
void write_window_comparison(connection& profile, std::ostream& out, std::size_t functions = 20);

// How many windows the profile has (0: none were set).
std::int64_t window_count(connection& profile);

// The text report's content as JSON.
void write_summary_json(connection& profile, std::ostream& out, const text_options& options = {});

// `format` (a row of formats.hpp written from a database) of `profile`, restricted to `windows`:
// the one dispatch kairos-report, the Python package and kairos-run's exit share. Throws
// std::invalid_argument for the db format, which no writer produces.
void write_format(format_id format, connection& profile, std::ostream& out, const window_range& windows = {});

}  // namespace kairos::database
