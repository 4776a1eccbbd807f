#include <kairos/plugins/database/writer.hpp>

#include <map>

#include <sqlite3.h>

#include <fmt/format.h>

#include "perfetto_packets.hpp"

namespace kairos::database {

struct profile_writer::statements {
  explicit statements(connection& database)
      : metadata{database, "INSERT OR REPLACE INTO metadata (key, value) VALUES (?, ?)"},
        string{database, "INSERT INTO string (value) VALUES (?)"},
        process{database,
                "INSERT INTO process (pid, ppid, rank, size, hostname, command, start_ns, launch_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"},
        process_end{database, "UPDATE process SET end_ns = ? WHERE id = ?"},
        process_rank{database, "UPDATE process SET rank = ?, size = ? WHERE id = ?"},
        thread{database,
               "INSERT INTO thread (process, internal_id, sequent_id, tid, name, start_ns) "
               "VALUES (?, ?, ?, ?, ?, ?)"},
        thread_end{database, "UPDATE thread SET end_ns = ? WHERE id = ?"},
        frame{database,
              "INSERT INTO frame (address, module, offset, function, file, line, language) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)"},
        stack{database, "INSERT INTO stack (parent, frame, depth) VALUES (?, ?, ?)"},
        sample{database, "INSERT INTO sample (thread, time_ns, weight_ns, stack, window) VALUES (?, ?, ?, ?, ?)"},
        stack_total{database,
                    "INSERT INTO stack_total (thread, window, stack, samples, weight_ns, first_ns, last_ns) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread, window, stack) DO UPDATE SET "
                    "samples = samples + excluded.samples, weight_ns = weight_ns + excluded.weight_ns, "
                    "first_ns = MIN(first_ns, excluded.first_ns), last_ns = MAX(last_ns, excluded.last_ns)"},
        sample_timeline{database,
                        "INSERT INTO sample_timeline (thread, window, start_ns, width_ns, samples, weight_ns) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread, window, start_ns) DO UPDATE SET "
                        "samples = samples + excluded.samples, weight_ns = weight_ns + excluded.weight_ns"},
        realtime_sample{database,
                        "INSERT INTO realtime_sample (thread, time_ns, weight_ns, stack, window) "
                        "VALUES (?, ?, ?, ?, ?)"},
        counter{database, "INSERT INTO counter (thread, time_ns, name, value, window) VALUES (?, ?, ?, ?, ?)"},
        process_metric{database,
                       "INSERT INTO process_metric (time_ns, metric, thread, instance, value, window) "
                       "VALUES (?, ?, ?, ?, ?, ?)"},
        region_block{database, region_block_insert_sql("region_block")},
        window{database,
               "INSERT OR REPLACE INTO window (ordinal, spec, clock, planned_start, planned_end, "
               "actual_start, actual_end, start_ns, end_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        gpu_device{database,
                   "INSERT INTO gpu_device (api, device_index, name, architecture, memory_bytes, "
                   "multiprocessors, clock_khz, memory_clock_khz) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"},
        gpu_kernel{database,
                   "INSERT INTO gpu_kernel (device, stream, name, start_ns, end_ns, grid_x, grid_y, "
                   "grid_z, block_x, block_y, block_z, shared_bytes, correlation, thread, call_ns, "
                   "stack, window) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        gpu_memcpy{database,
                   "INSERT INTO gpu_memcpy (device, stream, kind, bytes, start_ns, end_ns, "
                   "asynchronous, correlation, thread, call_ns, stack, window) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        gpu_api_call{database,
                     "INSERT INTO gpu_api_call (api, name, thread, start_ns, end_ns, correlation, "
                     "window) VALUES (?, ?, ?, ?, ?, ?, ?)"},
        call_tree{database,
                  "INSERT INTO call_tree (thread, node, parent, name, frame, window, calls, total_ns, min_ns, "
                  "max_ns, sum_squares_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        mpi_call{database,
                 "INSERT INTO mpi_call (thread, name, start_ns, end_ns, bytes, peer, window) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?)"},
        causal_experiment{database,
                          "INSERT INTO causal_experiment (scope, selected, speedup, start_ns, duration_ns, "
                          "delay_ns, selected_samples, window) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"},
        causal_progress{database,
                        "INSERT INTO causal_progress (experiment, name, kind, delta, arrivals, departures, "
                        "difference) VALUES (?, ?, ?, ?, ?, ?, ?)"},
        causal_sample{database, "INSERT OR REPLACE INTO causal_sample (scope, location, count) VALUES (?, ?, ?)"},
        region_kind{database, "INSERT OR IGNORE INTO region_kind (name, kind) VALUES (?, ?)"},
        openmp_thread_time{database,
                           "INSERT INTO openmp_thread_time (region, thread, instances, work_ns, wait_ns) "
                           "VALUES (?, ?, ?, ?, ?)"},
        annotation_range{database,
                         "INSERT INTO annotation_range (thread, end_thread, kind, name, start_ns, end_ns, window) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)"} {}

