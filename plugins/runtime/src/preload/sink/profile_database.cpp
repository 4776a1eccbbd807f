#include "preload/sink/profile_database.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbolizer.hpp>
#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/writer.hpp>

#include "preload/support/clock.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/threads/thread_registry.hpp"

namespace kairos::runtime {
namespace {

// One process's file. A fork child abandons its parent's (never touching it) and makes its own.
struct database_file {
  bool creation_failed = false;
  std::string path;
  std::unique_ptr<database::profile_writer> writer;
  std::unique_ptr<backtrace_symbolizer> symbols;  // created on the first address the cache lacks
  std::unique_ptr<symbol_cache> known_symbols;    // created on first use
  symbol_cache_use symbol_use;
  std::int64_t process_row = -1;
  std::int64_t last_commit_ns = 0;
  std::unordered_map<const thread_record*, std::int64_t> thread_rows;
  std::pair<const thread_record*, std::int64_t> last_thread_row{nullptr, -1};
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> gpu_device_rows;  // (api, index)
  database_counts counts;                                                        // committed rows (and rows lost)
  database_counts pending;  // inserted since the last commit: lost with it if it fails
  problem first_problem;
  // The Perfetto trace's sample packets, streamed as commits store their samples (the writer's
  // stream_perfetto_samples); `samples_whole` as the finish left it.
  std::string samples_path;
  owned_descriptor samples_file;
  bool samples_whole = false;
};

enum class exec_continuation { none, earlier_image, same_image };

// Counts of the metadata that an exec chain's images add up (the rest is the last image's).
constexpr std::array summed_over_images{
    database::metadata_key::dropped_samples,
    database::metadata_key::dropped_region_rows,
    database::metadata_key::dropped_gpu_records,
    database::metadata_key::dropped_mpi_calls,
    database::metadata_key::dropped_process_samples,
    database::metadata_key::dropped_annotation_ranges,
    database::metadata_key::rows_lost,
    database::metadata_key::unsampled_cpu_ns,
    database::metadata_key::unsampled_threads,
    database::metadata_key::sampling_unwound_by_tables,
    database::metadata_key::sampling_threads_by_ring,
    database::metadata_key::python_samples,
    database::metadata_key::python_unmatched_samples,
    database::metadata_key::python_torn_samples,
    database::metadata_key::python_read_safely_samples,
    database::metadata_key::python_unreadable_code,
    database::metadata_key::traced_events,
    database::metadata_key::exec_chain_cpu_ns_not_carried,
    database::metadata_key::children_unprofiled_processes,
    database::metadata_key::children_unprofiled_cpu_ns,
};
// Lists of lines the chain's images append to.
constexpr std::array appended_over_images{database::metadata_key::children_unprofiled_by_name};

// On the heap, never destroyed: finalize may run after static destructors.
struct database_state {
  std::mutex mutex;
  path_resolver resolve_path = nullptr;
  std::string command;
  metadata_list metadata;
  std::int64_t flush_interval_ns = 1'000'000'000;
  source_lines lines = source_lines::own;
  symbol_cache_choice symbol_cache_place;
  bool stream_perfetto_samples = false;
  // When kairos started in this process (a fork child: the fork), not when the file was created:
  // the process row's start, from which the outputs' timelines count.
  std::int64_t process_start_ns = 0;
  std::optional<std::int64_t> rank, size;
  std::string launch_id;
  database_file* file = nullptr;                       // null until the first row (in this process)
  std::vector<database::window_info> windows_waiting;  // until the file exists
  std::vector<database::gpu_device_info> gpu_devices_waiting;
  exec_continuation after_exec = exec_continuation::none;
  std::string image_command;  // set before an exec: "N<TAB>command"
  std::int64_t cpu_ns_not_carried = 0;
  std::map<std::string, std::int64_t, std::less<>> earlier_sums;  // the summed keys, as the earlier images left them
  std::map<std::string, std::string, std::less<>> earlier_lines;  // the appended keys
};
database_state* state = nullptr;

std::int64_t number_or_zero(std::string_view text) {
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// A metadata value with the earlier images' part added, for the keys the chain sums.
std::string carried_over(std::string_view key, std::string value) {
  if (key == database::metadata_key::program_cpu_ns) {
    const auto found = state->earlier_sums.find(database::metadata_key::exec_chain_cpu_ns_not_carried);
    if (found == state->earlier_sums.end()) return value;
    return std::to_string(number_or_zero(value) + found->second);
  }
  if (const auto lines = state->earlier_lines.find(key); lines != state->earlier_lines.end())
    return lines->second + value;
  const auto found = state->earlier_sums.find(key);
  if (found == state->earlier_sums.end()) return value;
  return std::to_string(number_or_zero(value) + found->second);
}

database_file& file() {
  if (!state->file) state->file = new database_file;
  return *state->file;
}

std::string_view lines_variant(source_lines lines) {
  return lines == source_lines::all ? "all" : lines == source_lines::off ? "off" : "own";
}

// An address the cache answers costs no symbolizer: a run whose addresses were all seen before
// never loads libdw.
backtrace_symbol symbol_of(std::uintptr_t address) {
  auto& known = file().known_symbols;
  if (!known) {
    known =
        std::make_unique<symbol_cache>(state->symbol_cache_place.directory, std::string{lines_variant(state->lines)});
    file().symbol_use.directory = known->directory().string();
  }
  ++file().symbol_use.addresses;
  if (auto cached = known->find(address)) return std::move(*cached);
  // libdw keeps the ELF and debug files it reads open: above kairos's floor, like every
  // descriptor kairos keeps, they never sit on a number the program uses.
  // kairos's own frames get names, not lines (few get here: a sample's stack is folded first,
  // pipeline/delivery.cpp).
  if (!file().symbols)
    file().symbols = std::make_unique<backtrace_symbolizer>(&move_above_floor, state->lines,
                                                            reinterpret_cast<const void*>(&symbol_of));
  const auto& symbol = file().symbols->resolve(address);
  known->remember(symbol);
  return symbol;
}

std::atomic<named_frame_lookup> named_frames{nullptr};

database::frame_info symbolize(std::uint64_t address) {
  own_cost_timer cost{own_cost::symbols};
  if (const auto named = named_frames.load(std::memory_order_acquire)) {
    database::frame_info frame;
    if (named(address, frame)) return frame;
  }
  const auto symbol = symbol_of(static_cast<std::uintptr_t>(address));
  database::frame_info frame;
  frame.address = address;
  frame.module = symbol.module == "[unknown]" ? std::string{} : symbol.module;
  frame.offset = symbol.module_offset;
  frame.function = symbol.function;
  frame.file = symbol.file;
  frame.line = static_cast<std::uint32_t>(symbol.line > 0 ? symbol.line : 0);
  if (symbol.from_jit_map) frame.language = "jit";
  return frame;
}

// SQLite opens its files with the lowest free numbers, the program's territory; through these
// hooks its descriptors live above kairos's floor, survive the program's close_range, and are
// never closed once the program has the number (see support/private_descriptor.hpp).
int open_above_floor(const char* path, int flags, mode_t mode) {
  return move_above_floor(::open(path, flags | O_CLOEXEC, mode));
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

std::uint64_t pending_rows() {
  const auto& pending = file().pending;
  return pending.samples + pending.realtime_samples + pending.regions + pending.gpu_kernels + pending.gpu_copies +
         pending.mpi_calls;
}

// The first failure is said when it happens, not only at exit; later ones are counted.
void report_first(problem failure) {
  if (file().first_problem) return;
  file().first_problem = std::move(failure);
  report(file().first_problem);
}

// A program that closes every descriptor with a raw close_range system call (libc's is wrapped)
// closes SQLite's too, and every later write fails with EBADF. The file holds what was committed:
// it is opened again and the rows go on. Without this the rest of the run was lost.
void reopen_after_descriptors_closed(std::uint64_t rows_lost) {
  const auto& path = file().path;
  auto failure = capture_problem(fmt::format("the profile database {} could not be opened again", path), [&] {
    file().writer.reset();  // SQLite's close of numbers no longer its own is skipped (close_moved)
    file().writer = std::make_unique<database::profile_writer>(path, &symbolize, database::profile_writer::reopen);
    file().writer->database().execute("PRAGMA main.locking_mode = EXCLUSIVE");
  });
  if (failure) {
    file().writer.reset();
    file().creation_failed = true;  // nothing more is written; what was committed stays readable
    report_first(problem{failure.text() + " after the program closed its descriptors"});
    return;
  }
  report(
      problem{fmt::format("the program closed the profile database's descriptors behind libc's back (a raw "
                          "close_range or close system call): {} opened again, {} row{} since its last "
                          "commit lost",
                          path, rows_lost, rows_lost == 1 ? "" : "s")});
}

// After a failed insert (its row lost) or commit. When the transaction ended with it (a commit
// rolls back what it could not write; SQLite ends one on an I/O error or a full disk), every row
// since the last commit went too, and the row ids kept here of rows it held are forgotten.
void recover_from(problem failure, bool in_commit) {
  auto& rows = file();
  auto& writer = *rows.writer;
  const bool ended = in_commit || writer.roll_back_if_ended();
  const auto lost = (in_commit ? 0 : 1) + (ended ? pending_rows() : 0);
  rows.counts.rows_lost += lost;
  if (ended) {
    rows.pending = {};
    const auto& committed = writer.committed_rows();
    std::erase_if(rows.thread_rows, [&](const auto& entry) { return entry.second > committed.thread; });
    std::erase_if(rows.gpu_device_rows, [&](const auto& entry) { return entry.second > committed.gpu_device; });
    rows.last_thread_row = {nullptr, -1};
  }
  if (sqlite3_system_errno(writer.database().handle()) == EBADF && ended)
    reopen_after_descriptors_closed(lost);
  else
    report_first(std::move(failure));
}

// A failed commit loses the transaction's rows: they are counted as lost, not as written.
void commit_now() {
  if (auto failure = capture_problem("writing the profile database failed", [] { file().writer->commit(); })) {
    recover_from(std::move(failure), true);
    return;
  }
  auto& rows = file();
  rows.counts.samples += rows.pending.samples;
  rows.counts.realtime_samples += rows.pending.realtime_samples;
  rows.counts.regions += rows.pending.regions;
  rows.counts.gpu_kernels += rows.pending.gpu_kernels;
  rows.counts.gpu_copies += rows.pending.gpu_copies;
  rows.counts.mpi_calls += rows.pending.mpi_calls;
  rows.pending = {};
}

// The samples' packets go to a file of their own, created exclusively (never one found there, nor
// through a link). Without it, the trace is written from the database as kairos-report does.
void stream_samples() {
  auto& rows = file();
  rows.samples_path = database::perfetto_samples_path_of(rows.path);
  rows.samples_file.adopt(
      ::open(rows.samples_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!rows.samples_file) {
    rows.samples_path.clear();
    return;
  }
  rows.writer->stream_perfetto_samples([&descriptor = rows.samples_file](std::string_view packets) {
    if (!descriptor.still_ours()) return false;  // the program closed it: the trace comes from the database
    while (!packets.empty()) {
      const auto written = ::write(descriptor.get(), packets.data(), packets.size());
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return false;
      packets.remove_prefix(static_cast<std::size_t>(written));
    }
    return true;
  });
}

std::int64_t integer_of(database::connection& database, std::string_view sql) {
  auto query = database.prepare(sql);
  return query.step() && !query.is_null(0) ? query.integer(0) : 0;
}

std::optional<std::string> metadata_value(database::connection& database, std::string_view key) {
  auto query = database.prepare("SELECT value FROM metadata WHERE key = ?");
  query.bind(1, key);
  if (!query.step()) return std::nullopt;
  return std::string{query.text(0)};
}

// The earlier images' rows: their threads marked with their image's number, their counts kept.
void take_over_earlier_image(database::profile_writer& writer) {
  namespace key = database::metadata_key;
  auto& database = writer.database();
  if (auto pending = metadata_value(database, key::exec_chain_pending)) {
    if (state->after_exec == exec_continuation::earlier_image) {
      const auto marked = number_or_zero(metadata_value(database, key::exec_chain_marked_threads).value_or("0"));
      writer.mark_threads(marked, fmt::format(" [image {}]", pending->substr(0, pending->find('\t'))));
      writer.set_metadata(key::exec_chain_images,
                          metadata_value(database, key::exec_chain_images).value_or("") + *pending + "\n");
      writer.set_metadata(key::exec_chain_marked_threads,
                          std::to_string(integer_of(database, "SELECT COALESCE(MAX(id), 0) FROM thread")));
    }
    database.prepare("DELETE FROM metadata WHERE key = ?").bind(1, key::exec_chain_pending).run();
  }
  if (state->after_exec == exec_continuation::earlier_image) {
    for (const auto summed : summed_over_images)
      if (auto value = metadata_value(database, summed))
        state->earlier_sums[std::string{summed}] = number_or_zero(*value);
    for (const auto appended : appended_over_images)
      if (auto value = metadata_value(database, appended)) state->earlier_lines[std::string{appended}] = *value;
  }
  const auto images = metadata_value(database, key::exec_chain_images).value_or("");
  file().counts.earlier_images = static_cast<std::uint64_t>(std::count(images.begin(), images.end(), '\n'));
  file().counts.samples = static_cast<std::uint64_t>(integer_of(database, "SELECT COUNT(*) FROM sample"));
  file().counts.realtime_samples =
      static_cast<std::uint64_t>(integer_of(database, "SELECT COUNT(*) FROM realtime_sample"));
}

// Under the mutex: goes on with the profile an earlier image of this process (or this image, before
// an exec that failed) left at the path. A file that is not that profile is left alone.
bool continue_after_exec() {
  auto failure =
      capture_problem(fmt::format("cannot go on with the exec chain's profile database {}", file().path), [] {
        const bool same_image = state->after_exec == exec_continuation::same_image;
        // The same image's addresses still name its code: its frames and stacks are reused.
        file().writer = same_image ? std::make_unique<database::profile_writer>(file().path, &symbolize,
                                                                                database::profile_writer::reopen)
                                   : std::make_unique<database::profile_writer>(file().path, &symbolize,
                                                                                database::profile_writer::after_exec);
        auto& writer = *file().writer;
        writer.database().execute("PRAGMA main.locking_mode = EXCLUSIVE");
        const auto pid = std::to_string(getpid());
        auto& database = writer.database();
        namespace keys = database::metadata_key;
        if (metadata_value(database, keys::pid) != pid || metadata_value(database, keys::end_reason) != "exec")
          throw database::database_error{"it is not the profile of this process's earlier image (pid " + pid +
                                         ", ended by an exec)"};
        file().process_row = integer_of(database, "SELECT MAX(id) FROM process");
        writer.set_process_command(file().process_row, state->command);
        take_over_earlier_image(writer);
        for (const auto& [key, value] : state->metadata) writer.set_metadata(key, carried_over(key, value));
        database.prepare("DELETE FROM metadata WHERE key = ?").bind(1, keys::end_reason).run();
        for (const auto& window : state->windows_waiting) writer.add_window(window);
        state->windows_waiting.clear();
        for (const auto& device : state->gpu_devices_waiting)
          file().gpu_device_rows[{device.api, device.index}] = writer.add_gpu_device(device);
        state->gpu_devices_waiting.clear();
        writer.commit();
      });
  file().last_commit_ns = steady_now_ns();
  if (!failure) return true;
  file().writer.reset();
  file().creation_failed = true;
  file().first_problem = problem{failure.text() + "; this image's profile is not written"};
  report(file().first_problem);
  return false;
}

// Under the mutex. Creates the file on first use; false when there is none (and will be none).
bool create_if_needed() {
  if (file().writer) return true;
  if (file().creation_failed || !state->resolve_path) return false;
  own_cost_timer cost{own_cost::database_creation};
  file().path = state->resolve_path();
  struct stat status {};
  const bool existed_before = lstat(file().path.c_str(), &status) == 0;  // then it is not ours
  if (existed_before && state->after_exec != exec_continuation::none) return continue_after_exec();
  auto failure = capture_problem(fmt::format("cannot write the profile database {}", file().path), [] {
    if (auto* vfs = sqlite3_vfs_find(nullptr); vfs && vfs->xSetSystemCall) {
      vfs->xSetSystemCall(vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(&open_above_floor));
      vfs->xSetSystemCall(vfs, "close", reinterpret_cast<sqlite3_syscall_ptr>(&close_moved));
    }
    // The output path's directories are created (docs/settings.md says so).
    const auto directory = std::filesystem::path{file().path}.parent_path();
    std::error_code error;
    if (!directory.empty() && !std::filesystem::create_directories(directory, error) && error)
      throw std::runtime_error{fmt::format("cannot create the directory {}: {}", directory.string(), error.message())};
    file().writer = std::make_unique<database::profile_writer>(file().path, &symbolize);
    // The file's lock is kairos's until the finish: with a rollback journal, a reader inside the
    // file while the program runs (a report, a browser left open) would hold off every commit, and
    // a commit kept waiting fails with its rows. Readers wait for the program's end instead (5 s,
    // then "database is locked"). Also one lock a commit fewer.
    file().writer->database().execute("PRAGMA main.locking_mode = EXCLUSIVE");
    if (state->stream_perfetto_samples) stream_samples();
    database::process_info process;
    process.pid = getpid();
    process.ppid = getppid();
    process.hostname = host_name();
    process.command = state->command;
    process.start_ns = state->process_start_ns;
    process.rank = state->rank;
    process.size = state->size;
    process.launch_id = state->launch_id;
    file().process_row = file().writer->add_process(process);
    namespace keys = database::metadata_key;
    file().writer->set_metadata(keys::host, process.hostname);
    file().writer->set_metadata(keys::kairos_version, KAIROS_VERSION);
    file().writer->set_metadata(keys::pid, std::to_string(process.pid));
    const auto clocks = boottime_and_monotonic_ns();
    file().writer->set_metadata(keys::clock_boottime_monotonic_ns,
                                fmt::format("{} {}", clocks.boottime_ns, clocks.monotonic_ns));
    for (const auto& [key, value] : state->metadata) file().writer->set_metadata(key, value);
    for (const auto& window : state->windows_waiting) file().writer->add_window(window);
    state->windows_waiting.clear();
    for (const auto& device : state->gpu_devices_waiting)
      file().gpu_device_rows[{device.api, device.index}] = file().writer->add_gpu_device(device);
    state->gpu_devices_waiting.clear();
    file().writer->commit();
  });
  file().last_commit_ns = steady_now_ns();
  if (failure) {
    file().writer.reset();
    file().creation_failed = true;
    // What the failed creation left (the exclusively created file is kairos's): no half file.
    std::error_code ignored;
    if (!existed_before)
      for (const char* suffix : {"", "-journal"}) std::filesystem::remove(file().path + suffix, ignored);
    if (file().samples_file) {
      file().samples_file.close_if_ours();
      std::filesystem::remove(file().samples_path, ignored);
    }
    file().first_problem = problem{failure.text() +
                                   "; set KAIROS_OUTPUT_PATH (kairos-run -o) to a "
                                   "writable location; the program is unaffected"};
    report(file().first_problem);
    return false;
  }
  return true;
}

std::int64_t thread_row(thread_record& thread) {
  // Rows come in runs of one thread (a drained log, a sample buffer): one lookup a run.
  auto& last = file().last_thread_row;
  if (last.first == &thread) return last.second;
  auto [entry, added] = file().thread_rows.try_emplace(&thread, -1);
  if (added) {
    database::thread_info info;
    info.internal_id = static_cast<std::int64_t>(thread.internal_id);
    info.sequent_id = static_cast<std::int64_t>(thread.sequent_id);
    info.tid = thread.tid;
    info.name = thread.name_text();
    info.start_ns = thread.start_ns;
    entry->second = file().writer->add_thread(file().process_row, info);
  }
  last = {&thread, entry->second};
  return entry->second;
}

// Runs one insert; a failure is counted (and the first one reported), never thrown.
template <class Insert>
void insert(Insert&& work) {
  if (!create_if_needed()) return;
  if (auto failure = capture_problem("writing the profile database failed", work))
    recover_from(std::move(failure), false);
}

// What this run symbolized, for the next run. A failure only costs the next run the work again:
// said when the user named the directory, else only counted.
void save_symbol_cache() {
  own_cost_timer cost{own_cost::symbols};
  auto& known = file().known_symbols;
  if (!known) return;
  const problem failure = known->save();
  if (!failure) return;
  file().symbol_use.not_saved = problem{"the symbol cache was not updated: " + failure.text()};
  if (state->symbol_cache_place.named_by_user)
    report(problem{file().symbol_use.not_saved.text() + " (KAIROS_SYMBOL_CACHE names the directory; off: no cache)"});
}

}  // namespace

void set_named_frames(named_frame_lookup named) { named_frames.store(named, std::memory_order_release); }

void configure_profile_database(path_resolver path_of_this_process, std::string command, metadata_list metadata,
                                std::int64_t flush_interval_ns, source_lines lines,
                                symbol_cache_choice symbol_cache_place, bool stream_perfetto_samples) {
  if (!state) state = new database_state;
  std::lock_guard lock{state->mutex};
  state->resolve_path = path_of_this_process;
  state->command = std::move(command);
  state->metadata = std::move(metadata);
  state->flush_interval_ns = flush_interval_ns;
  state->lines = lines;
  state->symbol_cache_place = std::move(symbol_cache_place);
  state->stream_perfetto_samples = stream_perfetto_samples;
  state->process_start_ns = steady_now_ns();
}

void add_database_metadata(std::string key, std::string value) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  if (file().writer)
    insert([&] { file().writer->set_metadata(key, carried_over(key, value)); });
  else
    state->metadata.emplace_back(std::move(key), std::move(value));
}

void set_database_launch(std::optional<std::int64_t> rank, std::optional<std::int64_t> size, std::string launch_id) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  state->rank = rank;
  state->size = size;
  state->launch_id = std::move(launch_id);
}

database_batch::database_batch() {
  if (state) state->mutex.lock();
}
database_batch::~database_batch() {
  if (state) state->mutex.unlock();
}

bool database_batch::writable() { return state && state->resolve_path && !file().creation_failed; }

void database_batch::add_sample(thread_record& thread, sample_clock clock, std::int64_t time_ns, std::int64_t weight_ns,
                                std::span<const std::uint64_t> stack, std::int32_t window) {
  if (!writable()) return;
  insert([&] {
    const auto row = thread_row(thread);
    const auto stack_row = file().writer->add_stack(stack);
    if (clock == sample_clock::cpu_time) {
      file().writer->add_sample(row, time_ns, weight_ns, stack_row, window);
      ++file().pending.samples;
    } else {
      file().writer->add_realtime_sample(row, time_ns, weight_ns, stack_row, window);
      ++file().pending.realtime_samples;
    }
  });
}

void database_batch::add_counter(thread_record& thread, std::int64_t time_ns, std::string_view name, double value,
                                 std::int32_t window) {
  if (!writable()) return;
  insert([&] { file().writer->add_counter(thread_row(thread), time_ns, name, value, window); });
}

void database_batch::add_process_metric(std::int64_t time_ns, std::string_view metric, thread_record* thread,
                                        std::optional<std::int64_t> instance, double value, std::int32_t window) {
  if (!writable() || !has_file()) return;
  insert([&] {
    file().writer->add_process_metric(time_ns, metric,
                                      thread ? std::optional<std::int64_t>{thread_row(*thread)} : std::nullopt,
                                      instance, value, window);
  });
}

void database_batch::add_regions(thread_record& thread,
                                 std::span<const database::profile_writer::region_input> regions) {
  if (regions.empty() || !writable()) return;
  insert([&] {
    file().writer->add_regions(thread_row(thread), regions);
    file().pending.regions += regions.size();
  });
}

void database_batch::add_call_tree(thread_record& thread,
                                   std::span<const database::profile_writer::call_tree_input> nodes) {
  if (nodes.empty() || !writable()) return;
  insert([&] { file().writer->add_call_tree(thread_row(thread), nodes); });
}

void database_batch::add_window(const database_window& window) {
  if (!writable()) return;
  database::window_info row{window.ordinal,       window.spec,        std::string{window.clock},
                            window.planned_start, window.planned_end, window.actual_start,
                            window.actual_end,    window.start_ns,    window.end_ns};
  if (!has_file()) {
    std::erase_if(state->windows_waiting,
                  [&](const database::window_info& waiting) { return waiting.ordinal == row.ordinal; });
    state->windows_waiting.push_back(std::move(row));
    return;
  }
  insert([&] { file().writer->add_window(row); });
}

namespace {
database::gpu_work_origin origin_row(const gpu_origin& origin) {
  database::gpu_work_origin row;
  if (origin.thread) row.thread = thread_row(*origin.thread);
  if (!origin.stack_leaf_first.empty()) row.stack = file().writer->add_stack(origin.stack_leaf_first);
  row.call_ns = origin.call_ns;
  row.correlation = origin.correlation;
  row.window = origin.window;
  return row;
}
std::optional<std::int64_t> gpu_device_row(std::string_view api, std::int64_t index) {
  const auto found = file().gpu_device_rows.find({std::string{api}, index});
  if (found == file().gpu_device_rows.end()) return std::nullopt;
  return found->second;
}
}  // namespace

void database_batch::add_gpu_device(const database::gpu_device_info& device) {
  if (!writable()) return;
  if (!has_file()) {
    state->gpu_devices_waiting.push_back(device);
    return;
  }
  insert([&] { file().gpu_device_rows[{device.api, device.index}] = file().writer->add_gpu_device(device); });
}

void database_batch::add_gpu_kernel(std::string_view api, std::int64_t device_index,
                                    const database::gpu_kernel_info& kernel, const gpu_origin& origin) {
  if (!writable()) return;
  insert([&] {
    file().writer->add_gpu_kernel(gpu_device_row(api, device_index), kernel, origin_row(origin));
    ++file().pending.gpu_kernels;
  });
}

void database_batch::add_gpu_copy(std::string_view api, std::int64_t device_index, const database::gpu_copy_info& copy,
                                  const gpu_origin& origin) {
  if (!writable()) return;
  insert([&] {
    file().writer->add_gpu_copy(gpu_device_row(api, device_index), copy, origin_row(origin));
    ++file().pending.gpu_copies;
  });
}

void database_batch::add_gpu_api_call(std::string_view api, std::string_view name, std::int64_t start_ns,
                                      std::int64_t end_ns, const gpu_origin& origin) {
  if (!writable()) return;
  insert([&] { file().writer->add_gpu_api_call(api, name, start_ns, end_ns, origin_row(origin)); });
}

void database_batch::add_mpi_call(thread_record& thread, std::string_view name, std::int64_t start_ns,
                                  std::int64_t end_ns, std::optional<std::int64_t> bytes,
                                  std::optional<std::int64_t> peer, std::int32_t window) {
  if (!writable()) return;
  insert([&] {
    file().writer->add_mpi_call(thread_row(thread), name, start_ns, end_ns, bytes, peer, window);
    ++file().pending.mpi_calls;
  });
}

void database_batch::add_causal_experiment(const database::causal_experiment_info& experiment,
                                           std::span<const database::causal_progress_info> progress) {
  if (!writable()) return;
  insert([&] { file().writer->add_causal_experiment(experiment, progress); });
}

void database_batch::add_causal_samples(std::string_view scope, std::string_view location, std::int64_t samples) {
  if (!writable()) return;
  insert([&] { file().writer->add_causal_samples(scope, location, samples); });
}

void database_batch::add_region_kind(std::string_view name, std::string_view kind) {
  if (!writable()) return;
  insert([&] { file().writer->add_region_kind(name, kind); });
}

void database_batch::add_openmp_thread_time(std::string_view region, std::int64_t thread, std::int64_t instances,
                                            std::int64_t work_ns, std::int64_t wait_ns) {
  if (!writable()) return;
  insert([&] { file().writer->add_openmp_thread_time(region, thread, instances, work_ns, wait_ns); });
}

void database_batch::add_annotation_range(thread_record& thread, thread_record* end_thread, std::string_view kind,
                                          std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                                          std::int32_t window) {
  if (!writable()) return;
  insert([&] {
    const auto start_row = thread_row(thread);
    const std::optional<std::int64_t> end_row =
        end_thread == nullptr ? std::nullopt : std::optional<std::int64_t>{thread_row(*end_thread)};
    file().writer->add_annotation_range(start_row, end_row, kind, name, start_ns, end_ns, window);
  });
}

void database_batch::set_process_rank(std::int64_t rank, std::int64_t size) {
  if (!state) return;
  state->rank = rank;
  state->size = size;
  if (has_file()) insert([&] { file().writer->set_process_rank(file().process_row, rank, size); });
}

void database_batch::add_thread(thread_record& thread) {
  if (!has_file()) return;  // threads alone do not create the file
  insert([&] { thread_row(thread); });
}

void database_batch::end_thread(thread_record& thread) {
  if (!has_file()) return;
  insert([&] { file().writer->end_thread(thread_row(thread), thread.end_ns.load()); });
}

bool database_batch::has_file() const { return state && state->file && state->file->writer; }

void database_batch::commit(bool force) {
  if (!state || !state->file || !file().writer) return;
  const auto now = steady_now_ns();
  if (!force && now - file().last_commit_ns < state->flush_interval_ns) return;
  commit_now();
  file().last_commit_ns = now;
}

void continue_profile_database_after_exec(bool same_image) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  state->after_exec = same_image ? exec_continuation::same_image : exec_continuation::earlier_image;
}

std::string earlier_images_metadata(std::string_view key) {
  if (!state) return {};
  std::lock_guard lock{state->mutex};
  if (const auto lines = state->earlier_lines.find(key); lines != state->earlier_lines.end()) return lines->second;
  if (const auto found = state->earlier_sums.find(key); found != state->earlier_sums.end())
    return std::to_string(found->second);
  return {};
}

void end_image_before_exec(std::string image_command, std::int64_t cpu_ns_not_carried) {
  if (!state) return;
  std::lock_guard lock{state->mutex};
  state->image_command = std::move(image_command);
  state->cpu_ns_not_carried = cpu_ns_not_carried;
}

std::string finish_profile_database(std::string_view end_reason) {
  if (!state) return {};
  std::lock_guard lock{state->mutex};
  // An image that recorded nothing still ends the chain's profile, unless it too execs (the
  // next image goes on from the earlier images' rows).
  if (state->after_exec != exec_continuation::none && !file().writer && end_reason != "exec") {
    struct stat status {};
    if (state->resolve_path && lstat(state->resolve_path().c_str(), &status) == 0) create_if_needed();
  }
  if (!file().writer) return {};
  insert([&] {
    namespace key = database::metadata_key;
    file().writer->set_metadata(key::end_reason, end_reason);
    file().writer->set_metadata(key::rows_lost, carried_over(key::rows_lost, std::to_string(file().counts.rows_lost)));
    if (end_reason == "exec") {
      file().writer->set_metadata(key::exec_chain_pending, state->image_command);
      file().writer->set_metadata(
          key::exec_chain_cpu_ns_not_carried,
          carried_over(key::exec_chain_cpu_ns_not_carried, std::to_string(state->cpu_ns_not_carried)));
    }
    if (file().symbols) {
      if (const auto jit = file().symbols->jit_map_used(); !jit.path.empty()) {
        file().writer->set_metadata(database::metadata_key::jit_map_functions, std::to_string(jit.functions));
        file().writer->set_metadata(database::metadata_key::jit_map_malformed_lines,
                                    std::to_string(jit.malformed_lines));
      }
    }
    file().writer->end_process(file().process_row, steady_now_ns());
    file().writer->count_window_rows();
    database::create_deferred_indexes(file().writer->database());
  });
  commit_now();
  file().samples_whole = file().writer && file().writer->perfetto_samples_whole();  // none after a failed reopen
  save_symbol_cache();
  return file().path;
}

void close_profile_database() {
  if (!state || !state->file) return;
  std::lock_guard lock{state->mutex};
  if (!file().writer) return;
  // One self-contained file: the journal kept between commits (PERSIST) is deleted; the file's
  // lock is let go (at the read that follows), for the outputs and every other reader.
  insert([] {
    auto& database = file().writer->database();
    database.execute(
        "PRAGMA main.locking_mode = NORMAL; PRAGMA journal_mode = DELETE; SELECT count(*) FROM sqlite_master");
  });
  if (auto failure = capture_problem("closing the profile database failed", [] { file().writer.reset(); })) {
    ++file().counts.rows_lost;
    report_first(std::move(failure));
  }
  file().writer.reset();
  file().samples_file.close_if_ours();
  file().thread_rows.clear();
  file().last_thread_row = {nullptr, -1};
  file().gpu_device_rows.clear();
}

streamed_samples streamed_perfetto_samples() {
  if (!state || !state->file) return {};
  std::lock_guard lock{state->mutex};
  return {file().samples_path, !file().samples_path.empty() && file().samples_whole};
}

symbol_cache_use symbol_cache_used() {
  if (!state || !state->file) return {};
  std::lock_guard lock{state->mutex};
  auto use = file().symbol_use;
  if (const auto& known = file().known_symbols) use.from_cache = known->hits();
  return use;
}

database_counts database_counts_written() {
  if (!state || !state->file) return {};
  std::lock_guard lock{state->mutex};
  return file().counts;
}

problem database_problem() {
  if (!state || !state->file) return {};
  std::lock_guard lock{state->mutex};
  return file().first_problem;
}

void database_lock_for_fork() {
  if (state) state->mutex.lock();
}
void database_unlock_after_fork_in_parent() {
  if (state) state->mutex.unlock();
}

void database_forget_after_fork_in_child() noexcept {
  if (!state) return;
  // The connection and the symbolizer are the parent's: abandoned (leaked), never touched. The
  // child's own state is built when its first row arrives, in ordinary code, not in this handler.
  state->file = nullptr;
  state->process_start_ns = steady_now_ns();
  new (&state->windows_waiting) std::vector<database::window_info>;  // the parent's, leaked
  new (&state->gpu_devices_waiting) std::vector<database::gpu_device_info>;
  state->mutex.unlock();  // taken by this thread in database_lock_for_fork
}

}  // namespace kairos::runtime
