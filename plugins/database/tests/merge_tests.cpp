// kairos::database::merger: a merged database answers every question as the union of its inputs'
// answers, merges of merges equal one merge, and a bad input is named and leaves nothing behind.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/plugins/database.hpp>

namespace db = kairos::database;
namespace fs = std::filesystem;

namespace {

std::string fresh_path(const std::string& name) {
  const auto path = fs::current_path() / "merge_tests" / (name + ".db");
  fs::create_directories(path.parent_path());
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path.string() + suffix);
  return path.string();
}

// A rank's profile: its own mix of shared and private functions at addresses of its own (as if
// its libraries were loaded elsewhere), two threads, regions, a counter and metadata.
std::string write_rank(const std::string& name, std::int64_t rank, std::int64_t pid = 0,
                       const std::string& launch_id = "") {
  const auto path = fresh_path(name);
  const std::uint64_t base = 0x10000 * static_cast<std::uint64_t>(rank + 1);
  db::profile_writer writer{path, [&](std::uint64_t address) {
                              db::frame_info info;
                              const auto index = (address - base) / 0x10;
                              info.module = index < 4 ? "/usr/lib/libshared.so" : "/usr/bin/rank";
                              info.offset = index * 0x10;
                              info.function =
                                  index < 4 ? fmt::format("shared_{}", index) : fmt::format("rank{}_{}", rank, index);
                              info.file = "app.cpp";
                              info.line = static_cast<std::uint32_t>(index);
                              return info;
                            }};
  writer.set_metadata("command", fmt::format("app --rank {}", rank));
  writer.set_metadata("host", "node");
  const auto process =
      writer.add_process({pid == 0 ? 100 + rank : pid, 1, rank, "node", "app", 5, std::nullopt, launch_id});
  const auto main_thread = writer.add_thread(process, {0, 0, 100 + rank, "main", 5});
  const auto worker = writer.add_thread(process, {1, 1, 200 + rank, "worker", 6});
  const auto at = [&](std::uint64_t index) { return base + index * 0x10; };
  const std::vector<std::vector<std::uint64_t>> stacks{{at(1), at(0)},
                                                       {at(2), at(1), at(0)},
                                                       {at(4), at(2), at(0)},
                                                       {at(5 + rank % 3), at(4), at(0)},
                                                       {at(3), at(3), at(0)}};
  std::vector<std::int64_t> ids;
  for (const auto& addresses : stacks) ids.push_back(writer.add_stack(addresses));
  for (std::int64_t sample = 0; sample < 40 + rank; ++sample)
    writer.add_sample(sample % 2 == 0 ? main_thread : worker, 1'000 + sample, 1'000 + rank * 10 + sample % 7,
                      ids[static_cast<std::size_t>((sample * (rank + 1)) % 5)]);
  writer.add_realtime_sample(worker, 2'000, 5'000, ids[0]);
  writer.add_region(main_thread, "solve", 1'000, 2'000 + rank, 0);
  writer.add_region(worker, fmt::format("rank {} work", rank), 1'100, 1'900, 1);
  writer.add_function_region(main_thread, at(4), 1'200, 1'300 + rank, 1);
  writer.add_counter(worker, 1'500, "thread_cpu_time_ns", 42.0 + static_cast<double>(rank));
  writer.add_process_metric(1'500, "memory_resident_bytes", std::nullopt, std::nullopt, 1e6 + rank);
  writer.add_process_metric(1'500, "thread_cpu_percent", worker, std::nullopt, 50.0 + rank);
  writer.add_process_metric(1'500, "cpu_frequency_mhz", std::nullopt, rank, 2400.0);
  writer.add_window({1, "realtime:0:1", "realtime", 0, 1'000, 0, 1'000, 5 + rank, 1'005 + rank});
  for (const double speedup : {0.0, 0.5}) {
    const db::causal_progress_info progress[] = {
        {.name = "done", .kind = "throughput", .delta = 10 + rank},
        {.name = "request", .kind = "latency", .arrivals = 8, .departures = 7 + rank % 2, .difference = rank}};
    writer.add_causal_experiment({.scope = "line",
                                  .selected = fmt::format("app.cpp:{}", 10 + rank),
                                  .speedup = speedup,
                                  .start_ns = 1'000,
                                  .duration_ns = 50'000 + rank,
                                  .delay_ns = 100,
                                  .selected_samples = 3,
                                  .window = 0},
                                 progress);
  }
  writer.add_causal_samples("line", fmt::format("app.cpp:{}", 10 + rank), 6 + rank);
  writer.commit();
  return path;
}

// An MPI rank of a two-rank launch: two threads with samples, the main thread's MPI calls (rank r
// waits r + 1 times as long in MPI_Barrier and sends r + 1 messages).
std::string write_mpi_rank(const std::string& name, std::int64_t rank, const std::string& launch_id) {
  const auto path = fresh_path(name);
  db::profile_writer writer{path, [](std::uint64_t address) {
                              db::frame_info info;
                              info.module = "/usr/bin/solver";
                              info.offset = address;
                              info.function = fmt::format("function_{:x}", address);
                              return info;
                            }};
  db::process_info info;
  info.pid = 300 + rank;
  info.hostname = "node";
  info.command = "solver --steps 10";
  info.rank = rank;
  info.size = 2;
  info.launch_id = launch_id;
  const auto process = writer.add_process(info);
  writer.end_process(process, 2'000'000'000 + rank * 100'000'000);
  const auto main_thread = writer.add_thread(process, {0, 0, 300 + rank, "solver", 0});
  const auto worker = writer.add_thread(process, {1, 1, 400 + rank, "", 0});
  const std::uint64_t compute[] = {0x20, 0x10}, exchange[] = {0x30, 0x10};
  const auto compute_stack = writer.add_stack(compute), exchange_stack = writer.add_stack(exchange);
  for (std::int64_t sample = 0; sample < 30 + 10 * rank; ++sample)
    writer.add_sample(sample % 3 == 0 ? worker : main_thread, sample * 1'000'000, 10'000'000,
                      sample % 2 == 0 ? compute_stack : exchange_stack);
  for (std::int64_t message = 0; message <= rank; ++message)
    writer.add_mpi_call(main_thread, "MPI_Send", 1'000 * message, 1'000 * message + 20'000'000, 800, 1 - rank);
  writer.add_mpi_call(main_thread, "MPI_Barrier", 500'000'000, 500'000'000 + (rank + 1) * 300'000'000, std::nullopt,
                      std::nullopt);
  writer.commit();
  return path;
}

// A text report's paragraphs (split at blank lines) that start with `prefix`.
std::vector<std::string> paragraphs(const std::string& text, std::string_view prefix) {
  std::vector<std::string> found;
  for (std::size_t begin = 0; begin < text.size();) {
    auto end = text.find("\n\n", begin);
    if (end == std::string::npos) end = text.size();
    auto paragraph = text.substr(begin, end - begin);
    paragraph.erase(0, paragraph.find_first_not_of('\n'));
    if (paragraph.starts_with(prefix)) found.push_back(std::move(paragraph));
    begin = end + 2;
  }
  return found;
}

std::string text_report(const std::string& path) {
  auto profile = db::open_profile(path);
  std::ostringstream text;
  db::write_text(profile, text);
  return text.str();
}

using rows = std::vector<std::vector<std::string>>;

// A query's rows as text, sorted: the order of rows is no part of an answer.
rows answer(db::connection& database, const std::string& sql, int columns) {
  rows result;
  auto query = database.prepare(sql);
  while (query.step()) {
    std::vector<std::string> row;
    for (int column = 0; column < columns; ++column)
      row.push_back(query.is_null(column) ? "NULL" : std::string{query.text(column)});
    result.push_back(std::move(row));
  }
  std::sort(result.begin(), result.end());
  return result;
}

struct question {
  const char* what;
  const char* sql;
  int columns;
};

// Asked of inputs and merged databases alike; every answer names the rank it is about.
const question questions[] = {
    {"top functions per process", "SELECT rank, name, self, total FROM top_functions_by_process", 4},
    {"regions",
     "SELECT regions.rank, regions.name, regions.kind, thread.tid, regions.start_ns, regions.end_ns, "
     "regions.depth FROM regions JOIN thread ON thread.id = regions.thread",
     7},
    {"instrumented functions' frames",
     "SELECT process.rank, module.value, frame.offset, function.value, region.start_ns FROM region "
     "JOIN frame ON frame.id = region.frame JOIN string AS module ON module.id = frame.module "
     "JOIN string AS function ON function.id = frame.function JOIN thread ON thread.id = region.thread "
     "JOIN process ON process.id = thread.process",
     5},
    {"sample stacks as function paths",
     "WITH RECURSIVE up (sample, node, path) AS ("
     "  SELECT sample.id, stack.parent, string.value FROM sample JOIN stack ON stack.id = sample.stack"
     "  JOIN frame ON frame.id = stack.frame JOIN string ON string.id = frame.function"
     "  UNION ALL SELECT up.sample, stack.parent, string.value || ';' || up.path FROM up"
     "  JOIN stack ON stack.id = up.node JOIN frame ON frame.id = stack.frame"
     "  JOIN string ON string.id = frame.function) "
     "SELECT samples.rank, thread.tid, samples.time_ns, samples.weight, up.path FROM up "
     "JOIN samples ON samples.id = up.sample JOIN thread ON thread.id = samples.thread WHERE up.node IS NULL",
     5},
    {"samples summed over time",
     "SELECT process.rank, thread.tid, t.window, t.start_ns, t.width_ns, t.samples, t.weight_ns "
     "FROM sample_timeline AS t JOIN thread ON thread.id = t.thread JOIN process ON process.id = thread.process",
     7},
    {"real-time samples",
     "SELECT realtime_samples.rank, thread.tid, leaf, weight FROM realtime_samples "
     "JOIN thread ON thread.id = realtime_samples.thread",
     4},
    {"threads", "SELECT rank, pid, tid, name FROM threads", 4},
    {"counters",
     "SELECT process.rank, thread.tid, counter.time_ns, string.value, counter.value FROM counter "
     "JOIN process ON process.id = counter.process LEFT JOIN thread ON thread.id = counter.thread "
     "JOIN string ON string.id = counter.name",
     5},
    {"process metrics",
     "SELECT process.rank, thread.tid, m.time_ns, m.metric, m.instance, m.value FROM process_metrics AS m "
     "JOIN process ON process.id = m.process LEFT JOIN thread ON thread.id = m.thread",
     6},
    {"windows",
     "SELECT process.rank, window.ordinal, window.spec, window.start_ns FROM window "
     "JOIN process ON process.id = window.process",
     4},
    {"causal experiments with their progress points",
     "SELECT process.rank, e.scope, e.selected, e.speedup, e.duration_ns, e.delay_ns, p.name, p.kind, p.delta, "
     "p.arrivals, p.departures, p.difference FROM causal_progress AS p "
     "JOIN causal_experiment AS e ON e.id = p.experiment JOIN process ON process.id = e.process",
     12},
    {"causal samples",
     "SELECT process.rank, s.scope, s.location, s.count FROM causal_sample AS s "
     "JOIN process ON process.id = s.process",
     4},
    {"frames",
     "SELECT DISTINCT module.value, frame.offset, function.value, frame.line FROM frame "
     "JOIN string AS module ON module.id = frame.module JOIN string AS function ON function.id = frame.function",
     4},
};

rows union_of(const std::vector<std::string>& inputs, const question& asked) {
  rows all;
  for (const auto& input : inputs) {
    auto database = db::open_profile(input);
    const auto part = answer(database, asked.sql, asked.columns);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  if (std::string_view{asked.what} == "frames") all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

std::string merge(const std::string& name, const std::vector<std::string>& inputs) {
  const auto output = fresh_path(name);
  db::merger merger{output};
  for (const auto& input : inputs) merger.add(input);
  return output;
}

std::int64_t count(db::connection& database, const std::string& sql) {
  auto query = database.prepare(sql);
  REQUIRE(query.step());
  return query.integer(0);
}

// What a failed add() says.
std::string refusal(db::merger& merger, const std::string& input) {
  try {
    merger.add(input);
  } catch (const db::database_error& error) {
    return error.what();
  }
  return "(merged)";
}

}  // namespace

TEST_CASE("a merged database answers every question as the union of its inputs' answers") {
  const std::vector<std::string> inputs{write_rank("union_0", 0), write_rank("union_1", 1), write_rank("union_2", 2)};
  auto merged = db::open_profile(merge("union", inputs));
  for (const auto& asked : questions) {
    INFO(std::string{asked.what});
    const auto expected = union_of(inputs, asked);
    CHECK(!expected.empty());
    CHECK(answer(merged, asked.sql, asked.columns) == expected);
  }
  // Shared functions are stored once, however many processes call them.
  CHECK(count(merged, "SELECT COUNT(*) FROM string WHERE value = 'shared_1'") == 1);
  CHECK(count(merged,
              "SELECT COUNT(*) FROM frame JOIN string ON string.id = frame.function "
              "WHERE string.value = 'shared_1'") == 1);
  CHECK(count(merged, "SELECT COUNT(*) FROM process") == 3);
}

TEST_CASE("a merged launch's MPI and thread sections are each rank's own, its threads named with their rank") {
  const std::vector<std::string> ranks{write_mpi_rank("mpi_sections_0", 0, "openmpi-5"),
                                       write_mpi_rank("mpi_sections_1", 1, "openmpi-5")};
  const auto merged = text_report(merge("mpi_sections", ranks));
  const auto merged_mpi = paragraphs(merged, "MPI, ");
  CHECK(merged_mpi.size() == 2);
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    const auto own = text_report(ranks[static_cast<std::size_t>(rank)]);
    const auto own_mpi = paragraphs(own, "MPI, ");
    REQUIRE(own_mpi.size() == 1);
    CHECK(own_mpi[0].starts_with(fmt::format("MPI, rank {} of 2 (launch openmpi-5): {} calls", rank, rank + 2)));
    CHECK(std::count(merged_mpi.begin(), merged_mpi.end(), own_mpi[0]) == 1);
    const auto own_threads = paragraphs(own, fmt::format("rank {}, thread ", rank));
    CHECK(own_threads.size() == 2);
    for (const auto& thread : own_threads) {
      INFO(thread);
      CHECK(merged.find(thread) != std::string::npos);
    }
  }
  CHECK(paragraphs(merged, "rank 1, thread 0 (tid 301, solver): 26 samples, 65.0% of rank 1's weight").size() == 1);
  CHECK(paragraphs(merged, "thread ").empty());
}

TEST_CASE("each process keeps its profile's metadata") {
  const std::vector<std::string> inputs{write_rank("metadata_0", 0), write_rank("metadata_1", 1)};
  auto merged = db::open_profile(merge("metadata", inputs));
  CHECK(answer(merged,
               "SELECT process.rank, key, value FROM process_metadata JOIN process ON process.id = "
               "process_metadata.process",
               3) == rows{{"0", "command", "app --rank 0"},
                          {"0", "host", "node"},
                          {"1", "command", "app --rank 1"},
                          {"1", "host", "node"}});
  CHECK(answer(merged, "SELECT key FROM metadata", 1) == rows{{"schema_version"}});
}

TEST_CASE("a merge of merges equals one merge of every input") {
  std::vector<std::string> inputs;
  for (int rank = 0; rank < 5; ++rank) inputs.push_back(write_rank(fmt::format("associative_{}", rank), rank));
  const auto first = merge("associative_first", {inputs[0], inputs[1]});
  const auto second = merge("associative_second", {inputs[2], inputs[3], inputs[4]});
  auto of_merges = db::open_profile(merge("associative_of_merges", {second, first}));
  auto at_once = db::open_profile(merge("associative_at_once", inputs));
  for (const auto& asked : questions) {
    INFO(std::string{asked.what});
    CHECK(answer(of_merges, asked.sql, asked.columns) == answer(at_once, asked.sql, asked.columns));
  }
  const char* metadata =
      "SELECT process.rank, key, value FROM process_metadata JOIN process ON process.id = "
      "process_metadata.process";
  CHECK(answer(of_merges, metadata, 3) == answer(at_once, metadata, 3));
}

TEST_CASE("the same process given twice is refused, by host, pid and start time") {
  const auto input = write_rank("twice", 0);
  const auto copy = fresh_path("twice_copy");
  fs::copy_file(input, copy);
  db::merger merger{fresh_path("twice_merged")};
  merger.add(input);
  const auto again = refusal(merger, input);
  CHECK(again.find("already merged") != std::string::npos);
  CHECK(again.find(input) != std::string::npos);
  CHECK(refusal(merger, copy).find("'" + copy + "'") != std::string::npos);
  CHECK(merger.processes() == 1);
  CHECK(count(merger.database(), "SELECT COUNT(*) FROM process") == 1);
}

TEST_CASE("with launch ids, the same pid on the same host in two launches is two processes") {
  // One launch id in the process row, the other in the metadata (where a launcher's variable lands).
  const auto first = write_rank("launch_first", 0, 777, "job-1");
  const auto second = write_rank("launch_second", 1, 777);
  const auto second_again = fresh_path("launch_second_again");
  fs::copy_file(second, second_again);
  {
    db::connection database{second, db::connection::mode::create};
    database.execute("INSERT INTO metadata (key, value) VALUES ('launch_id', 'job-2')");
  }
  {
    db::connection database{second_again, db::connection::mode::create};
    database.execute("UPDATE process SET launch_id = 'job-2', start_ns = 99");
  }
  db::merger merger{fresh_path("launch_merged")};
  merger.add(first);
  merger.add(second);
  // Another start time, the same launch: the same process (a launch id names it without one).
  CHECK(refusal(merger, second_again).find("of launch 'job-2'") != std::string::npos);
  CHECK(answer(merger.database(), "SELECT pid, launch_id FROM process", 2) == rows{{"777", "job-1"}, {"777", "job-2"}});
}

TEST_CASE("a corrupt input is named and skipped, and nothing of it is kept") {
  const auto good = write_rank("corrupt_good", 0);
  const auto garbage = fresh_path("corrupt_garbage");
  std::ofstream{garbage} << std::string(8192, 'x');
  // Its second half cut off.
  const auto truncated = write_rank("corrupt_truncated", 1);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  db::merger merger{fresh_path("corrupt_merged")};
  CHECK(refusal(merger, garbage).find("'" + garbage + "' is not a kairos profile") != std::string::npos);
  CHECK(refusal(merger, truncated).find("'" + truncated + "'") != std::string::npos);
  merger.add(good);
  CHECK(count(merger.database(), "SELECT COUNT(*) FROM process") == 1);
  CHECK(count(merger.database(), "SELECT COUNT(*) FROM sample") == 40);
}

TEST_CASE("an input whose rows point nowhere fails whole, and the next input's names still resolve") {
  const auto broken = write_rank("dangling_broken", 0);
  {
    db::connection database{broken, db::connection::mode::create};
    database.execute("UPDATE sample SET stack = 999 WHERE id = (SELECT MAX(id) FROM sample)");
  }
  const auto good = write_rank("dangling_good", 0, 4000);
  db::merger merger{fresh_path("dangling_merged")};
  CHECK(refusal(merger, broken).find("points to no row") != std::string::npos);
  CHECK(count(merger.database(), "SELECT COUNT(*) FROM string") == 0);
  merger.add(good);
  CHECK(answer(merger.database(), "SELECT rank, name, self, total FROM top_functions_by_process", 4) ==
        union_of({good}, questions[0]));
}

TEST_CASE("another schema version is refused, naming the input and the version read") {
  const auto old = write_rank("old_version", 0);
  {
    db::connection database{old, db::connection::mode::create};
    database.execute("UPDATE metadata SET value = '4' WHERE key = 'schema_version'");
  }
  db::merger merger{fresh_path("old_version_merged")};
  const auto message = refusal(merger, old);
  CHECK(message.find("'" + old + "' has schema version '4'") != std::string::npos);
  CHECK(message.find(fmt::format("reads version {}", db::schema_version)) != std::string::npos);
}

TEST_CASE("the output is never an existing file") {
  const auto existing = write_rank("existing_output", 0);
  CHECK_THROWS_WITH_AS(db::merger{existing}, doctest::Contains("already exists"), db::database_error);
}

TEST_CASE("a thousand small inputs merge into a thousand processes") {
  const auto model = write_rank("thousand_model", 0);
  const auto directory = fs::path{fresh_path("thousand")}.replace_extension();
  fs::create_directories(directory);
  std::vector<std::string> inputs;
  for (int rank = 0; rank < 1000; ++rank) {
    inputs.push_back((directory / fmt::format("rank-{:04}.db", rank)).string());
    fs::copy_file(model, inputs.back(), fs::copy_options::overwrite_existing);
    db::connection database{inputs.back(), db::connection::mode::create};
    database.execute(fmt::format("PRAGMA synchronous = OFF; UPDATE process SET pid = {0}, rank = {0}", 10'000 + rank));
  }
  db::merger merger{fresh_path("thousand_merged")};
  for (const auto& input : inputs) merger.add(input);
  CHECK(merger.processes() == 1000);
  CHECK(merger.samples() == 1000 * 41);
  auto& merged = merger.database();
  CHECK(count(merged, "SELECT COUNT(DISTINCT rank) FROM process") == 1000);
  // Every rank ran the same code: its strings, frames and stacks are stored once.
  auto model_profile = db::open_profile(model);
  CHECK(count(merged, "SELECT COUNT(*) FROM stack") == count(model_profile, "SELECT COUNT(*) FROM stack"));
  CHECK(count(merged, "SELECT SUM(self) FROM top_functions") ==
        1000 * count(model_profile, "SELECT SUM(self) FROM top_functions"));
}

TEST_CASE("the outputs read a merged database as one profile, window K of every process together") {
  const std::vector<std::string> inputs{write_rank("outputs_0", 0), write_rank("outputs_1", 1)};
  auto merged = db::open_profile(merge("outputs", inputs));
  CHECK(db::window_count(merged) == 1);
  std::ostringstream json;
  db::write_summary_json(merged, json);
  const auto summary = nlohmann::json::parse(json.str());
  CHECK(summary["samples"] == 40 + 41);
  REQUIRE(summary["windows"].size() == 1);
  CHECK(summary["windows"][0]["start_ns"] == 5);
  CHECK(summary["windows"][0]["end_ns"] == 1'006);
  CHECK(summary["threads"].size() == 4);
  std::ostringstream text;
  db::write_text(merged, text);
  CHECK(text.str().starts_with("kairos profile: 81 samples"));
  CHECK(text.str().find("time windows: 1\n") != std::string::npos);
}
