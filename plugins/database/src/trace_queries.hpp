#pragma once
// The queries behind the two traces (trace.cpp, the Chrome trace; perfetto.cpp, Perfetto's): the
// processes and threads that name their tracks, the calls and GPU work drawn on them, the
// annotations' ranges and kinds, and the call stacks' rows the Perfetto trace interns. Each returns
// plain structs or streams them to a visitor in the order the traces write them; the writers hold
// no SQL (output_helpers.hpp has the queries every output shares).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kairos/plugins/database/outputs.hpp>

namespace kairos::database::trace_queries {

// A process, as the traces name it: by rank first in an MPI launch ("rank 1: ./app").
struct process_track {
  std::int64_t id, pid;
  std::string command;
  std::optional<std::int64_t> rank;
  std::string track_name() const;
};
// Every process row, in stored order.
std::vector<process_track> process_tracks(connection& profile);

// A thread, named by the name the kernel kept, else "thread <sequent id>".
struct thread_track {
  std::int64_t id, process, pid, tid;
  std::string name;
  std::int64_t sequent_id;
  std::string track_name() const;
};
// Every thread of a process the profile has (the threads view), in its stored order.
std::vector<thread_track> thread_tracks(connection& profile);

// A call on a thread's track: an MPI call (bytes and peer where it has them) or a GPU API call
// (its correlation id).
struct call_row {
  std::int64_t thread;
  std::string_view name;
  std::int64_t start_ns, end_ns;
  std::optional<std::int64_t> bytes, peer;
  std::int64_t correlation = 0;
};
// The calls in the windows with a thread, by start time. `name` lives while the visitor runs.
void for_each_mpi_call(connection& profile, const window_range& windows,
                       const std::function<void(const call_row&)>& visit);
void for_each_gpu_api_call(connection& profile, const window_range& windows,
                           const std::function<void(const call_row&)>& visit);

// A kernel or a copy on a GPU stream. A copy's name is its kind ("HtoD", "memset").
struct gpu_work_row {
  bool kernel;
  std::int64_t process, device;  // device -1: the row names none
  std::int64_t stream;
  std::string_view name, device_name;  // device_name "?": unknown
  std::int64_t start_ns, end_ns;
  std::int64_t grid[3], block[3], shared_bytes;  // a kernel's
  std::int64_t bytes;                            // a copy's
  std::int64_t correlation;
  // "GPU <device> stream default", "GPU <device> stream 0x7f00aa".
  std::string stream_name() const;
};
// Kernels and copies in the windows, by start time (the text views live while the visitor runs).
void for_each_gpu_work(connection& profile, const window_range& windows,
                       const std::function<void(const gpu_work_row&)>& visit);

// A range that need not nest (NVTX start/end, Kokkos sections: annotation_range).
struct annotation_range_row {
  std::int64_t id;
  std::string_view name, kind;
  std::int64_t thread, start_ns, end_ns;
};
// The ranges in the windows, by start time.
void for_each_annotation_range(connection& profile, const window_range& windows,
                               const std::function<void(const annotation_range_row&)>& visit);

// The annotations' kinds of region names ("omp parallel" -> "openmp"): region_kind.
std::map<std::string, std::string, std::less<>> region_kinds(connection& profile);

// The run's KAIROS_TRACE_MAX_BYTES (the setting's default for a database written without it).
std::int64_t trace_size_limit(connection& profile);

// CLOCK_BOOTTIME and CLOCK_MONOTONIC as the run read them together: the profile's own, else (a
// merged database) its first process's that has them; none when the run stored no pair. Throws
// std::runtime_error naming the value when it is not "<boottime_ns> <monotonic_ns>".
struct clock_pair {
  std::int64_t boottime_ns, monotonic_ns;
};
std::optional<clock_pair> run_clocks(connection& profile);

// The stacks the samples were counted under (stack_total), each once, by id.
std::vector<std::int64_t> sampled_stacks(connection& profile);

// A frame's row (frame table); module, file and line 0: none.
struct frame_row {
  std::int64_t function = 0, module = 0, offset = 0, file = 0, line = 0;
  std::string language;
};

// The stack trie, the frames and the strings, read by id as a writer first needs each: one
// prepared statement a kind, the whole trie once.
class stack_reader {
 public:
  explicit stack_reader(connection& profile) : profile_{profile} {}
  // id -> (parent (0: a root), frame).
  const std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>>& nodes();
  // An id past every string's (a placeholder's own).
  std::int64_t past_last_string();
  frame_row frame(std::int64_t id);          // all zero when the table lacks it
  std::string text(std::int64_t string_id);  // "" when the table lacks it
  // The name of the function at the stack's leaf; none when the trie lacks the stack.
  std::optional<std::string> leaf_function(std::int64_t stack);

  // Every stack node, by id, with its parent (none: a root) and its function's name.
  struct named_node {
    std::int64_t id;
    std::optional<std::int64_t> parent;
    std::string_view function;
  };
  void for_each_named_node(const std::function<void(const named_node&)>& visit);

 private:
  connection& profile_;
  bool loaded_ = false;
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> nodes_;
  std::optional<statement> frame_query_, string_query_, leaf_query_;
};

}  // namespace kairos::database::trace_queries
