#pragma once
// What the output writers (one file per format: formats.cpp lists them) share: one-value queries,
// the time-window filter, names as JSON and XML text, and the queries behind the tables that
// several outputs show (defined in output_queries.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/printable.hpp>

namespace kairos::database::output_helpers {

inline std::int64_t scalar(connection& profile, const std::string& sql) {
  auto query = profile.prepare(sql);
  return query.step() ? query.integer(0) : 0;
}

// " AND <column> BETWEEN first AND last", or nothing for every window. Integers only: no quoting.
inline std::string in_windows(const window_range& windows, std::string_view column) {
  if (windows.all) return {};
  return fmt::format(" AND {} BETWEEN {} AND {}", column, windows.first, windows.last);
}

// Every name in a JSON output: shown as kairos::printable shows it (escaped, capped).
inline std::string json_string(std::string_view text) {
  return nlohmann::json(printable(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// How every output names a thread: "thread 2", and in an MPI rank "rank 1, thread 2", so that the
// threads of a merged launch's ranks are told apart.
inline std::string thread_name(std::optional<std::int64_t> rank, std::int64_t sequent_id) {
  return rank ? fmt::format("rank {}, thread {}", *rank, sequent_id) : fmt::format("thread {}", sequent_id);
}
// With its tid and the name the kernel kept: "rank 1, thread 2 (tid 4243, worker)".
inline std::string thread_label(std::optional<std::int64_t> rank, std::int64_t sequent_id, std::int64_t tid,
                                std::string_view name) {
  return fmt::format("{} (tid {}{}{})", thread_name(rank, sequent_id), tid, name.empty() ? "" : ", ", name);
}

// XML (SVG, HTML) text: names as kairos::printable shows them, escaped.
inline std::string xml_text(std::string_view text) {
  std::string escaped;
  for (const char c : printable(text)) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

double percent(std::int64_t part, std::int64_t whole);

// --- what the samples cover -----------------------------------------------------------------

// The CPU time the samples stand for beside the program's, and what was not sampled, from what the
// runtime stores in the metadata at the end (a merged database: summed over its processes). Every
// output that shows shares states it: a share of what was seen is not a share of what ran.
struct sampling_coverage {
  std::int64_t sampled_ns = 0;      // SUM(weight_ns) of the CPU-time samples, every window
  std::int64_t program_cpu_ns = 0;  // the program's threads' CPU time; 0: not recorded
  std::int64_t blocked_ns = 0;      // of threads that blocked the sampling signal
  std::int64_t blocked_threads = 0;
  // The rest of program_cpu_ns, each part measured on the threads' CPU clocks by the runtime:
  std::int64_t before_sampling_ns = 0;    // before sampling began (the delay, a first window)
  std::int64_t paused_ns = 0;             // while it was off after that (the duration, windows)
  std::int64_t after_last_sample_ns = 0;  // after each sampled stretch's last sample
  std::int64_t handler_ns = 0;            // in kairos's signal handler
  std::int64_t lost_ns = 0;               // what lost and throttled samples stood for
  std::int64_t weights_shortfall_ns = 0;  // what the weights fall short of (negative: exceed)
  std::int64_t ring_excess_ns = 0;        // of the excess: perf rings' counts beyond their threads' clocks
  std::int64_t own_work_ns = 0;           // of sampled_ns: kairos's own work on the program's threads ([kairos])
  std::int64_t dropped_samples = 0;       // lost: a full ring or buffer
  std::int64_t dropped_regions = 0, rows_lost = 0;
  double delay_s = 0, duration_s = 0;  // KAIROS_SAMPLING_DELAY, _DURATION
  bool windows = false;
  std::int64_t not_sampled_ns() const {
    return before_sampling_ns + paused_ns + blocked_ns + after_last_sample_ns + handler_ns + lost_ns +
           weights_shortfall_ns;
  }
  double sampled_fraction() const {
    return program_cpu_ns > 0 ? static_cast<double>(sampled_ns) / static_cast<double>(program_cpu_ns) : 1.0;
  }
};
sampling_coverage coverage_of(connection& profile);
// "samples stand for 1.200 s of the program's 54.000 s of CPU time (2.2%); not sampled: 52.800 s
// in 2 threads that blocked the sampling signal, ...". Plain text (escape it for XML).
std::string coverage_text(const sampling_coverage& coverage);
nlohmann::json coverage_json(const sampling_coverage& coverage);

// --- child processes not profiled -------------------------------------------------------------

// The children that ran unprofiled (KAIROS_FOLLOW_CHILDREN off), as the runtime stored them in the
// metadata at the end (a merged database: over its processes), by name, most CPU time first.
struct unprofiled_children {
  struct group {
    std::string name;
    std::int64_t processes = 0;  // 0: not known (reaped where kairos did not see it)
    std::int64_t cpu_ns = 0;
  };
  std::int64_t processes = 0, cpu_ns = 0;
  std::vector<group> by_name;
};
unprofiled_children unprofiled_children_of(connection& profile);
// "2 child processes not profiled used 2.310 s of CPU time, 94% of the program's and theirs:
// gzip 2.301 s (1 process), ...; kairos-run --follow-children profiles them"; "" when none ran.
std::string unprofiled_children_text(const unprofiled_children& children, std::int64_t program_cpu_ns);
nlohmann::json unprofiled_children_json(const unprofiled_children& children);

// --- functions and threads -------------------------------------------------------------------

struct function_row {
  std::string name;
  std::int64_t self_ns;
  std::int64_t total_ns;
};

struct thread_row {
  std::int64_t id;
  std::int64_t sequent_id;
  std::int64_t tid;
  std::int64_t pid;
  std::string name;
  std::int64_t samples;
  std::int64_t weight_ns;
  std::int64_t process;
  std::optional<std::int64_t> rank;  // its process's MPI rank
};

// Every thread's thread_label, by thread.id.
std::map<std::int64_t, std::string> thread_labels(connection& profile);

// Every thread, process by process (by rank in a merged launch), each process's in sequent order,
// with its samples in the windows.
std::vector<thread_row> sampled_threads(connection& profile, const window_range& windows);

// --- samples, summed without sorting them --------------------------------------------------------
// Every output reads the sample rows through these: in stored order, summed by the caller into
// groups (threads, stacks, windows, time bins), never by a GROUP BY, ORDER BY or join that makes
// SQLite sort them or index them in its temporary store (tens of bytes a sample). Memory is
// bounded by the groups, not by the samples.
struct sample_fields {
  std::int64_t thread, stack;  // stack 0: a sample with no stack
  std::int64_t time_ns, weight_ns;
};
// The time of the profile's earliest event of any kind (0: none): the traces' origin.
std::int64_t earliest_event_ns(connection& profile);

// The sample rows in the windows, until `visit` returns false. A template, not a std::function:
// the traces call it once a sample, and each column read and indirect call shows at a million
// (the Chrome trace's writer took 10% longer with both).
template <class Visit>
void for_each_sample_while(connection& profile, const window_range& windows, Visit&& visit) {
  auto query = profile.prepare("SELECT thread, COALESCE(stack, 0), time_ns, weight_ns FROM sample WHERE 1" +
                               in_windows(windows, "window"));
  while (query.step())
    if (!visit(sample_fields{query.integer(0), query.integer(1), query.integer(2), query.integer(3)})) return;
}

template <class Visit>
void for_each_sample(connection& profile, const window_range& windows, Visit&& visit) {
  for_each_sample_while(profile, windows, [&](const sample_fields& sample) {
    visit(sample);
    return true;
  });
}

// The samples' sums (stack_total) in the windows, one row a (thread, window): every output's
// totals, per thread, per window or whole, are summed from these (threads x windows rows, however
// many samples).
struct sample_sum {
  std::int64_t thread, window, samples, weight_ns, first_ns, last_ns;
};
std::vector<sample_sum> sample_sums(connection& profile, const window_range& windows);
struct sample_totals {
  std::int64_t samples = 0, weight_ns = 0;
  std::optional<std::int64_t> first_ns, last_ns;  // none: no sample
};
sample_totals totals_of(const std::vector<sample_sum>& sums);
inline sample_totals sample_totals_in(connection& profile, const window_range& windows) {
  return totals_of(sample_sums(profile, windows));
}

// The samples of each (thread, window, stack), sorted by thread, then window, then stack.
struct stack_sum {
  std::int64_t thread, window, stack;  // stack 0: no stack
  std::int64_t samples, weight_ns;
};
std::vector<stack_sum> stack_sums(connection& profile, const window_range& windows);

// --- regions and instrumented functions --------------------------------------------------------

// The call graph of user-API regions and instrumented functions, all threads merged: a node per
// path of names.
struct region_node {
  std::string name;
  std::int64_t count = 0, total_ns = 0, children_ns = 0;
  std::int64_t min_ns = std::numeric_limits<std::int64_t>::max(), max_ns = 0;
  double sum_squares = 0;  // of durations in ms, for the standard deviation
  std::set<std::int64_t> threads;
  std::map<std::string, std::unique_ptr<region_node>, std::less<>> children;

  region_node() = default;
  region_node(region_node&&) = default;
  region_node& operator=(region_node&&) = default;
  // Iterative: a recursion 100,000 calls deep makes a tree as deep.
  ~region_node() {
    std::vector<std::unique_ptr<region_node>> pending;
    auto adopt = [&](region_node& node) {
      for (auto& [name, child] : node.children)
        if (child) pending.push_back(std::move(child));
    };
    adopt(*this);
    while (!pending.empty()) {
      const auto node = std::move(pending.back());
      pending.pop_back();
      adopt(*node);
    }
  }

  region_node& child(std::string_view child_name) {
    if (const auto found = children.find(child_name); found != children.end()) return *found->second;
    auto& slot = children[std::string{child_name}];
    slot = std::make_unique<region_node>();
    slot->name = child_name;
    return *slot;
  }
  void add(std::int64_t ns, std::int64_t thread) {
    ++count;
    total_ns += ns;
    min_ns = std::min(min_ns, ns);
    max_ns = std::max(max_ns, ns);
    sum_squares += (ns * 1e-6) * (ns * 1e-6);
    threads.insert(thread);
  }
};

struct region_visit {
  std::int64_t thread;
  std::size_t depth;
  std::int64_t start_ns, end_ns;
  std::int64_t clipped;
  std::string_view name;
};

// Every row of the `regions` view in the windows (those whose name is in the string table),
// decoded from region_block by kairos (through the view SQLite parses every field of a row's JSON
// on its own, far slower). Thread by thread (by thread.id), each thread's rows in
// the reverse of the order they were written, the order its regions ended: a region before every
// region it encloses, as a call tree is walked from its root. One block of rows is held at a
// time: an output never holds every region (a sort of them all cost time and memory a region).
// The blocks of `skipped_threads` are not read.
void for_each_region(connection& profile, const window_range& windows,
                     const std::function<void(const region_visit&)>& visit,
                     const std::set<std::int64_t>& skipped_threads = {});
// The call graph in the windows: each thread's counted calls (the call_tree table: every call, short
// ones too), or, for a thread that has none (its program was killed), its regions read in
// for_each_region's order, a region's parent the latest region one depth up. `visit`, when given,
// sees every region (row) as it is read.
region_node region_call_graph(connection& profile, const window_range& windows,
                              const std::function<void(const region_visit&)>& visit = {});

// Heaviest self time first (then total, then name); the list cut to `limit`.
void rank(std::vector<function_row>& rows, std::size_t limit);

// Every thread's function weights, as the top_functions_by_thread view has them (its rows are
// threads x distinct functions, however many samples there are), ranked, the longest lists cut.
struct function_weights {
  std::vector<function_row> overall;
  std::map<std::int64_t, std::vector<function_row>> by_thread;  // by thread.id
};
function_weights weigh_functions(connection& profile, std::size_t limit, const window_range& windows);

// The same weights summed per group: `group_of` names a (thread, window, stack) sum's group, or
// nothing to leave it out. Unranked, by function name.
std::map<std::int64_t, std::map<std::string, function_row>> weigh_functions_by(
    connection& profile, const window_range& windows,
    const std::function<std::optional<std::int64_t>(const stack_sum&)>& group_of);

// --- time windows ----------------------------------------------------------------------------

struct window_row {
  std::int64_t ordinal;
  std::string spec, clock;
  std::int64_t planned_start, planned_end;
  bool opened;
  std::int64_t actual_start, actual_end, start_ns, end_ns;
  std::int64_t samples = 0, weight_ns = 0;
};
// Each window once: in a merged database, window K of every process together (the earliest opening,
// the latest closing, all their samples).
std::vector<window_row> windows_in(connection& profile, const window_range& windows);

// Each window's functions (window 0, outside every window, left out), ranked.
std::map<std::int64_t, std::vector<function_row>> functions_by_window(connection& profile, std::size_t limit,
                                                                      const window_range& windows);

// --- process sampling ------------------------------------------------------------------------

// A counter series of the process_metric table: one (process, metric, thread, instance), named as
// every output shows it: "memory_resident_bytes", "thread_cpu_percent (thread 1)",
// "cpu_frequency_mhz (core 3)", "gpu_power_watts (GPU 0)".
struct metric_series {
  std::int64_t ordinal = 0;  // dense, in the order the series first appear
  std::int64_t pid = 0;
  std::string metric, name;
};
// Every process_metric row in the windows in stored order (each series' in time order), with its
// series; memory is bounded by the series, not the rows.
void for_each_metric_value(connection& profile, const window_range& windows,
                           const std::function<void(const metric_series&, std::int64_t time_ns, double value)>& visit);

// --- the run ------------------------------------------------------------------------------------

// The metadata table, by key.
using metadata_map = std::map<std::string, std::string, std::less<>>;
metadata_map read_metadata(connection& profile);
// A key's value; "" when absent.
std::string metadata_value(const metadata_map& metadata, std::string_view key);

// The profile's first process (by row), its command and host from the metadata where the row has
// none (a database from an older kairos).
struct run_process {
  std::int64_t pid = 0, start_ns = 0, end_ns = 0;  // 0: not known
  std::string command, host;
};
run_process first_process(connection& profile, const metadata_map& metadata);

// The regions' rows in the windows (the blocks' counts for every window; decoded otherwise).
std::int64_t region_count(connection& profile, const window_range& windows);
// The earliest start and latest end of any sample or region (every window); 0 when none.
struct time_extent {
  std::int64_t first_ns = 0, last_ns = 0;
};
time_extent samples_and_regions_extent(connection& profile);

// --- GPU -------------------------------------------------------------------------------------

constexpr std::int64_t kernels_shown = 20;

// The GPU work in the windows: devices, the top kernels by total device time, copies by kind.
struct gpu_summary {
  struct device {
    std::string api;
    std::int64_t index;
    std::string name, architecture;
    std::int64_t memory_bytes, multiprocessors;
  };
  struct kernel {
    std::string name;
    std::int64_t launches, total_ns, max_ns;
  };
  struct copies {
    std::string kind;
    std::int64_t count, bytes, total_ns;
  };
  std::vector<device> devices;
  std::vector<kernel> top_kernels;  // at most kernels_shown, most device time first
  std::vector<copies> by_kind;
  bool any_work() const { return !top_kernels.empty() || !by_kind.empty(); }
};
gpu_summary gpu_summary_of(connection& profile, const window_range& windows);
// The same as JSON (the json format's "gpu").
nlohmann::json gpu_json(const gpu_summary& gpu);

}  // namespace kairos::database::output_helpers
