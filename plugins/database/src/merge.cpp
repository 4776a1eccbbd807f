#include <kairos/plugins/database/merge.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <array>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/plugins/database/region_block.hpp>
#include <kairos/plugins/database/schema.hpp>

namespace kairos::database {
namespace {

// Tables whose rows other rows point to, copied with their ids shifted past the output's largest id
// (the copy statements' parameter of the table's name): no lookups. The other tables' rows get new
// ids, appended in the input's order: an id given would cost each row a search for a clash.
constexpr std::array shifted_tables{"process", "thread", "gpu_device", "causal_experiment"};
constexpr std::size_t thread_table = 1;

// A process p's launch id: its column, else its merged metadata, else its profile's metadata (an
// empty one is none).
std::string launch_id_sql() {
  return fmt::format(
      "COALESCE(NULLIF(p.launch_id, ''), (SELECT NULLIF(value, '') FROM input.process_metadata "
      "WHERE process = p.id AND key = '{0}'), (SELECT NULLIF(value, '') FROM input.metadata WHERE key = '{0}'))",
      metadata_key::launch_id);
}

// Where an input's copied rows point: ids shifted by the output's largest before the input; names,
// frames and stacks through merged_string(), merged_frame() and merged_stack(), the input's maps (a
// lookup in memory is cheaper than a join with a table of them). Each input table is read once, in
// rowid order; an id that does not resolve fails the input. Figures: docs/performance-log.md,
// "Measured reasons in the code".
struct copy_step {
  std::string sql;
  bool samples = false;  // its rows are counted as the input's samples
};
// It stays long because it is a table, one row per copied table in the order their ids are
// needed; a function per table would hide the order.
std::vector<copy_step> copy_steps() {
  return {
      {"INSERT INTO main.process (id, pid, ppid, rank, size, hostname, command, start_ns, end_ns, launch_id) "
       "SELECT p.id + :process, p.pid, p.ppid, p.rank, p.size, merged_string(p.hostname), merged_string(p.command), "
       "p.start_ns, p.end_ns, " +
       launch_id_sql() + " FROM input.process AS p"},
      {"INSERT INTO main.thread (id, process, internal_id, sequent_id, tid, name, start_ns, end_ns) "
       "SELECT t.id + :thread, t.process + :process, t.internal_id, t.sequent_id, t.tid, merged_string(t.name), "
       "t.start_ns, "
       "t.end_ns FROM input.thread AS t"},
      {"INSERT INTO main.window (process, ordinal, spec, clock, planned_start, planned_end, actual_start, "
       "actual_end, start_ns, end_ns, samples, regions) "
       "SELECT process + :process, ordinal, spec, clock, planned_start, planned_end, actual_start, actual_end, "
       "start_ns, end_ns, samples, regions FROM input.window"},
      {"INSERT INTO main.sample (thread, time_ns, weight_ns, stack, window) "
       "SELECT s.thread + :thread, s.time_ns, s.weight_ns, merged_stack(s.stack), s.window "
       "FROM input.sample AS s",
       true},
      {"INSERT INTO main.stack_total (thread, window, stack, samples, weight_ns, first_ns, last_ns) "
       "SELECT s.thread + :thread, s.window, CASE s.stack WHEN 0 THEN 0 ELSE merged_stack(s.stack) END, s.samples, "
       "s.weight_ns, s.first_ns, s.last_ns FROM input.stack_total AS s"},
      {"INSERT INTO main.sample_timeline (thread, window, start_ns, width_ns, samples, weight_ns) "
       "SELECT s.thread + :thread, s.window, s.start_ns, s.width_ns, s.samples, s.weight_ns "
       "FROM input.sample_timeline AS s"},
      {"INSERT INTO main.realtime_sample (thread, time_ns, weight_ns, stack, window) "
       "SELECT s.thread + :thread, s.time_ns, s.weight_ns, merged_stack(s.stack), s.window "
       "FROM input.realtime_sample AS s",
       true},
      {"INSERT INTO main.counter (process, thread, time_ns, name, value, window) "
       "SELECT c.process + :process, c.thread + :thread, c.time_ns, merged_string(c.name), c.value, c.window "
       "FROM input.counter AS c"},
      {"INSERT INTO main.process_metric (process, time_ns, metric, thread, instance, value, window) "
       "SELECT m.process + :process, m.time_ns, merged_string(m.metric), m.thread + :thread, m.instance, m.value, "
       "m.window FROM input.process_metric AS m"},
      {"INSERT INTO main.call_tree (thread, node, parent, name, frame, window, calls, total_ns, min_ns, max_ns, "
       "sum_squares_ms) "
       "SELECT c.thread + :thread, c.node, c.parent, merged_string(c.name), merged_frame(c.frame), c.window, c.calls, "
       "c.total_ns, c.min_ns, c.max_ns, c.sum_squares_ms FROM input.call_tree AS c"},
      {"INSERT INTO main.mpi_call (thread, name, start_ns, end_ns, bytes, peer, window) "
       "SELECT m.thread + :thread, merged_string(m.name), m.start_ns, m.end_ns, m.bytes, m.peer, m.window "
       "FROM input.mpi_call AS m"},
      {"INSERT INTO main.region_kind (process, name, kind) "
       "SELECT process + :process, merged_string(name), kind FROM input.region_kind"},
      {"INSERT INTO main.openmp_thread_time (process, region, thread, instances, work_ns, wait_ns) "
       "SELECT process + :process, merged_string(region), thread, instances, work_ns, wait_ns "
       "FROM input.openmp_thread_time"},
      {"INSERT INTO main.annotation_range (thread, end_thread, kind, name, start_ns, end_ns, window) "
       "SELECT a.thread + :thread, a.end_thread + :thread, a.kind, merged_string(a.name), a.start_ns, a.end_ns, "
       "a.window FROM input.annotation_range AS a"},
      {"INSERT INTO main.gpu_device (id, process, api, device_index, name, architecture, memory_bytes, "
       "multiprocessors, clock_khz, memory_clock_khz) "
       "SELECT id + :gpu_device, process + :process, api, device_index, name, architecture, memory_bytes, "
       "multiprocessors, clock_khz, memory_clock_khz FROM input.gpu_device"},
      {"INSERT INTO main.gpu_kernel (process, device, stream, name, start_ns, end_ns, grid_x, grid_y, "
       "grid_z, block_x, block_y, block_z, shared_bytes, correlation, thread, call_ns, stack, window) "
       "SELECT k.process + :process, k.device + :gpu_device, k.stream, merged_string(k.name), k.start_ns, "
       "k.end_ns, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.shared_bytes, "
       "k.correlation, k.thread + :thread, k.call_ns, merged_stack(k.stack), k.window "
       "FROM input.gpu_kernel AS k"},
      {"INSERT INTO main.gpu_memcpy (process, device, stream, kind, bytes, start_ns, end_ns, asynchronous, "
       "correlation, thread, call_ns, stack, window) "
       "SELECT c.process + :process, c.device + :gpu_device, c.stream, c.kind, c.bytes, "
       "c.start_ns, c.end_ns, c.asynchronous, c.correlation, c.thread + :thread, c.call_ns, merged_stack(c.stack), "
       "c.window "
       "FROM input.gpu_memcpy AS c"},
      {"INSERT INTO main.gpu_api_call (process, api, name, thread, start_ns, end_ns, correlation, window) "
       "SELECT a.process + :process, a.api, merged_string(a.name), a.thread + :thread, a.start_ns, "
       "a.end_ns, a.correlation, a.window "
       "FROM input.gpu_api_call AS a"},
      {"INSERT INTO main.causal_experiment (id, process, scope, selected, speedup, start_ns, duration_ns, "
       "delay_ns, selected_samples, window) "
       "SELECT id + :causal_experiment, process + :process, scope, selected, speedup, start_ns, duration_ns, "
       "delay_ns, selected_samples, window FROM input.causal_experiment"},
      {"INSERT INTO main.causal_progress (experiment, name, kind, delta, arrivals, departures, difference) "
       "SELECT experiment + :causal_experiment, name, kind, delta, arrivals, departures, difference "
       "FROM input.causal_progress"},
      {"INSERT INTO main.causal_sample (process, scope, location, count) "
       "SELECT process + :process, scope, location, count FROM input.causal_sample"},
      {"INSERT INTO main.process_metadata (process, key, value) "
       "SELECT process + :process, key, value FROM input.process_metadata"},
      // A profile's own metadata describes its process (a merged input's is in process_metadata).
      {fmt::format("INSERT INTO main.process_metadata (process, key, value) "
                   "SELECT p.id + :process, m.key, m.value FROM input.process AS p, input.metadata AS m "
                   "WHERE m.key <> '{}' AND NOT EXISTS (SELECT 1 FROM input.process_metadata)",
                   metadata_key::schema_version)},
  };
}

// A frame's identity across processes: its module and offset, names and line, and its address
// only where no module is known (addresses differ between processes that load a library elsewhere).
struct frame_key {
  std::int64_t module, offset, function, file, line, address;
  bool operator==(const frame_key&) const = default;
};
struct frame_key_hash {
  std::size_t operator()(const frame_key& key) const noexcept {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (const auto value : {key.module, key.offset, key.function, key.file, key.line, key.address})
      hash = (hash ^ static_cast<std::uint64_t>(value)) * 0x100000001b3ull;
    return static_cast<std::size_t>(hash ^ (hash >> 29));
  }
};
struct edge_hash {
  std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& edge) const noexcept {
    return std::hash<std::int64_t>{}(edge.first * 0x9e3779b97f4a7c15ll ^ edge.second);
  }
};
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
};