  statement metadata, string, process, process_end, process_rank, thread, thread_end, frame, stack, sample, stack_total,
      sample_timeline, realtime_sample, counter, process_metric, region_block, window, gpu_device, gpu_kernel,
      gpu_memcpy, gpu_api_call, call_tree, mpi_call, causal_experiment, causal_progress, causal_sample, region_kind,
      openmp_thread_time, annotation_range;
};

struct profile_writer::sample_stream {
  packet_sink append;
  bool whole = true;
  std::string pending;  // the packets of the samples since the last commit
  perfetto::sample_encoder encoder;
  std::int64_t last_thread = -1;
  std::pair<std::int64_t, std::int64_t> last_ids{0, 0};
};

profile_writer::profile_writer(const std::string& path, symbolizer symbolize)
    : database_{create_profile(path)},
      symbolize_{std::move(symbolize)},
      statements_{std::make_unique<statements>(database_)} {}

namespace {
std::int64_t newest_row(connection& database, std::string_view table) {
  auto newest = database.prepare(fmt::format("SELECT COALESCE(MAX(id), 0) FROM {}", table));
  newest.step();
  return newest.integer(0);
}
}  // namespace

profile_writer::profile_writer(const std::string& path, symbolizer symbolize, reopen_t)
    : database_{reopen_profile(path)},
      symbolize_{std::move(symbolize)},
      statements_{std::make_unique<statements>(database_)} {
  read_back(true);
}

profile_writer::profile_writer(const std::string& path, symbolizer symbolize, after_exec_t)
    : database_{reopen_profile(path)},
      symbolize_{std::move(symbolize)},
      statements_{std::make_unique<statements>(database_)} {
  read_back(false);
}

void profile_writer::read_back(bool with_code) {
  auto strings = database_.prepare("SELECT id, value FROM string");
  while (strings.step()) strings_.emplace(std::string{strings.text(1)}, strings.integer(0));
  if (with_code) {
    auto frames = database_.prepare("SELECT id, address, function FROM frame");
    while (frames.step())
      frames_.emplace(static_cast<std::uint64_t>(frames.integer(1)), frame_entry{frames.integer(0), frames.integer(2)});
    auto stacks = database_.prepare("SELECT id, COALESCE(parent, -1), frame FROM stack");
    while (stacks.step()) stacks_.emplace(std::pair{stacks.integer(1), stacks.integer(2)}, stacks.integer(0));
  }
  committed_ = {newest_row(database_, "string"), newest_row(database_, "frame"), newest_row(database_, "stack"),
                newest_row(database_, "thread"), newest_row(database_, "gpu_device")};
  newest_ = committed_;
  auto width = database_.prepare("SELECT COALESCE(MAX(width_ns), 1) FROM sample_timeline");
  width.step();
  bucket_width_ns_ = committed_bucket_width_ns_ = width.integer(0);
  auto span = database_.prepare("SELECT MIN(first_ns), MAX(last_ns) FROM stack_total");
  if (span.step() && !span.is_null(0)) first_sample_ns_ = span.integer(0), last_sample_ns_ = span.integer(1);
  // Once, after the connection broke: a pass over the real-time samples committed.
  auto realtime = database_.prepare("SELECT window, COUNT(*) FROM realtime_sample GROUP BY window");
  while (realtime.step()) committed_realtime_window_rows_[realtime.integer(0)] = realtime.integer(1);
}

void profile_writer::stream_perfetto_samples(packet_sink append) {
  sample_stream_ = std::make_unique<sample_stream>();
  sample_stream_->append = std::move(append);
}

bool profile_writer::perfetto_samples_whole() const noexcept { return sample_stream_ && sample_stream_->whole; }

void profile_writer::stream_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns,
                                   std::int64_t stack) {
  auto& stream = *sample_stream_;
  if (!stream.whole || stack <= 0) return;  // a sample without a stack has no packet (write_perfetto)
  if (thread != stream.last_thread) {
    const auto found = thread_ids_.find(thread);
    if (found == thread_ids_.end()) return;  // not this writer's thread: not in the trace either
    stream.last_thread = thread;
    stream.last_ids = found->second;
  }
  stream.encoder.append(stream.pending, stream.last_ids.first, stream.last_ids.second, time_ns, stack, weight_ns);
}

