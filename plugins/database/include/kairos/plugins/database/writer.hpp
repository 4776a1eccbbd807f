#pragma once
// profile_writer: what a writer thread uses to put one process's profile into its database.
// Strings are interned, frames deduplicated by address, stacks by (parent, frame), all in memory,
// so an insert never needs a lookup query. Inserts are prepared statements inside one open
// transaction; commit() ends it (the runtime calls it every KAIROS_FLUSH_INTERVAL), so a killed
// program leaves a valid database holding everything up to the last commit.
// One writer per database and per thread: it is not thread-safe.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kairos/plugins/database/region_block.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

struct frame_info {
  std::uint64_t address = 0;
  std::string module;        // path of the object holding the address ("" when unknown)
  std::uint64_t offset = 0;  // address - module load base
  std::string function;      // demangled name; "" when unknown (then "<module file> (no symbols)" is stored)
  std::string file;          // source file, "" when unknown
  std::uint32_t line = 0;
  std::string language = "native";  // "python" (an interpreter's frame), "jit" (named by a perf map)
};

struct process_info {
  std::int64_t pid = 0;
  std::int64_t ppid = 0;
  std::optional<std::int64_t> rank;  // MPI's; none outside a launch
  std::string hostname;
  std::string command;
  std::int64_t start_ns = 0;
  std::optional<std::int64_t> size;  // the MPI world's; none outside a launch
  std::string launch_id;  // shared by a launch's ranks ("": unknown); kairos-merge tells processes apart by it
};

struct thread_info {
  std::int64_t internal_id = 0;
  std::int64_t sequent_id = 0;
  std::int64_t tid = 0;
  std::string name;
  std::int64_t start_ns = 0;
};

// A time window as planned and as it went (the window table); amounts in the clock's units.
struct window_info {
  std::int64_t ordinal = 0;
  std::string spec;
  std::string clock;
  std::int64_t planned_start = 0, planned_end = 0;
  std::optional<std::int64_t> actual_start, actual_end, start_ns, end_ns;  // none: never opened
};

// GPU activity (the gpu_* tables); times in CLOCK_MONOTONIC ns. `thread` and `stack` are row ids
// (none: the caller was not seen, or no stack was captured).
struct gpu_device_info {
  std::string api;  // "hip", "cuda"
  std::int64_t index = 0;
  std::string name, architecture;
  std::int64_t memory_bytes = 0, multiprocessors = 0, clock_khz = 0, memory_clock_khz = 0;
};
struct gpu_work_origin {
  std::optional<std::int64_t> thread, stack;
  std::int64_t call_ns = 0;
  std::int64_t correlation = 0;
  std::int64_t window = 0;
};
struct gpu_kernel_info {
  std::string_view name;
  std::uint64_t function_address = 0;  // symbolized when `name` is empty
  std::int64_t stream = 0, start_ns = 0, end_ns = 0;
  std::array<std::int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::int64_t shared_bytes = 0;
};
struct gpu_copy_info {
  std::string_view kind;
  std::int64_t stream = 0, bytes = 0, start_ns = 0, end_ns = 0;
  bool asynchronous = false;
};

// Causal profiling (docs/causal.md): one virtual-speedup experiment and its progress points' counts.
struct causal_progress_info {
  std::string_view name;
  std::string_view kind;                      // "throughput" or "latency"
  std::int64_t delta = 0;                     // throughput: visits during the experiment
  std::int64_t arrivals = 0, departures = 0;  // latency: begins and ends during the experiment
  std::int64_t difference = 0;                // latency: begins - ends in total at the experiment's end
};
struct causal_experiment_info {
  std::string_view scope;        // "line" or "function"
  std::string_view selected;     // "file:line", or the function's name
  double speedup = 0;            // 0..1, the virtual speedup of `selected`
  std::int64_t start_ns = 0;     // steady clock, like every other time in the profile
  std::int64_t duration_ns = 0;  // wall time less the delays inserted (coz's "duration")
  std::int64_t delay_ns = 0;     // delays inserted during it (global delay growth)
  std::int64_t selected_samples = 0;
  std::int64_t window = 0;
};

class profile_writer {
 public:
  using symbolizer = std::function<frame_info(std::uint64_t address)>;