std::int64_t scalar(connection& database, const std::string& sql) {
  auto query = database.prepare(sql);
  return query.step() ? query.integer(0) : 0;
}

// An input's ids, mapped to the output's; ids are dense (rowids), so a vector indexed by the old id.
class id_map {
 public:
  explicit id_map(std::int64_t largest = 0) : ids_(static_cast<std::size_t>(largest + 1), 0) {}
  void set(std::int64_t old_id, std::int64_t new_id) { ids_.at(static_cast<std::size_t>(old_id)) = new_id; }
  // 0: not in the input.
  std::int64_t operator[](std::int64_t old_id) const {
    return old_id >= 0 && static_cast<std::size_t>(old_id) < ids_.size() ? ids_[static_cast<std::size_t>(old_id)] : 0;
  }

 private:
  std::vector<std::int64_t> ids_;
};

// merged_string(id), merged_frame(id), merged_stack(id): an input's id through its map (the function's data); NULL
// stays NULL, an id the input does not hold is an error.
void map_through(sqlite3_context* context, int, sqlite3_value** arguments) {
  if (sqlite3_value_type(arguments[0]) == SQLITE_NULL) return sqlite3_result_null(context);
  const auto old_id = sqlite3_value_int64(arguments[0]);
  const auto new_id = (*static_cast<const id_map*>(sqlite3_user_data(context)))[old_id];
  if (new_id == 0) return sqlite3_result_error(context, fmt::format("id {} points to no row", old_id).c_str(), -1);
  sqlite3_result_int64(context, new_id);
}