profile_writer::~profile_writer() {
  try {
    commit();
  } catch (...) {
    // The destructor must not throw; what was committed before stays valid.
  }
}

void profile_writer::ensure_transaction() {
  if (in_transaction_) return;
  database_.execute("BEGIN");
  in_transaction_ = true;
}

void profile_writer::commit() {
  try {
    write_region_blocks();
    write_stack_totals();
    write_timeline_buckets();
    if (!in_transaction_) return;
    database_.execute("COMMIT");
  } catch (...) {
    roll_back();
    throw;
  }
  in_transaction_ = false;
  committed_ = newest_;
  committed_bucket_width_ns_ = bucket_width_ns_;
  for (const auto& [window, rows] : realtime_window_rows_) committed_realtime_window_rows_[window] += rows;
  realtime_window_rows_.clear();
  // The samples are in the database now: their packets may follow them.
  if (sample_stream_ && !sample_stream_->pending.empty()) {
    auto& stream = *sample_stream_;
    if (stream.whole) stream.whole = stream.append(stream.pending);
    stream.pending.clear();
  }
}

bool profile_writer::roll_back_if_ended() {
  if (!in_transaction_ || sqlite3_get_autocommit(database_.handle()) == 0) return false;
  roll_back();
  return true;
}

void profile_writer::roll_back() noexcept {
  if (sqlite3_get_autocommit(database_.handle()) == 0)
    sqlite3_exec(database_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);  // a failure leaves it to SQLite
  in_transaction_ = false;
  // Rows are never deleted, so ids grow: those above the committed ones were rolled back.
  std::erase_if(strings_, [this](const auto& entry) { return entry.second > committed_.string; });
  std::erase_if(frames_, [this](const auto& entry) { return entry.second.frame > committed_.frame; });
  std::erase_if(stacks_, [this](const auto& entry) { return entry.second > committed_.stack; });
  std::erase_if(whole_stacks_, [this](const auto& entry) { return entry.second > committed_.stack; });
  region_blocks_.clear();
  stack_totals_.clear();
  timeline_buckets_.clear();  // the width stays: rows committed finer are merged at the next commit
  realtime_window_rows_.clear();
  if (sample_stream_) sample_stream_->pending.clear();  // their samples are gone
  newest_ = committed_;
}

std::int64_t profile_writer::intern(std::string_view text) {
  if (const auto found = strings_.find(text); found != strings_.end()) return found->second;
  ensure_transaction();
  statements_->string.bind(1, text).run();
  const auto id = newest_.string = database_.last_insert_id();
  strings_.emplace(std::string{text}, id);
  return id;
}

void profile_writer::set_metadata(std::string_view key, std::string_view value) {
  ensure_transaction();
  statements_->metadata.bind(1, key).bind(2, value).run();
}

namespace {
void bind_optional(statement& insert, int column, const std::optional<std::int64_t>& value) {
  value ? void(insert.bind(column, *value)) : void(insert.bind_null(column));
}
}  // namespace

std::int64_t profile_writer::add_process(const process_info& process) {
  const auto hostname = intern(process.hostname);
  const auto command = intern(process.command);
  ensure_transaction();
  auto& insert = statements_->process;
  insert.bind(1, process.pid).bind(2, process.ppid);
  bind_optional(insert, 3, process.rank);
  bind_optional(insert, 4, process.size);
  insert.bind(5, hostname).bind(6, command).bind(7, process.start_ns);
  process.launch_id.empty() ? void(insert.bind_null(8)) : void(insert.bind(8, std::string_view{process.launch_id}));
  insert.run();
  const auto id = database_.last_insert_id();
  process_pids_.insert_or_assign(id, process.pid);
  return id;
}

void profile_writer::set_process_rank(std::int64_t process, std::int64_t rank, std::int64_t size) {
  ensure_transaction();
  statements_->process_rank.bind(1, rank).bind(2, size).bind(3, process).run();
}