  // Creates the database (it must not exist yet) and its schema.
  profile_writer(const std::string& path, symbolizer symbolize);
  // Opens again a profile this process was writing, after its connection broke (the program
  // closed SQLite's descriptors): what is committed there is read back, so new rows refer to it.
  struct reopen_t {};
  static constexpr reopen_t reopen{};
  profile_writer(const std::string& path, symbolizer symbolize, reopen_t);
  // Opens the profile an earlier image of this process wrote before its exec, to go on with it:
  // as reopen, but no frame or stack of the earlier image is reused, since its addresses name
  // another program's code (docs/runtime.md, "exec chains").
  struct after_exec_t {};
  static constexpr after_exec_t after_exec{};
  profile_writer(const std::string& path, symbolizer symbolize, after_exec_t);
  // An exec chain's process row names the image at its end (docs/runtime.md, "exec chains").
  void set_process_command(std::int64_t process, std::string_view command);
  // Appends `suffix` to the names of the threads whose rows come after `after_thread_row`.
  void mark_threads(std::int64_t after_thread_row, std::string_view suffix);
  ~profile_writer();  // commits what is pending
  profile_writer(const profile_writer&) = delete;
  profile_writer& operator=(const profile_writer&) = delete;

  void set_metadata(std::string_view key, std::string_view value);
  std::int64_t add_process(const process_info& process);
  void end_process(std::int64_t process, std::int64_t end_ns);
  // The rank and size MPI_Init gave, which may arrive after the row was written.
  void set_process_rank(std::int64_t process, std::int64_t rank, std::int64_t size);
  std::int64_t add_thread(std::int64_t process, const thread_info& thread);
  void end_thread(std::int64_t thread, std::int64_t end_ns);