void add_map_function(connection& database, const char* name, const id_map& map) {
  if (sqlite3_create_function_v2(database.handle(), name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY,
                                 const_cast<id_map*>(&map), map_through, nullptr, nullptr, nullptr) != SQLITE_OK)
    database.fail(fmt::format("cannot define {}()", name));
}

}  // namespace

struct merger::state {
  explicit state(const std::string& output)
      : database{create_profile(output)},
        insert_string{database, "INSERT INTO main.string (value) VALUES (?)"},
        insert_frame{database,
                     "INSERT INTO main.frame (address, module, offset, function, file, line, language) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)"},
        insert_stack{database, "INSERT INTO main.stack (parent, frame, depth) VALUES (?, ?, ?)"},
        copies{copy_steps()} {
    // A rollback journal: pages appended past the file's end are not journaled, so each merged
    // page is written once (WAL wrote it twice, to the log and then to the file). Each input's
    // commit reaches the file, so what is merged stays merged if kairos-merge is killed or a later
    // input fails; the file is synced to disk once, by finish(), not per input (syncs per input
    // made many small inputs several times slower).
    database.execute("PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF;");
    add_map_function(database, "merged_string", input_strings);
    add_map_function(database, "merged_frame", input_frames);
    add_map_function(database, "merged_stack", input_stacks);
  }

  connection database;
  statement insert_string, insert_frame, insert_stack;
  std::vector<copy_step> copies;
  id_map input_strings, input_frames, input_stacks;  // the input being merged
  std::unordered_map<std::string, std::int64_t, string_hash, std::equal_to<>> strings;
  std::unordered_map<frame_key, std::int64_t, frame_key_hash> frames;
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, std::int64_t, edge_hash> stacks;
  // Each merged process's identity, and the input it came from.
  std::unordered_map<std::string, std::string> identities;

  // The steps of add(), in order, on the attached input.
  void add_processes(const std::string& input, merged_input& added, std::vector<std::string>& identities_added);
  void map_strings();
  void map_frames(const std::string& input);
  void map_stacks(const std::string& input);
  void copy_rows(const std::array<std::int64_t, shifted_tables.size()>& shift, merged_input& added);
  // Forgets what a failed input added to the maps: ids above those `before` it.
  void forget_since(const std::array<std::int64_t, 3>& before, const std::vector<std::string>& identities_added);
};