void profile_writer::add_mpi_call(std::int64_t thread, std::string_view name, std::int64_t start_ns,
                                  std::int64_t end_ns, std::optional<std::int64_t> bytes,
                                  std::optional<std::int64_t> peer, std::int64_t window) {
  const auto name_id = intern(name);
  ensure_transaction();
  auto& insert = statements_->mpi_call;
  insert.bind(1, thread).bind(2, name_id).bind(3, start_ns).bind(4, end_ns);
  bind_optional(insert, 5, bytes);
  bind_optional(insert, 6, peer);
  insert.bind(7, window).run();
}

std::int64_t profile_writer::add_causal_experiment(const causal_experiment_info& experiment,
                                                   std::span<const causal_progress_info> progress) {
  ensure_transaction();
  statements_->causal_experiment.bind(1, experiment.scope)
      .bind(2, experiment.selected)
      .bind(3, experiment.speedup)
      .bind(4, experiment.start_ns)
      .bind(5, experiment.duration_ns)
      .bind(6, experiment.delay_ns)
      .bind(7, experiment.selected_samples)
      .bind(8, experiment.window)
      .run();
  const auto id = database_.last_insert_id();
  auto& insert = statements_->causal_progress;
  for (const auto& point : progress) {
    insert.bind(1, id).bind(2, point.name).bind(3, point.kind);
    if (point.kind == "latency") {
      insert.bind(4, point.arrivals).bind(5, point.arrivals).bind(6, point.departures).bind(7, point.difference);
    } else {
      insert.bind(4, point.delta).bind_null(5).bind_null(6).bind_null(7);
    }
    insert.run();
  }
  return id;
}

void profile_writer::add_causal_samples(std::string_view scope, std::string_view location, std::int64_t count) {
  ensure_transaction();
  statements_->causal_sample.bind(1, scope).bind(2, location).bind(3, count).run();
}

void profile_writer::add_region_kind(std::string_view name, std::string_view kind) {
  const auto name_id = intern(name);
  ensure_transaction();
  statements_->region_kind.bind(1, name_id).bind(2, kind).run();
}

void profile_writer::add_openmp_thread_time(std::string_view region, std::int64_t thread, std::int64_t instances,
                                            std::int64_t work_ns, std::int64_t wait_ns) {
  const auto region_id = intern(region);
  ensure_transaction();
  statements_->openmp_thread_time.bind(1, region_id)
      .bind(2, thread)
      .bind(3, instances)
      .bind(4, work_ns)
      .bind(5, wait_ns)
      .run();
}

void profile_writer::add_annotation_range(std::int64_t thread, std::optional<std::int64_t> end_thread,
                                          std::string_view kind, std::string_view name, std::int64_t start_ns,
                                          std::int64_t end_ns, std::int64_t window) {
  const auto name_id = intern(name);
  ensure_transaction();
  auto& insert = statements_->annotation_range;
  insert.bind(1, thread);
  bind_optional(insert, 2, end_thread);
  insert.bind(3, kind).bind(4, name_id).bind(5, start_ns).bind(6, end_ns).bind(7, window).run();
}

void profile_writer::set_process_command(std::int64_t process, std::string_view command) {
  const auto id = intern(command);
  ensure_transaction();
  auto update = database_.prepare("UPDATE process SET command = ? WHERE id = ?");
  update.bind(1, id).bind(2, process).run();
}

void profile_writer::mark_threads(std::int64_t after_thread_row, std::string_view suffix) {
  std::vector<std::pair<std::int64_t, std::string>> renamed;
  auto names = database_.prepare(
      "SELECT thread.id, COALESCE(string.value, '') FROM thread LEFT JOIN string ON string.id = thread.name "
      "WHERE thread.id > ?");
  names.bind(1, after_thread_row);
  while (names.step()) renamed.emplace_back(names.integer(0), std::string{names.text(1)} + std::string{suffix});
  ensure_transaction();
  auto update = database_.prepare("UPDATE thread SET name = ? WHERE id = ?");
  for (const auto& [thread, name] : renamed) {
    const auto id = intern(name);
    update.reset();
    update.bind(1, id).bind(2, thread).run();
  }
}

void profile_writer::end_process(std::int64_t process, std::int64_t end_ns) {
  ensure_transaction();
  statements_->process_end.bind(1, end_ns).bind(2, process).run();
}