  // The id of the stack whose frames are `addresses`, leaf first; 0-length gives no stack (-1).
  std::int64_t add_stack(std::span<const std::uint64_t> addresses_leaf_first);
  void add_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns, std::int64_t stack,
                  std::int64_t window = 0);
  // A sample of the real-time sampler (table realtime_sample): wall time, waiting included.
  void add_realtime_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns, std::int64_t stack,
                           std::int64_t window = 0);
  void add_counter(std::int64_t thread, std::int64_t time_ns, std::string_view name, double value,
                   std::int64_t window = 0);
  // A value process sampling read (the process_metric table): `thread` for a thread's own metric,
  // `instance` the CPU core or GPU it is of; none for the process as a whole.
  void add_process_metric(std::int64_t time_ns, std::string_view metric, std::optional<std::int64_t> thread,
                          std::optional<std::int64_t> instance, double value, std::int64_t window = 0);
  // `clipped`: 1 when the start was cut to the window's opening, 2 the end to its closing.
  // Regions are kept per thread and written in blocks of up to region_block_rows (the table
  // region_block, read through the view `region`; region_block.hpp, docs/database.md): a row costs
  // a few digits, not an insert. commit() writes the blocks begun.
  void add_region(std::int64_t thread, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                  std::int64_t depth, std::int64_t window = 0, std::int64_t clipped = 0);
  // An instrumented function's call: a region named by the function at `function_address`
  // (symbolized like a sampled frame, once per address), tied to its frame.
  void add_function_region(std::int64_t thread, std::uint64_t function_address, std::int64_t start_ns,
                           std::int64_t end_ns, std::int64_t depth, std::int64_t window = 0, std::int64_t clipped = 0);
  // A thread's regions at once, as add_region (a name) or add_function_region (an address, not 0)
  // would add each: a drained log costs one call, not one a row.
  struct region_input {
    std::string_view name;
    std::uint64_t function_address = 0;
    std::int64_t start_ns = 0, end_ns = 0;
    std::int32_t depth = 0, window = 0, clipped = 0;
  };
  void add_regions(std::int64_t thread, std::span<const region_input> regions);
  // A thread's calls counted (the call_tree table): a function's node by address (symbolized like
  // a sampled frame), a region's by name.
  struct call_tree_input {
    std::int64_t node = 0, parent = 0;
    std::string_view name;
    std::uint64_t function_address = 0;
    std::int64_t window = 0, calls = 0, total_ns = 0, min_ns = 0, max_ns = 0;
    double sum_squares_ms = 0;
  };
  void add_call_tree(std::int64_t thread, std::span<const call_tree_input> nodes);
  // Written when a window opens and again when it closes: the last version stays.
  void add_window(const window_info& window);
  // Each window's samples and regions, counted from the rows (once, at the end).
  void count_window_rows();

  // The device's row id, for its kernels and copies.
  std::int64_t add_gpu_device(const gpu_device_info& device);
  void add_gpu_kernel(std::optional<std::int64_t> device, const gpu_kernel_info& kernel, const gpu_work_origin& origin);
  void add_gpu_copy(std::optional<std::int64_t> device, const gpu_copy_info& copy, const gpu_work_origin& origin);
  void add_gpu_api_call(std::string_view api, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                        const gpu_work_origin& origin);

  // An MPI call (the mpi_call table); `bytes` and `peer` none where the call has none.
  void add_mpi_call(std::int64_t thread, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                    std::optional<std::int64_t> bytes, std::optional<std::int64_t> peer, std::int64_t window = 0);

  // The experiment's row id. A latency point's row stores `arrivals` as its delta (its `delta` is
  // not read), a throughput point's leaves the latency columns NULL (schema.cpp says why).
  std::int64_t add_causal_experiment(const causal_experiment_info& experiment,
                                     std::span<const causal_progress_info> progress);
  // Samples per location in scope (coz's "samples" records), written once at the end.
  void add_causal_samples(std::string_view scope, std::string_view location, std::int64_t count);

  // Annotations (docs/openmp.md): the kind of the regions named `name` (region_kind; the first
  // kind given a name stays), an OpenMP parallel region's sums for one thread of its team
  // (openmp_thread_time), a range that need not nest (annotation_range; `end_thread` none when
  // unknown).
  void add_region_kind(std::string_view name, std::string_view kind);
  void add_openmp_thread_time(std::string_view region, std::int64_t thread, std::int64_t instances,
                              std::int64_t work_ns, std::int64_t wait_ns);
  void add_annotation_range(std::int64_t thread, std::optional<std::int64_t> end_thread, std::string_view kind,
                            std::string_view name, std::int64_t start_ns, std::int64_t end_ns, std::int64_t window);

  std::int64_t intern(std::string_view text);

  // For a run that writes a Perfetto trace (docs/outputs.md, "perfetto"): from now on each CPU
  // sample with a stack, on a thread this writer added, is encoded as the trace's PerfSample
  // packet, and the packets are handed to `append` only once the commit that stored their samples
  // succeeded (a failed commit drops them with its rows). When `append` returns false (it could
  // not write), no more are encoded and perfetto_samples_whole() is false: the trace is then
  // written from the database. Called before the first sample; write_perfetto_with_streamed_samples
  // (outputs.hpp) writes the trace around the packets.
  using packet_sink = std::function<bool(std::string_view packets)>;
  void stream_perfetto_samples(packet_sink append);
  // Whether every committed sample's packet was handed over (false when not streaming).
  bool perfetto_samples_whole() const noexcept;

  // Ends the open transaction: everything added so far is durable. The next add opens another.
  // When it fails, the transaction is rolled back (as after roll_back_if_ended) before it throws.
  void commit();
  // After an add threw: when SQLite ended the open transaction (it rolls back on an I/O error or a
  // full disk), forgets what it held (ids of rows it inserted, region blocks not yet written) and
  // says so: every row added since the last commit is then lost. Else false, nothing changed.
  bool roll_back_if_ended();
  // The newest row of each table a caller may keep ids of that the last commit made durable
  // (ids grow): a kept id above it names a row that was rolled back.
  struct row_ids {
    std::int64_t string = 0, frame = 0, stack = 0, thread = 0, gpu_device = 0;
  };
  const row_ids& committed_rows() const noexcept { return committed_; }
  connection& database() noexcept { return database_; }

 private:
  void read_back(bool with_code);  // reopen, after_exec: what is committed, so new rows refer to it
  struct frame_entry {
    std::int64_t frame;
    std::int64_t function;  // the function's name, interned
  };
  void ensure_transaction();
  void roll_back() noexcept;
  std::int64_t frame_for(std::uint64_t address);
  frame_entry frame_entry_for(std::uint64_t address);
  // A thread's regions not yet written.
  void write_region_block(std::int64_t thread, std::vector<region_fields>& block);
  void write_region_blocks();
  // The samples' sums since the last commit, added to stack_total in the commit's transaction.
  void write_stack_totals();
  // The samples' weight over time since the last commit, added to sample_timeline in the commit's
  // transaction; rows committed at a finer bucket width are merged into the current width first.
  void write_timeline_buckets();
  // A time's bucket at the current width: the multiple of the width at or below it (the width is
  // a power of two: a mask, not two divisions).
  std::int64_t bucket_start(std::int64_t time_ns) const noexcept { return time_ns & -bucket_width_ns_; }
  // The streamed samples' packets (stream_perfetto_samples); writer.cpp holds its encoder.
  struct sample_stream;
  std::unique_ptr<sample_stream> sample_stream_;
  void stream_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns, std::int64_t stack);
  // Each process row's pid and each thread row's (pid, tid), as a sample's packet names them.
  std::unordered_map<std::int64_t, std::int64_t> process_pids_;
  std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> thread_ids_;

  connection database_;
  symbolizer symbolize_;
  bool in_transaction_ = false;
  struct statements;
  std::unique_ptr<statements> statements_;
  struct string_hash {
    using is_transparent = void;  // find(std::string_view) without building a std::string
    std::size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_map<std::string, std::int64_t, string_hash, std::equal_to<>> strings_;
  std::unordered_map<std::uint64_t, frame_entry> frames_;                       // by address
  std::unordered_map<std::int64_t, std::vector<region_fields>> region_blocks_;  // by thread
  encoded_region_block encoded_block_;                                          // reused: its string keeps its capacity
  struct total_key {
    std::int64_t thread, window, stack;
    bool operator==(const total_key&) const = default;
  };
  struct total_key_hash {
    std::size_t operator()(const total_key& key) const noexcept {
      return std::hash<std::int64_t>{}((key.thread * 0x9e3779b97f4a7c15ll ^ key.window) * 0x100000001b3ll ^ key.stack);
    }
  };
  struct stack_total {
    std::int64_t samples = 0, weight_ns = 0, first_ns = 0, last_ns = 0;
  };
  std::unordered_map<total_key, stack_total, total_key_hash> stack_totals_;  // since the last commit
  // The timeline's buckets (table sample_timeline, schema.cpp): each thread's samples summed per
  // window and per bucket of bucket_width_ns_, a power of two of ns, aligned to its multiples. The
  // width doubles (pairs of buckets merge) whenever the samples' span, first to last, exceeds
  // timeline_buckets widths, so a (thread, window) has at most timeline_buckets + 1 rows however
  // long the run, and a bucket is under 2 / timeline_buckets of the span. The HTML timeline's 255
  // bins each cover at least span / 255: drawing a bucket's weight at its middle moves it by at
  // most half a bucket, under 255 / 8,192 < 1/32 of a bin (html.cpp checks it, and reads the
  // samples where a profile's buckets are wider).
  static constexpr std::int64_t timeline_buckets = 8192;
  struct bucket_key {
    std::int64_t thread, window, start_ns;
    bool operator==(const bucket_key&) const = default;
  };
  struct bucket_key_hash {
    std::size_t operator()(const bucket_key& key) const noexcept {
      return std::hash<std::int64_t>{}((key.thread * 0x9e3779b97f4a7c15ll ^ key.window) * 0x100000001b3ll ^
                                       key.start_ns);
    }
  };
  struct bucket_sum {
    std::int64_t samples = 0, weight_ns = 0;
  };
  std::unordered_map<bucket_key, bucket_sum, bucket_key_hash> timeline_buckets_;  // since the last commit
  std::int64_t bucket_width_ns_ = 1, committed_bucket_width_ns_ = 1;
  // The span of every sample added (rolled-back ones too: the width never narrows).
  std::int64_t first_sample_ns_ = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_sample_ns_ = std::numeric_limits<std::int64_t>::min();
  // Real-time samples per window, counted as they are added (count_window_rows needs no pass
  // over their table): since the last commit, and committed.
  std::map<std::int64_t, std::int64_t> realtime_window_rows_, committed_realtime_window_rows_;
  struct edge_hash {
    std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& edge) const noexcept {
      return std::hash<std::int64_t>{}(edge.first * 0x9e3779b97f4a7c15ll ^ edge.second);
    }
  };
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, std::int64_t, edge_hash> stacks_;
  // Whole stacks seen before, by their addresses (leaf first): most samples repeat a stack, and
  // one lookup replaces a walk of the trie frame by frame.
  struct addresses_hash {
    using is_transparent = void;
    std::size_t operator()(std::span<const std::uint64_t> addresses) const noexcept {
      std::uint64_t hash = 0xcbf29ce484222325ull;
      for (const auto address : addresses) hash = (hash ^ address) * 0x100000001b3ull;
      return static_cast<std::size_t>(hash ^ (hash >> 29));
    }
  };
  struct addresses_equal {
    using is_transparent = void;
    bool operator()(std::span<const std::uint64_t> a, std::span<const std::uint64_t> b) const noexcept {
      return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }
  };
  std::unordered_map<std::vector<std::uint64_t>, std::int64_t, addresses_hash, addresses_equal> whole_stacks_;
  row_ids newest_, committed_;  // the newest row inserted; the newest committed
};

}  // namespace kairos::database
