#pragma once
// The sink: the process's profile database (plugins/database). It knows rows, never producers:
// samples, regions and threads reach it as plain values through pipeline/delivery.cpp, which
// turns each producer's batches into rows. The file is created only once there is something to
// write (a program that records nothing costs no database), then committed every
// KAIROS_FLUSH_INTERVAL so a killed program leaves a valid database up to the last commit.
// One profile_writer behind one mutex: writers symbolize and insert in turn (SQLite has one
// writer per database anyway). A failed insert is counted, never thrown at the producer.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kairos/plugins/backtrace/symbol_cache.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>
#include <kairos/plugins/database/writer.hpp>

#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct thread_record;

struct database_counts {
  std::uint64_t earlier_images = 0;  // of the exec chain, whose rows the database holds
  std::uint64_t samples = 0;
  std::uint64_t realtime_samples = 0;
  std::uint64_t regions = 0;
  std::uint64_t gpu_kernels = 0;
  std::uint64_t gpu_copies = 0;
  std::uint64_t mpi_calls = 0;
  std::uint64_t rows_lost = 0;  // inserts that failed (disk full, I/O error)
};

using metadata_list = std::vector<std::pair<std::string, std::string>>;

// Where symbolized addresses are kept from one run to the next (backtrace/symbol_cache.hpp):
// an empty directory keeps none. A failure to write there is said only if the user named it.
struct symbol_cache_choice {
  std::filesystem::path directory;
  bool named_by_user = false;
};
// How the run's addresses were symbolized: how many the cache answered from what earlier runs
// saved (not from what this run learnt), and what failed.
struct symbol_cache_use {
  std::uint64_t addresses = 0, from_cache = 0;
  std::string directory;
  problem not_saved;  // why the cache was not updated for the next run
};

// What the database says about the run, and where it goes: `path_of_this_process` gives the
// file's path when the first row arrives (in a fork child, the child's); `command`, the process
// row's command line (what the outputs name the process by); `stream_perfetto_samples` when the
// run writes a Perfetto trace: each commit's CPU samples are then encoded as the trace's packets
// into <stem>.perfetto-samples.part beside the database (streamed_perfetto_samples). Nothing is
// created yet.
using path_resolver = std::string (*)();
void configure_profile_database(path_resolver path_of_this_process, std::string command, metadata_list metadata,
                                std::int64_t flush_interval_ns, source_lines lines,
                                symbol_cache_choice symbol_cache_place, bool stream_perfetto_samples);
void add_database_metadata(std::string key, std::string value);

// Exec chains (docs/runtime.md): one profile for every image of a process. An image about to exec
// ends the database with end_reason "exec" and `image_command` (its number in the chain and
// command line, "N<TAB>command") waiting in its metadata. The next image calls
// continue_profile_database_after_exec() at init: the file its path resolver gives, when it holds
// this pid's profile ended by an exec, is continued instead of created: the earlier images' threads
// are marked " [image N]", their counts and losses carried on. `same_image`: the exec failed and
// this image goes on with its own profile. The file is opened with the first row, or at the finish
// (the earlier images' rows are reported even when this image records none).
void continue_profile_database_after_exec(bool same_image);
// Before the finish of an image about to exec: what the next image marks its threads with, and the
// CPU time of its threads other than the one that execs (their clocks end with the image; the
// exec'ing thread's goes on in the next image).
void end_image_before_exec(std::string image_command, std::int64_t cpu_ns_not_carried);
// A summed or appended metadata value as the earlier images left it ("": none), once the profile
// is open: what the exit line adds to this image's own.
std::string earlier_images_metadata(std::string_view key);
// Who the process is in an MPI launch, for its process row (rank and size none outside a launch).
void set_database_launch(std::optional<std::int64_t> rank, std::optional<std::int64_t> size, std::string launch_id);

// Frames that are not machine code (an interpreter's): addresses `named` answers for are named by
// it, not by the symbolizer, and never enter the symbol cache.
using named_frame_lookup = bool (*)(std::uint64_t address, database::frame_info& frame);
void set_named_frames(named_frame_lookup named);

enum class sample_clock { cpu_time, real_time };

// A row of the window table (docs/windows.md); amounts in the window's clock units.
struct database_window {
  std::int64_t ordinal = 0;
  std::string spec;
  std::string_view clock;
  std::int64_t planned_start = 0, planned_end = 0;
  std::optional<std::int64_t> actual_start, actual_end, start_ns, end_ns;
};

// Who asked for a GPU kernel, copy or call (rows of the gpu_* tables, docs/plugins/gpu.md).
struct gpu_origin {
  thread_record* thread = nullptr;  // none: a thread kairos never saw
  std::span<const std::uint64_t> stack_leaf_first;
  std::int64_t call_ns = 0;
  std::int64_t correlation = 0;
  std::int32_t window = 0;
};