std::int64_t profile_writer::add_thread(std::int64_t process, const thread_info& thread) {
  const auto name = intern(thread.name);
  ensure_transaction();
  statements_->thread.bind(1, process)
      .bind(2, thread.internal_id)
      .bind(3, thread.sequent_id)
      .bind(4, thread.tid)
      .bind(5, name)
      .bind(6, thread.start_ns)
      .run();
  newest_.thread = database_.last_insert_id();
  // A rolled-back thread's id is the next thread's: its entry is replaced.
  const auto pid = process_pids_.find(process);
  thread_ids_.insert_or_assign(newest_.thread, std::pair{pid == process_pids_.end() ? 0 : pid->second, thread.tid});
  if (sample_stream_) sample_stream_->last_thread = -1;
  return newest_.thread;
}

void profile_writer::end_thread(std::int64_t thread, std::int64_t end_ns) {
  ensure_transaction();
  statements_->thread_end.bind(1, end_ns).bind(2, thread).run();
}

std::int64_t profile_writer::frame_for(std::uint64_t address) { return frame_entry_for(address).frame; }

profile_writer::frame_entry profile_writer::frame_entry_for(std::uint64_t address) {
  if (const auto found = frames_.find(address); found != frames_.end()) return found->second;
  frame_info info = symbolize_ ? symbolize_(address) : frame_info{};
  info.address = address;
  // An address no symbol names: one name per module, so its samples make one row, not one per
  // address (a stripped library's thread start routine, a row per return address), and say
  // what is missing; the frame keeps its module and offset.
  if (info.function.empty())
    info.function = info.module.empty()
                        ? fmt::format("0x{:x}", address)
                        : fmt::format("{} (no symbols)", info.module.substr(info.module.rfind('/') + 1));
  const auto module = info.module.empty() ? -1 : intern(info.module);
  const auto function = intern(info.function);
  const auto file = info.file.empty() ? -1 : intern(info.file);
  ensure_transaction();
  auto& insert = statements_->frame;
  // SQLite stores 64-bit signed integers: an address above 2^63 keeps its bits.
  insert.bind(1, static_cast<std::int64_t>(address));
  module < 0 ? insert.bind_null(2) : insert.bind(2, module);
  insert.bind(3, static_cast<std::int64_t>(info.offset)).bind(4, function);
  file < 0 ? insert.bind_null(5) : insert.bind(5, file);
  info.line == 0 ? insert.bind_null(6) : insert.bind(6, std::int64_t{info.line});
  insert.bind(7, info.language);
  insert.run();
  const frame_entry entry{newest_.frame = database_.last_insert_id(), function};
  frames_.emplace(address, entry);
  return entry;
}

std::int64_t profile_writer::add_stack(std::span<const std::uint64_t> addresses_leaf_first) {
  if (const auto found = whole_stacks_.find(addresses_leaf_first); found != whole_stacks_.end()) return found->second;
  std::int64_t parent = -1;  // the trie's root: no node
  std::int64_t depth = 0;
  for (auto it = addresses_leaf_first.rbegin(); it != addresses_leaf_first.rend(); ++it, ++depth) {
    const auto frame = frame_for(*it);
    const auto edge = std::make_pair(parent, frame);
    if (const auto found = stacks_.find(edge); found != stacks_.end()) {
      parent = found->second;
      continue;
    }
    ensure_transaction();
    auto& insert = statements_->stack;
    parent < 0 ? insert.bind_null(1) : insert.bind(1, parent);
    insert.bind(2, frame).bind(3, depth).run();
    parent = newest_.stack = database_.last_insert_id();
    stacks_.emplace(edge, parent);
  }
  whole_stacks_.emplace(std::vector<std::uint64_t>(addresses_leaf_first.begin(), addresses_leaf_first.end()), parent);
  return parent;
}