namespace {

// A block's regions keep their times; their names and frames go through the input's maps, which
// changes their widths: each block is decoded and encoded again (region_block.hpp).
void copy_region_blocks(connection& database, const id_map& strings, const id_map& frames, const std::string& input,
                        std::int64_t thread_shift) {
  auto blocks =
      database.prepare("SELECT " + std::string{region_block_columns} + " FROM input.region_block ORDER BY id");
  statement insert{database, region_block_insert_sql("main.region_block")};
  std::vector<region_fields> rows;
  encoded_region_block encoded;
  while (blocks.step()) {
    const auto block = stored_block(blocks);
    rows.clear();
    bool ids_resolve = true;
    block.decode([&](region_fields row) {  // a block not as kairos writes it: add() names the input
      row.name = strings[row.name];
      const bool has_frame = row.frame != 0;
      if (has_frame) row.frame = frames[row.frame];
      ids_resolve = ids_resolve && row.name != 0 && (!has_frame || row.frame != 0);
      rows.push_back(row);
    });
    if (!ids_resolve)
      throw database_error(
          fmt::format("'{}' is corrupt: region_block {} names a missing string or frame", input, block.id));
    encode_region_block(rows, encoded);
    insert_region_block(insert, block.thread + thread_shift, encoded);
  }
}

}  // namespace

merger::merger(const std::string& output) : state_{std::make_unique<state>(output)} {}

merger::~merger() = default;

void merger::finish() {
  create_deferred_indexes(state_->database);
  const int fd = ::open(state_->database.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw database_error(fmt::format("cannot sync '{}' to disk: {}", state_->database.path(), reason));
  }
  ::close(fd);
}

connection& merger::database() noexcept { return state_->database; }

// Each process is merged once: a second copy would count its time twice.
void merger::state::add_processes(const std::string& input, merged_input& added,
                                  std::vector<std::string>& identities_added) {
  auto processes = database.prepare("SELECT p.pid, COALESCE(h.value, ''), COALESCE(p.start_ns, 0), " + launch_id_sql() +
                                    " FROM input.process AS p LEFT JOIN input.string AS h ON h.id = p.hostname");
  while (processes.step()) {
    const auto launch_id = processes.text(3);
    auto identity = processes.is_null(3) ? fmt::format("pid {} on host '{}' started at {} ns", processes.integer(0),
                                                       processes.text(1), processes.integer(2))
                                         : fmt::format("pid {} on host '{}' of launch '{}'", processes.integer(0),
                                                       processes.text(1), launch_id);
    if (const auto found = identities.find(identity); found != identities.end())
      throw database_error(
          fmt::format("'{}': its process ({}) is already merged, from '{}'; each "
                      "process is merged once: leave out the input given twice",
                      input, identity, found->second));
    identities.emplace(identity, input);
    identities_added.push_back(std::move(identity));
    ++added.processes;
    if (!processes.is_null(3) &&
        std::find(added.launch_ids.begin(), added.launch_ids.end(), launch_id) == added.launch_ids.end())
      added.launch_ids.emplace_back(launch_id);
  }
}

void merger::state::map_strings() {
  input_strings = id_map{scalar(database, "SELECT COALESCE(MAX(id), 0) FROM input.string")};
  auto rows = database.prepare("SELECT id, value FROM input.string");
  while (rows.step()) {
    const auto text = rows.text(1);
    auto found = strings.find(text);
    if (found == strings.end()) {
      insert_string.bind(1, text).run();
      found = strings.emplace(std::string{text}, database.last_insert_id()).first;
    }
    input_strings.set(rows.integer(0), found->second);
  }
}

void merger::state::map_frames(const std::string& input) {
  input_frames = id_map{scalar(database, "SELECT COALESCE(MAX(id), 0) FROM input.frame")};
  auto rows = database.prepare("SELECT id, address, module, offset, function, file, line, language FROM input.frame");
  while (rows.step()) {
    const bool has_module = !rows.is_null(2);
    const frame_key key{input_strings[rows.integer(2)], rows.integer(3), input_strings[rows.integer(4)],
                        input_strings[rows.integer(5)], rows.integer(6), has_module ? 0 : rows.integer(1)};
    if (key.function == 0 || (has_module && key.module == 0))
      throw database_error(fmt::format("'{}' is corrupt: frame {} names a missing string", input, rows.integer(0)));
    auto found = frames.find(key);
    if (found == frames.end()) {
      auto& insert = insert_frame;
      insert.bind(1, rows.integer(1));
      has_module ? insert.bind(2, key.module) : insert.bind_null(2);
      rows.is_null(3) ? insert.bind_null(3) : insert.bind(3, key.offset);
      insert.bind(4, key.function);
      rows.is_null(5) ? insert.bind_null(5) : insert.bind(5, key.file);
      rows.is_null(6) ? insert.bind_null(6) : insert.bind(6, key.line);
      insert.bind(7, rows.text(7));
      insert.run();
      found = frames.emplace(key, database.last_insert_id()).first;
    }
    input_frames.set(rows.integer(0), found->second);
  }
}