// Rows of one delivery, under the database's lock; the first row creates the file.
class database_batch {
 public:
  database_batch();
  ~database_batch();
  database_batch(const database_batch&) = delete;
  database_batch& operator=(const database_batch&) = delete;

  // `window`: the time window the row belongs to (0: no windows).
  void add_sample(thread_record& thread, sample_clock clock, std::int64_t time_ns, std::int64_t weight_ns,
                  std::span<const std::uint64_t> stack_leaf_first, std::int32_t window);
  void add_counter(thread_record& thread, std::int64_t time_ns, std::string_view name, double value,
                   std::int32_t window);
  // A value process sampling read (the process_metric table): `thread` for a thread's own metric,
  // `instance` the core or GPU it is of. Like a window, it does not create the file.
  void add_process_metric(std::int64_t time_ns, std::string_view metric, thread_record* thread,
                          std::optional<std::int64_t> instance, double value, std::int32_t window);
  // A thread's regions at once (a drained log): user-API regions by name, instrumented functions'
  // calls by address (symbolized like a sampled frame).
  void add_regions(thread_record& thread, std::span<const database::profile_writer::region_input> regions);
  // A thread's calls counted (the call_tree table), once at the end.
  void add_call_tree(thread_record& thread, std::span<const database::profile_writer::call_tree_input> nodes);
  // A window as planned, opened or closed (written again as it changes). Windows alone do not
  // create the file: they wait for the first row that does.
  void add_window(const database_window& window);
  // GPU activity. A device alone does not create the file (like a window); kernels and copies do.
  void add_gpu_device(const database::gpu_device_info& device);
  void add_gpu_kernel(std::string_view api, std::int64_t device_index, const database::gpu_kernel_info& kernel,
                      const gpu_origin& origin);
  void add_gpu_copy(std::string_view api, std::int64_t device_index, const database::gpu_copy_info& copy,
                    const gpu_origin& origin);
  void add_gpu_api_call(std::string_view api, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                        const gpu_origin& origin);
  // An MPI call (the mpi_call table); `bytes` and `peer` none where the call has none.
  void add_mpi_call(thread_record& thread, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                    std::optional<std::int64_t> bytes, std::optional<std::int64_t> peer, std::int32_t window);
  // A causal experiment and its progress points' counts (docs/causal.md); the samples each
  // location in scope received, once at the end.
  void add_causal_experiment(const database::causal_experiment_info& experiment,
                             std::span<const database::causal_progress_info> progress);
  void add_causal_samples(std::string_view scope, std::string_view location, std::int64_t samples);
  // Annotations (docs/openmp.md): a region name's kind, an OpenMP region's sums for one thread
  // of its team (by its number in the team), a range that need not nest (`end_thread`: null when
  // unknown).
  void add_region_kind(std::string_view name, std::string_view kind);
  void add_openmp_thread_time(std::string_view region, std::int64_t thread, std::int64_t instances,
                              std::int64_t work_ns, std::int64_t wait_ns);
  void add_annotation_range(thread_record& thread, thread_record* end_thread, std::string_view kind,
                            std::string_view name, std::int64_t start_ns, std::int64_t end_ns, std::int32_t window);
  // The rank and size MPI_Init gave: they replace the launcher's in the process row.
  void set_process_rank(std::int64_t rank, std::int64_t size);
  // A thread's row now (threads appear with their first sample or region otherwise).
  void add_thread(thread_record& thread);
  void end_thread(thread_record& thread);
  // Whether the file exists (it is created by the first sample, counter or region row).
  bool has_file() const;
  // Commits when the flush interval has passed (always with `force`).
  void commit(bool force);

 private:
  bool writable();
};

// The process's end, a last commit; returns the database's path, or "" when none was created.
// The database stays readable for the outputs; close_profile_database() closes it.
std::string finish_profile_database(std::string_view end_reason);
void close_profile_database();
// The file of the streamed samples' packets (configure_profile_database), after the database's
// finish: `path` "" when there is none; `whole` when it holds the packet of every sample the
// database holds (else a write or the database's reopening broke the stream, and the trace is
// written from the database). The caller removes it once the outputs are written.
struct streamed_samples {
  std::string path;
  bool whole = false;
};
streamed_samples streamed_perfetto_samples();
database_counts database_counts_written();
symbol_cache_use symbol_cache_used();
// The first failure (creating the file, an insert), if any; later ones are only counted.
problem database_problem();

// fork: the lock is held across fork, so a child never starts with SQLite or the symbolizer
// half-way through an update. In a child (async-signal-safe): the parent's connection is
// abandoned, never used nor closed; a followed child's database is created on its first row.
void database_lock_for_fork();
void database_unlock_after_fork_in_parent();
void database_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