void profile_writer::add_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns, std::int64_t stack,
                                std::int64_t window) {
  ensure_transaction();
  auto& insert = statements_->sample;
  insert.bind(1, thread).bind(2, time_ns).bind(3, weight_ns);
  stack < 0 ? insert.bind_null(4) : insert.bind(4, stack);
  insert.bind(5, window).run();
  auto [found, added] = stack_totals_.try_emplace({thread, window, std::max<std::int64_t>(stack, 0)});
  auto& total = found->second;
  if (added) total.first_ns = total.last_ns = time_ns;
  ++total.samples;
  total.weight_ns += weight_ns;
  total.first_ns = std::min(total.first_ns, time_ns);
  total.last_ns = std::max(total.last_ns, time_ns);
  first_sample_ns_ = std::min(first_sample_ns_, time_ns);
  last_sample_ns_ = std::max(last_sample_ns_, time_ns);
  if (last_sample_ns_ - first_sample_ns_ > timeline_buckets * bucket_width_ns_) [[unlikely]] {
    while (last_sample_ns_ - first_sample_ns_ > timeline_buckets * bucket_width_ns_) bucket_width_ns_ *= 2;
    auto finer = std::move(timeline_buckets_);
    timeline_buckets_.clear();
    for (const auto& [key, sum] : finer) {
      auto& bucket = timeline_buckets_[{key.thread, key.window, bucket_start(key.start_ns)}];
      bucket.samples += sum.samples;
      bucket.weight_ns += sum.weight_ns;
    }
  }
  auto& bucket = timeline_buckets_[{thread, window, bucket_start(time_ns)}];
  ++bucket.samples;
  bucket.weight_ns += weight_ns;
  if (sample_stream_) [[unlikely]]
    stream_sample(thread, time_ns, weight_ns, stack);
}

void profile_writer::write_timeline_buckets() {
  if (bucket_width_ns_ != committed_bucket_width_ns_) {
    // The width grew since the last commit: the committed rows, finer, are merged into it (a
    // thread and window's rows are few, timeline_buckets at most) and written again below.
    ensure_transaction();
    std::int64_t merged = 0;
    {
      auto finer = database_.prepare(
          "SELECT thread, window, start_ns, samples, weight_ns FROM sample_timeline WHERE width_ns < ?");
      finer.bind(1, bucket_width_ns_);
      while (finer.step()) {
        auto& bucket = timeline_buckets_[{finer.integer(0), finer.integer(1), bucket_start(finer.integer(2))}];
        bucket.samples += finer.integer(3);
        bucket.weight_ns += finer.integer(4);
        ++merged;
      }
    }
    if (merged > 0) database_.prepare("DELETE FROM sample_timeline WHERE width_ns < ?").bind(1, bucket_width_ns_).run();
  }
  if (timeline_buckets_.empty()) return;
  ensure_transaction();
  auto& upsert = statements_->sample_timeline;
  for (const auto& [key, sum] : timeline_buckets_)
    upsert.bind(1, key.thread)
        .bind(2, key.window)
        .bind(3, key.start_ns)
        .bind(4, bucket_width_ns_)
        .bind(5, sum.samples)
        .bind(6, sum.weight_ns)
        .run();
  timeline_buckets_.clear();
}

void profile_writer::write_stack_totals() {
  if (stack_totals_.empty()) return;
  ensure_transaction();
  auto& upsert = statements_->stack_total;
  for (const auto& [key, total] : stack_totals_)
    upsert.bind(1, key.thread)
        .bind(2, key.window)
        .bind(3, key.stack)
        .bind(4, total.samples)
        .bind(5, total.weight_ns)
        .bind(6, total.first_ns)
        .bind(7, total.last_ns)
        .run();
  stack_totals_.clear();
}

void profile_writer::add_realtime_sample(std::int64_t thread, std::int64_t time_ns, std::int64_t weight_ns,
                                         std::int64_t stack, std::int64_t window) {
  ensure_transaction();
  auto& insert = statements_->realtime_sample;
  insert.bind(1, thread).bind(2, time_ns).bind(3, weight_ns);
  stack < 0 ? insert.bind_null(4) : insert.bind(4, stack);
  insert.bind(5, window).run();
  ++realtime_window_rows_[window];
}

void profile_writer::add_counter(std::int64_t thread, std::int64_t time_ns, std::string_view name, double value,
                                 std::int64_t window) {
  const auto name_id = intern(name);
  ensure_transaction();
  statements_->counter.bind(1, thread).bind(2, time_ns).bind(3, name_id).bind(4, value).bind(5, window).run();
}

void profile_writer::add_process_metric(std::int64_t time_ns, std::string_view metric,
                                        std::optional<std::int64_t> thread, std::optional<std::int64_t> instance,
                                        double value, std::int64_t window) {
  const auto metric_id = intern(metric);
  ensure_transaction();
  auto& insert = statements_->process_metric;
  insert.bind(1, time_ns).bind(2, metric_id);
  bind_optional(insert, 3, thread);
  bind_optional(insert, 4, instance);
  insert.bind(5, value).bind(6, window).run();
}