// Parents before children: a node's depth is its parent's plus one.
void merger::state::map_stacks(const std::string& input) {
  input_stacks = id_map{scalar(database, "SELECT COALESCE(MAX(id), 0) FROM input.stack")};
  auto rows = database.prepare("SELECT id, parent, frame, depth FROM input.stack ORDER BY depth, id");
  while (rows.step()) {
    const std::int64_t parent = rows.is_null(1) ? 0 : input_stacks[rows.integer(1)];
    const auto frame = input_frames[rows.integer(2)];
    if (frame == 0 || (parent == 0 && !rows.is_null(1)))
      throw database_error(
          fmt::format("'{}' is corrupt: stack node {} points to a missing frame or parent", input, rows.integer(0)));
    auto found = stacks.find({parent, frame});
    if (found == stacks.end()) {
      parent == 0 ? insert_stack.bind_null(1) : insert_stack.bind(1, parent);
      insert_stack.bind(2, frame).bind(3, rows.integer(3)).run();
      found = stacks.emplace(std::pair{parent, frame}, database.last_insert_id()).first;
    }
    input_stacks.set(rows.integer(0), found->second);
  }
}

void merger::state::copy_rows(const std::array<std::int64_t, shifted_tables.size()>& shift, merged_input& added) {
  for (const auto& step : copies) {
    auto copy = database.prepare(step.sql);
    for (std::size_t table = 0; table < shifted_tables.size(); ++table)
      if (const int index = copy.parameter_index(fmt::format(":{}", shifted_tables[table])); index > 0)
        copy.bind(index, shift[table]);
    copy.run();
    if (step.samples) added.samples += database.changes();
  }
}

void merger::state::forget_since(const std::array<std::int64_t, 3>& before,
                                 const std::vector<std::string>& identities_added) {
  std::erase_if(strings, [&](const auto& entry) { return entry.second > before[0]; });
  std::erase_if(frames, [&](const auto& entry) { return entry.second > before[1]; });
  std::erase_if(stacks, [&](const auto& entry) { return entry.second > before[2]; });
  for (const auto& identity : identities_added) identities.erase(identity);
}

merged_input merger::add(const std::string& input) {
  // Names the input and refuses another schema version, with the message every reader gives.
  open_profile(input);
  auto& s = *state_;
  auto attach = s.database.prepare("ATTACH DATABASE ? AS input");
  attach.bind(1, std::string_view{input}).run();
  // The input read through a memory map instead of a read() per page, the larger part of a
  // sample's copy. Its pages are the input file's, dropped by the kernel as needed.
  s.database.execute("PRAGMA input.mmap_size = 1073741824");
  // What this input added to the in-memory maps (ids above these), forgotten if it fails.
  const std::array<std::int64_t, 3> before{scalar(s.database, "SELECT COALESCE(MAX(id), 0) FROM main.string"),
                                           scalar(s.database, "SELECT COALESCE(MAX(id), 0) FROM main.frame"),
                                           scalar(s.database, "SELECT COALESCE(MAX(id), 0) FROM main.stack")};
  std::vector<std::string> identities_added;
  merged_input added;
  try {
    transaction copying{s.database};
    std::array<std::int64_t, shifted_tables.size()> shift{};
    for (std::size_t table = 0; table < shifted_tables.size(); ++table)
      shift[table] = scalar(s.database, fmt::format("SELECT COALESCE(MAX(id), 0) FROM main.{}", shifted_tables[table]));
    s.add_processes(input, added, identities_added);
    s.map_strings();
    s.map_frames(input);
    s.map_stacks(input);
    s.copy_rows(shift, added);
    copy_region_blocks(s.database, s.input_strings, s.input_frames, input, shift[thread_table]);
    copying.commit();
  } catch (const std::exception& error) {
    s.forget_since(before, identities_added);
    s.database.execute("DETACH DATABASE input");
    const std::string_view message = error.what();
    if (message.find("'" + input + "'") != std::string_view::npos) throw;
    throw database_error(fmt::format("'{}' cannot be merged ({}); nothing of it was kept", input, message));
  }
  s.database.execute("DETACH DATABASE input");
  processes_ += added.processes;
  samples_ += added.samples;
  return added;
}

}  // namespace kairos::database