void profile_writer::add_region(std::int64_t thread, std::string_view name, std::int64_t start_ns, std::int64_t end_ns,
                                std::int64_t depth, std::int64_t window, std::int64_t clipped) {
  const region_input region{name,
                            0,
                            start_ns,
                            end_ns,
                            static_cast<std::int32_t>(depth),
                            static_cast<std::int32_t>(window),
                            static_cast<std::int32_t>(clipped)};
  add_regions(thread, {&region, 1});
}

void profile_writer::add_function_region(std::int64_t thread, std::uint64_t function_address, std::int64_t start_ns,
                                         std::int64_t end_ns, std::int64_t depth, std::int64_t window,
                                         std::int64_t clipped) {
  const region_input region{{},
                            function_address,
                            start_ns,
                            end_ns,
                            static_cast<std::int32_t>(depth),
                            static_cast<std::int32_t>(window),
                            static_cast<std::int32_t>(clipped)};
  add_regions(thread, {&region, 1});
}

void profile_writer::add_regions(std::int64_t thread, std::span<const region_input> regions) {
  auto& block = region_blocks_[thread];  // nodes never move
  // Regions come in runs of one name or one function: a compare instead of a hash. A name seen at
  // the same address with the same size is the same name within one call (the caller's memory
  // cannot change under it).
  std::string_view last_given;
  std::int64_t last_name = 0;
  std::uint64_t last_function = 0;
  frame_entry last_entry{};
  for (const auto& region : regions) {
    std::int64_t name = 0, frame = 0;
    if (region.function_address != 0) {
      if (region.function_address != last_function) {
        last_entry = frame_entry_for(region.function_address);
        last_function = region.function_address;
      }
      name = last_entry.function;
      frame = last_entry.frame;
    } else {
      if (region.name.data() != last_given.data() || region.name.size() != last_given.size()) {
        last_name = intern(region.name);
        last_given = region.name;
      }
      name = last_name;
    }
    // Written in place, field by field (a row built first and copied was read back through a
    // store-forwarding stall).
    auto& row = block.emplace_back();
    row.start_ns = region.start_ns;
    row.end_ns = region.end_ns;
    row.name = name;
    row.depth = region.depth;
    row.window = region.window;
    row.clipped = region.clipped;
    row.frame = frame;
    if (std::ssize(block) == region_block_rows) write_region_block(thread, block);
  }
}

void profile_writer::add_call_tree(std::int64_t thread, std::span<const call_tree_input> nodes) {
  for (const auto& node : nodes) {
    std::int64_t name = 0;
    std::optional<std::int64_t> frame;
    if (node.function_address != 0) {
      const auto entry = frame_entry_for(node.function_address);
      name = entry.function;
      frame = entry.frame;
    } else {
      name = intern(node.name);
    }
    ensure_transaction();
    auto& insert = statements_->call_tree;
    insert.bind(1, thread).bind(2, node.node).bind(3, node.parent).bind(4, name);
    bind_optional(insert, 5, frame);
    insert.bind(6, node.window).bind(7, node.calls).bind(8, node.total_ns).bind(9, node.min_ns).bind(10, node.max_ns);
    insert.bind(11, node.sum_squares_ms).run();
  }
}

void profile_writer::write_region_block(std::int64_t thread, std::vector<region_fields>& block) {
  if (block.empty()) return;
  encode_region_block(block, encoded_block_);
  block.clear();  // keeps its capacity for the thread's next block
  ensure_transaction();
  insert_region_block(statements_->region_block, thread, encoded_block_);
}

void profile_writer::write_region_blocks() {
  for (auto& [thread, block] : region_blocks_) write_region_block(thread, block);
}

std::int64_t profile_writer::add_gpu_device(const gpu_device_info& device) {
  ensure_transaction();
  statements_->gpu_device.bind(1, std::string_view{device.api})
      .bind(2, device.index)
      .bind(3, std::string_view{device.name})
      .bind(4, std::string_view{device.architecture})
      .bind(5, device.memory_bytes)
      .bind(6, device.multiprocessors)
      .bind(7, device.clock_khz)
      .bind(8, device.memory_clock_khz)
      .run();
  return newest_.gpu_device = database_.last_insert_id();
}

void profile_writer::add_gpu_kernel(std::optional<std::int64_t> device, const gpu_kernel_info& kernel,
                                    const gpu_work_origin& origin) {
  std::string symbolized;
  if (kernel.name.empty() && kernel.function_address != 0 && symbolize_)
    symbolized = symbolize_(kernel.function_address).function;
  if (kernel.name.empty() && symbolized.empty()) symbolized = fmt::format("kernel@{:#x}", kernel.function_address);
  const auto name_id = intern(kernel.name.empty() ? std::string_view{symbolized} : kernel.name);
  ensure_transaction();
  auto& insert = statements_->gpu_kernel;
  bind_optional(insert, 1, device);
  insert.bind(2, kernel.stream).bind(3, name_id).bind(4, kernel.start_ns).bind(5, kernel.end_ns);
  for (int axis = 0; axis < 3; ++axis) {
    insert.bind(6 + axis, kernel.grid[static_cast<std::size_t>(axis)]);
    insert.bind(9 + axis, kernel.block[static_cast<std::size_t>(axis)]);
  }
  insert.bind(12, kernel.shared_bytes).bind(13, origin.correlation);
  bind_optional(insert, 14, origin.thread);
  insert.bind(15, origin.call_ns);
  bind_optional(insert, 16, origin.stack);
  insert.bind(17, origin.window).run();
}

void profile_writer::add_gpu_copy(std::optional<std::int64_t> device, const gpu_copy_info& copy,
                                  const gpu_work_origin& origin) {
  ensure_transaction();
  auto& insert = statements_->gpu_memcpy;
  bind_optional(insert, 1, device);
  insert.bind(2, copy.stream)
      .bind(3, copy.kind)
      .bind(4, copy.bytes)
      .bind(5, copy.start_ns)
      .bind(6, copy.end_ns)
      .bind(7, std::int64_t{copy.asynchronous})
      .bind(8, origin.correlation);
  bind_optional(insert, 9, origin.thread);
  insert.bind(10, origin.call_ns);
  bind_optional(insert, 11, origin.stack);
  insert.bind(12, origin.window).run();
}

void profile_writer::add_gpu_api_call(std::string_view api, std::string_view name, std::int64_t start_ns,
                                      std::int64_t end_ns, const gpu_work_origin& origin) {
  const auto name_id = intern(name);
  ensure_transaction();
  auto& insert = statements_->gpu_api_call;
  insert.bind(1, api).bind(2, name_id);
  bind_optional(insert, 3, origin.thread);
  insert.bind(4, start_ns).bind(5, end_ns).bind(6, origin.correlation).bind(7, origin.window).run();
}

void profile_writer::add_window(const window_info& window) {
  ensure_transaction();
  auto& insert = statements_->window;
  insert.bind(1, window.ordinal)
      .bind(2, std::string_view{window.spec})
      .bind(3, std::string_view{window.clock})
      .bind(4, window.planned_start)
      .bind(5, window.planned_end);
  int column = 6;
  for (const auto& value : {window.actual_start, window.actual_end, window.start_ns, window.end_ns}) {
    value ? insert.bind(column, *value) : insert.bind_null(column);
    ++column;
  }
  insert.run();
}

void profile_writer::count_window_rows() {
  write_region_blocks();
  write_stack_totals();
  ensure_transaction();
  {
    auto windows = database_.prepare("SELECT EXISTS (SELECT 1 FROM window)");  // done before the DROP below
    if (!windows.step() || windows.integer(0) == 0) return;
  }
  // Regions counted by decoding their blocks here, a few ns a row, where the view costs about a
  // microsecond; CPU-time samples from their totals; real-time samples as the writer counted them
  // (a pass over their table took time that grew with the run).
  std::map<std::int64_t, std::int64_t> regions;
  auto blocks = database_.prepare("SELECT " + std::string{region_block_columns} + " FROM region_block");
  while (blocks.step()) {
    stored_block(blocks).decode([&](const region_fields& row) { ++regions[row.window]; });
  }
  std::map<std::int64_t, std::int64_t> samples;
  auto totals = database_.prepare("SELECT window, SUM(samples) FROM stack_total GROUP BY window");
  while (totals.step()) samples[totals.integer(0)] += totals.integer(1);
  for (const auto* counted : {&committed_realtime_window_rows_, &realtime_window_rows_})
    for (const auto& [window, rows] : *counted) samples[window] += rows;
  database_.execute("UPDATE window SET samples = 0, regions = 0");
  auto set_samples = database_.prepare("UPDATE window SET samples = ? WHERE ordinal = ?");
  for (const auto& [window, count] : samples) set_samples.bind(1, count).bind(2, window).run();
  auto set_regions = database_.prepare("UPDATE window SET regions = ? WHERE ordinal = ?");
  for (const auto& [window, count] : regions) set_regions.bind(1, count).bind(2, window).run();
}

}  // namespace kairos::database
