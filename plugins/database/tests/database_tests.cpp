// The profile database: schema, writer, views and derived outputs on a profile with known contents.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/plugins/database.hpp>

namespace db = kairos::database;

namespace {

// Addresses stand for functions: 0x100 main, 0x200 solve, 0x300 step, 0x400 write.
db::frame_info fake_symbols(std::uint64_t address) {
  static const std::map<std::uint64_t, std::string> names{
      {0x100, "main"}, {0x200, "solve"}, {0x300, "step"}, {0x400, "write"}};
  db::frame_info info;
  info.module = "/usr/bin/app";
  info.offset = address - 0x10;
  if (const auto found = names.find(address); found != names.end()) info.function = found->second;
  info.file = "app.cpp";
  info.line = static_cast<std::uint32_t>(address / 0x10);
  return info;
}

std::string fresh_path(const std::string& name) {
  const auto path = std::filesystem::current_path() / (name + ".db");
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path.string() + suffix);
  return path.string();
}

// Thread 1: 75 samples main;solve;step, 25 main;solve. Thread 2: 100 main;write (recursive write).
// Every sample weighs 1 ms. A region per thread.
std::string write_known_profile(const std::string& name) {
  const auto path = fresh_path(name);
  db::profile_writer writer{path, fake_symbols};
  writer.set_metadata("command", "app --fast");
  const auto process = writer.add_process({4242, 1, std::nullopt, "host", "app --fast", 0});
  const auto first = writer.add_thread(process, {0, 0, 4242, "main", 0});
  const auto second = writer.add_thread(process, {1, 1, 4243, "writer", 0});
  const std::uint64_t step_stack[] = {0x300, 0x200, 0x100};
  const std::uint64_t solve_stack[] = {0x200, 0x100};
  const std::uint64_t write_stack[] = {0x400, 0x400, 0x100};
  const auto step = writer.add_stack(step_stack);
  const auto solve = writer.add_stack(solve_stack);
  const auto write = writer.add_stack(write_stack);
  for (int i = 0; i < 100; ++i) {
    writer.add_sample(first, 1'000'000'000 + i * 1'000'000, 1'000'000, i < 75 ? step : solve);
    writer.add_sample(second, 1'000'000'000 + i * 1'000'000, 1'000'000, write);
  }
  writer.add_region(first, "solve_region", 1'000'000'000, 1'100'000'000, 0);
  writer.add_region(second, "write \"quoted\" region", 1'000'000'000, 1'050'000'000, 0);
  writer.add_counter(first, 1'000'000'000, "page_faults", 12.0);
  writer.commit();
  return path;
}

std::int64_t count(db::connection& profile, const char* sql) {
  auto query = profile.prepare(sql);
  REQUIRE(query.step());
  return query.integer(0);
}

// stack_total's rows, and the same sums made from the sample rows: they must be equal.
using total_rows = std::vector<std::array<std::int64_t, 7>>;
std::pair<total_rows, total_rows> totals_and_samples(db::connection& profile) {
  auto read = [&](const char* sql) {
    total_rows rows;
    auto query = profile.prepare(sql);
    while (query.step()) {
      auto& row = rows.emplace_back();
      for (int column = 0; column < 7; ++column) row[static_cast<std::size_t>(column)] = query.integer(column);
    }
    return rows;
  };
  return {read("SELECT thread, window, stack, samples, weight_ns, first_ns, last_ns FROM stack_total "
               "ORDER BY 1, 2, 3"),
          read("SELECT thread, window, COALESCE(stack, 0), COUNT(*), SUM(weight_ns), MIN(time_ns), MAX(time_ns) "
               "FROM sample GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")};
}

}  // namespace

TEST_CASE("a new profile holds exactly the schema's tables and views, set for writing") {
  // create_profile copies a build-time image of create_schema's result: the two must not drift.
  db::connection reference{":memory:", db::connection::mode::create};
  db::create_schema(reference);
  const auto path = fresh_path("image");
  auto profile = db::create_profile(path);
  auto objects = [](db::connection& database) {
    std::vector<std::string> found;
    auto rows =
        database.prepare("SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master ORDER BY name");
    while (rows.step()) found.emplace_back(rows.text(0));
    return found;
  };
  const auto expected = objects(reference);
  CHECK(expected.size() > 40);
  CHECK(objects(profile) == expected);
  auto journal = profile.prepare("PRAGMA journal_mode");
  REQUIRE(journal.step());
  CHECK(journal.text(0) == "persist");
  auto version = profile.prepare("SELECT value FROM metadata WHERE key = 'schema_version'");
  REQUIRE(version.step());
  CHECK(version.text(0) == std::to_string(db::schema_version));
  CHECK_THROWS_WITH_AS(db::create_profile(path), doctest::Contains("already exists"), db::database_error);
}

TEST_CASE("strings, frames and stacks are stored once") {
  auto profile = db::open_profile(write_known_profile("dedup"));
  CHECK(count(profile, "SELECT COUNT(*) FROM frame") == 4);
  // Trie: main, main;solve, main;solve;step, main;write, main;write;write.
  CHECK(count(profile, "SELECT COUNT(*) FROM stack") == 5);
  CHECK(count(profile, "SELECT COUNT(*) FROM string WHERE value = 'main'") == 1);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample") == 200);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample WHERE window = 0") == 200);
}

TEST_CASE("stack_total sums the samples as they are written, commit by commit") {
  const auto path = fresh_path("totals");
  const std::uint64_t stacks[][2] = {{0x200, 0x100}, {0x300, 0x100}};
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const std::int64_t threads[] = {writer.add_thread(process, {0, 0, 1, "a", 0}),
                                    writer.add_thread(process, {1, 1, 2, "b", 0})};
    for (int i = 0; i < 1000; ++i) {
      const auto stack = i % 7 == 0 ? -1 : writer.add_stack(stacks[i % 2]);  // some without a stack
      writer.add_sample(threads[i % 2], 5'000 - i, 1 + i % 3, stack, i / 400);
      if (i % 128 == 127) writer.commit();  // a total spans commits
    }
  }
  auto profile = db::open_profile(path);
  const auto [totals, from_samples] = totals_and_samples(profile);
  CHECK(totals.size() == 2 * 2 * 3);  // threads, stack or none, windows 0-2
  CHECK(totals == from_samples);
}

TEST_CASE("top_functions weighs self by leaf and total once per sample") {
  auto profile = db::open_profile(write_known_profile("top"));
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> rows;
  auto query = profile.prepare("SELECT name, self, total FROM top_functions");
  while (query.step()) rows[std::string{query.text(0)}] = {query.integer(1), query.integer(2)};
  CHECK(rows["step"] == std::pair<std::int64_t, std::int64_t>{75'000'000, 75'000'000});
  CHECK(rows["solve"] == std::pair<std::int64_t, std::int64_t>{25'000'000, 100'000'000});
  CHECK(rows["main"] == std::pair<std::int64_t, std::int64_t>{0, 200'000'000});
  // Recursive write: counted once per sample in total.
  CHECK(rows["write"] == std::pair<std::int64_t, std::int64_t>{100'000'000, 100'000'000});
}

TEST_CASE("samples and regions views resolve names") {
  auto profile = db::open_profile(write_known_profile("views"));
  CHECK(count(profile, "SELECT COUNT(*) FROM samples WHERE leaf = 'step'") == 75);
  auto regions = profile.prepare("SELECT name, duration_ns, depth FROM regions ORDER BY name");
  REQUIRE(regions.step());
  CHECK(regions.text(0) == "solve_region");
  CHECK(regions.integer(1) == 100'000'000);
  CHECK(count(profile, "SELECT COUNT(*) FROM threads WHERE name = 'writer' AND tid = 4243") == 1);
}

TEST_CASE("frames without a symbol are named once per module, and keep their module and offset") {
  const auto path = fresh_path("unknown");
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "", 0});
    const std::uint64_t first[] = {0x999}, second[] = {0x9a9};
    writer.add_sample(thread, 0, 1, writer.add_stack(first));
    writer.add_sample(thread, 1, 1, writer.add_stack(second));
  }
  auto profile = db::open_profile(path);
  auto rows = profile.prepare("SELECT name, self FROM top_functions");
  REQUIRE(rows.step());
  CHECK(rows.text(0) == "app (no symbols)");
  CHECK(rows.integer(1) == 2);
  CHECK_FALSE(rows.step());
  CHECK(count(profile, "SELECT COUNT(*) FROM frame WHERE offset IN (0x989, 0x999)") == 2);
}

TEST_CASE("the text output ranks functions overall and per thread") {
  auto profile = db::open_profile(write_known_profile("text"));
  std::ostringstream out;
  db::write_text(profile, out);
  const auto text = out.str();
  CHECK(text.find("200 samples standing for 0.200 s of CPU time, 2 threads") != std::string::npos);
  CHECK(text.find("   50.0      100.000    50.0      100.000  write\n") != std::string::npos);
  CHECK(text.find("   37.5       75.000    37.5       75.000  step\n") != std::string::npos);
  CHECK(text.find("thread 1 (tid 4243, writer): 100 samples, 50.0% of the weight") != std::string::npos);
  CHECK(text.find("   75.0       75.000    75.0       75.000  step\n") != std::string::npos);
}

TEST_CASE("the folded output has one line per sampled stack, weights in microseconds") {
  auto profile = db::open_profile(write_known_profile("folded"));
  std::ostringstream out;
  db::write_folded(profile, out);
  CHECK(out.str() ==
        "main;solve 25000\n"
        "main;solve;step 75000\n"
        "main;write;write 100000\n");
}

TEST_CASE("the trace output is Chrome Trace Event JSON with regions, samples and stack frames") {
  auto profile = db::open_profile(write_known_profile("trace"));
  std::ostringstream out;
  db::write_trace(profile, out);
  const auto trace = nlohmann::json::parse(out.str());
  int regions = 0, samples = 0, thread_names = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X") {
      ++regions;
      if (event["name"] == "solve_region") {
        CHECK(event["ts"] == 0.0);
        CHECK(event["dur"] == 100000.0);
        CHECK(event["tid"] == 4242);
      }
    }
    if (event["ph"] == "i") {
      ++samples;
      const auto frame = event["sf"].get<std::string>();
      CHECK(trace["stackFrames"].contains(frame));
      CHECK(trace["stackFrames"][frame]["name"] == event["name"]);
    }
    if (event["ph"] == "M" && event["name"] == "thread_name") ++thread_names;
  }
  CHECK(regions == 2);
  CHECK(samples == 200);
  CHECK(thread_names == 2);
  CHECK(trace["stackFrames"].size() == 5);
}

TEST_CASE("the JSON summary carries the top functions and metadata") {
  auto profile = db::open_profile(write_known_profile("summary"));
  std::ostringstream out;
  db::write_summary_json(profile, out);
  const auto summary = nlohmann::json::parse(out.str());
  CHECK(summary["samples"] == 200);
  CHECK(summary["top_functions"][0]["name"] == "write");
  CHECK(summary["metadata"]["command"] == "app --fast");
  CHECK(summary["threads"].size() == 2);
}

TEST_CASE("every output that shows shares states how much of the program's CPU time its samples cover") {
  const auto path = write_known_profile("coverage");
  {
    db::profile_writer writer{path, fake_symbols, db::profile_writer::reopen};
    writer.set_metadata("program_cpu_ns", "1000000000");
    writer.set_metadata("unsampled_cpu_ns", "700000000");
    writer.set_metadata("unsampled_threads", "1");
    writer.set_metadata("dropped.samples", "3");
    writer.set_metadata("setting.KAIROS_SAMPLING_DELAY", "0.5");
    // The runtime's measured parts of the rest (sampler.cpp, "coverage").
    writer.set_metadata("coverage.before_sampling_ns", "60000000");
    writer.set_metadata("coverage.paused_ns", "0");
    writer.set_metadata("coverage.after_last_sample_ns", "20000000");
    writer.set_metadata("coverage.signal_handler_ns", "5000000");
    writer.set_metadata("coverage.weights_shortfall_ns", "12000000");
    writer.set_metadata("lost_cpu_ns", "3000000");  // the 3 lost samples' time (sampler.cpp)
    writer.commit();
  }
  auto profile = db::open_profile(path);
  const std::string coverage =
      "samples stand for 0.200 s of the program's 1.000 s of CPU time (20.0%); not sampled: 0.700 s in 1 thread "
      "that blocked the sampling signal; 0.060 s before sampling began (KAIROS_SAMPLING_DELAY=0.5 s); 0.020 s after a "
      "thread's last sample; 0.005 s in kairos's signal handler; 0.003 s in 3 lost samples (the writers fell behind); "
      "0.012 s between samples that their weights fall short of";
  std::ostringstream text, summary, html, flamegraph, speedscope;
  db::write_text(profile, text);
  CHECK(text.str().find("\ncoverage (whole run): " + coverage) != std::string::npos);
  db::write_summary_json(profile, summary);
  const auto json = nlohmann::json::parse(summary.str())["coverage"];
  CHECK(json["program_cpu_ns"] == 1'000'000'000);
  CHECK(json["sampled_cpu_ns"] == 200'000'000);
  CHECK(json["sampled_percent"] == doctest::Approx(20.0));
  CHECK(json["not_sampled"]["blocked_signal_cpu_ns"] == 700'000'000);
  CHECK(json["not_sampled"]["before_sampling_cpu_ns"] == 60'000'000);
  CHECK(json["not_sampled"]["after_last_sample_cpu_ns"] == 20'000'000);
  CHECK(json["not_sampled"]["signal_handler_cpu_ns"] == 5'000'000);
  CHECK(json["not_sampled"]["weights_shortfall_ns"] == 12'000'000);
  CHECK(json["not_sampled"]["dropped_samples"] == 3);
  CHECK(json["not_sampled"]["lost_cpu_ns"] == 3'000'000);
  CHECK(json["text"].get<std::string>().starts_with(coverage));
  db::write_html(profile, html);
  // First in the summary, marked as partial.
  CHECK(html.str().find(R"(<table class="summary" id="summary-table">)"
                        "\n"
                        R"(<tr id="coverage" class="partial"><th>coverage</th><td>samples stand for 0.200 s)") !=
        std::string::npos);
  db::write_flamegraph(profile, flamegraph);
  CHECK(flamegraph.str().find("1.000 s of CPU time (20.0%); not sampled: 0.700 s") != std::string::npos);
  db::write_speedscope(profile, speedscope);
  CHECK(nlohmann::json::parse(speedscope.str())["name"].get<std::string>().starts_with("app --fast (" + coverage));
}

TEST_CASE("weights that exceed the CPU time they stand for are said, with the perf rings' excess") {
  const auto path = write_known_profile("coverage-excess");
  {
    db::profile_writer writer{path, fake_symbols, db::profile_writer::reopen};
    writer.set_metadata("program_cpu_ns", "190000000");
    writer.set_metadata("coverage.weights_shortfall_ns", "-10000000");
    writer.set_metadata("coverage.ring_count_excess_ns", "10000000");
    writer.commit();
  }
  auto profile = db::open_profile(path);
  std::ostringstream text;
  db::write_text(profile, text);
  CHECK(text.str().find("of the program's 0.190 s of CPU time (105.3%); the weights exceed the CPU time they stand "
                        "for by 0.010 s (perf rings' task-clock counted 0.010 s more than their threads' CPU "
                        "clocks)") != std::string::npos);
}

TEST_CASE("a profile without the program's CPU time says what its samples stand for, and no share of a whole") {
  auto profile = db::open_profile(write_known_profile("coverage-unknown"));
  std::ostringstream text;
  db::write_text(profile, text);
  CHECK(text.str().find("coverage (whole run): samples stand for 0.200 s of CPU time (the program's whole CPU time "
                        "was not recorded)\n") != std::string::npos);
}

TEST_CASE("the HTML report holds the summary, the tables, the flame graph and the timeline") {
  auto profile = db::open_profile(write_known_profile("html"));
  std::ostringstream out;
  db::write_html(profile, out, {}, "kairos test");
  const auto page = out.str();
  CHECK(page.starts_with("<!DOCTYPE html>"));
  CHECK(page.find("<th>command</th><td><span class=\"name\">app --fast</span></td>") != std::string::npos);
  CHECK(page.find("200 standing for 200.0 ms of CPU time") != std::string::npos);
  // Top functions: write's 50% self, sortable by value.
  CHECK(page.find(R"(<td class="n" data-v="50">50.0</td><td class="n" data-v="100">100.000</td>)") !=
        std::string::npos);
  CHECK(page.find("<?xml") == std::string::npos);  // the flame graph inline, without its declaration
  CHECK(page.find(R"(<g class="graph" id="g0" data-name="all threads")") != std::string::npos);
  CHECK(page.find("write &quot;quoted&quot; region") != std::string::npos);  // names escaped
  CHECK(page.find(R"(<svg class="timeline")") != std::string::npos);
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("id=\"windows\"") == std::string::npos);  // no windows, no section
  CHECK(page.find("id=\"gpu\"") == std::string::npos);
}

TEST_CASE("a block of regions decodes to what was encoded, in C++ and through the view, whatever the values") {
  // Dense short regions (a few digits a field), a field all zeros (no places), negative and extreme
  // values (a sign, 19 digits), a region ending before it starts: each field's width is its own.
  constexpr auto most = std::numeric_limits<std::int64_t>::max();
  constexpr auto least = std::numeric_limits<std::int64_t>::min();
  const std::vector<std::vector<db::region_fields>> blocks{
      {{1'000, 1'010, 1, 0, 0, 0, 0}, {1'020, 1'025, 1, 1, 0, 0, 0}, {999, 1'030, 2, 0, 0, 0, 0}},
      {{5, 5, 7, 0, 0, 0, 0}},
      {{-50, -10, 3, -2, -1, 3, 12'345}, {0, -20, 1'234'567, 99, 4, 0, 0}},
      {{0, most, most, least, least + 1, 9, most}, {most, most, 1, 0, 0, 0, 1}},
  };
  const auto path = fresh_path("region_codec");
  {
    auto database = db::create_profile(path);
    auto insert = database.prepare(db::region_block_insert_sql("region_block"));
    db::encoded_region_block encoded;
    for (const auto& rows : blocks) {
      db::encode_region_block(rows, encoded);
      CHECK(encoded.count == std::ssize(rows));
      std::vector<db::region_fields> decoded;
      CHECK(db::decode_region_block(encoded.start_ns, encoded.count, encoded.digits, encoded.rows,
                                    [&](const db::region_fields& row) { decoded.push_back(row); }));
      CHECK(decoded == rows);
      db::insert_region_block(insert, 1, encoded);
    }
    db::encode_region_block(blocks[0], encoded);
    CHECK(encoded.digits ==
          std::array<int, 7>{2, 2, 1, 1, 0, 0, 0});  // starts 1, 21, 0 and lengths 10, 5, 31: two places each
    CHECK(encoded.rows == R"(["011010","210511","003120"])");
    db::encode_region_block(blocks[2], encoded);
    CHECK(encoded.rows.find('-') != std::string::npos);
  }
  // The view, as any SQLite client reads it.
  auto database = db::open_profile(path);
  auto viewed = database.prepare("SELECT start_ns, end_ns, name, depth, window, clipped, IFNULL(frame, 0) FROM region");
  std::vector<db::region_fields> small;
  while (viewed.step())
    small.push_back({viewed.integer(0), viewed.integer(1), viewed.integer(2), viewed.integer(3), viewed.integer(4),
                     viewed.integer(5), viewed.integer(6)});
  REQUIRE(small.size() == 8);
  std::size_t at = 0;
  for (const auto& rows : blocks)
    for (const auto& row : rows) CHECK_MESSAGE(small.at(at++) == row, "region " << at - 1);
  CHECK(small[6] == blocks[3][0]);  // the extreme block
  CHECK(small[7] == blocks[3][1]);
}

TEST_CASE("random blocks of regions decode to what was encoded") {
  // Values of every size, signs mixed in some blocks, blocks of 1 to 4,096 rows.
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const auto value = [&](bool signs) {
    const auto digits = next() % 20;
    std::int64_t magnitude = 1;
    for (std::uint64_t i = 0; i < digits && magnitude < std::numeric_limits<std::int64_t>::max() / 10; ++i)
      magnitude *= 10;
    auto result = static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(magnitude));
    return signs && next() % 2 ? -result : result;
  };
  db::encoded_region_block encoded;
  for (int block = 0; block < 200; ++block) {
    const bool signs = block % 3 == 0;
    std::vector<db::region_fields> rows(1 + next() % (block % 10 == 0 ? 4096 : 50));
    for (auto& row : rows) {
      row.start_ns = value(signs) / 4;
      row.end_ns = row.start_ns + value(signs) / 4;
      row.name = value(signs);
      row.depth = value(signs);
      row.window = value(signs);
      row.clipped = value(signs);
      row.frame = value(signs);
    }
    db::encode_region_block(rows, encoded);
    std::vector<db::region_fields> decoded;
    CHECK(db::decode_region_block(encoded.start_ns, encoded.count, encoded.digits, encoded.rows,
                                  [&](const db::region_fields& row) { decoded.push_back(row); }));
    CHECK_MESSAGE(decoded == rows, "block " << block);
  }
}

TEST_CASE("a block of regions not as kairos writes it is refused, not misread") {
  db::encoded_region_block encoded;
  const std::vector<db::region_fields> rows{{100, 150, 3, 1, 0, 0, 0}, {120, 130, 3, 2, 0, 0, 0}};
  db::encode_region_block(rows, encoded);
  const auto decodes = [&](std::int64_t count, std::array<int, 7> digits, const std::string& text) {
    return db::decode_region_block(0, count, digits, text, [](const db::region_fields&) {});
  };
  CHECK(decodes(encoded.count, encoded.digits, encoded.rows));
  CHECK_FALSE(decodes(encoded.count + 1, encoded.digits, encoded.rows));  // a row too many
  CHECK_FALSE(decodes(0, encoded.digits, "[]"));                          // blocks are never empty
  auto wider = encoded.digits;
  wider[3] += 1;
  CHECK_FALSE(decodes(encoded.count, wider, encoded.rows));  // the widths do not add up to the rows
  CHECK_FALSE(decodes(1, {21, 0, 0, 0, 0, 0, 0}, "[\"" + std::string(21, '1') + "\"]"));
  CHECK_FALSE(decodes(2, {20, 0, 0, 0, 0, 0, 0},
                      "[\"" + std::string(20, '9') + "\",\"" + std::string(20, '9') + "\"]"));  // 20 digits, no sign
  for (const std::size_t at :
       {std::size_t{0}, std::size_t{1}, std::size_t{3}, encoded.rows.size() / 2 + 1, encoded.rows.size() - 1}) {
    auto broken = encoded.rows;
    broken[at] = broken[at] == 'x' ? 'y' : 'x';
    CHECK_FALSE(decodes(encoded.count, encoded.digits, broken));
  }
  // Stored so, it is named by every reader of blocks (an output here), not misread.
  const auto path = write_known_profile("corrupt_block");
  {
    db::connection editing{path, db::connection::mode::read_write};
    editing.execute("UPDATE region_block SET rows = replace(rows, '\"', 'x') WHERE id = 1");
  }
  auto profile = db::open_profile(path);
  std::ostringstream out;
  CHECK_THROWS_WITH(db::write_trace(profile, out),
                    doctest::Contains("region_block 1 does not hold rows as kairos writes them"));
}

TEST_CASE("the outputs read regions from their blocks as the regions view does") {
  // The trace and the text report decode region_block themselves (the view parses a row's JSON
  // once a field): every region the view shows, in every window range, and only those.
  const auto path = fresh_path("regions_decoded");
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({4242, 1, std::nullopt, "host", "app", 1'000'000'000});
    const auto main_thread = writer.add_thread(process, {0, 0, 4242, "main", 0});
    const auto worker = writer.add_thread(process, {1, 1, 4243, "worker", 0});
    for (std::int64_t i = 0; i < 10'000; ++i) {  // more than two blocks of a thread
      const auto start = 1'000'000'000 + i * 1'000;
      const auto window = i % 3;
      writer.add_region(main_thread, i % 2 ? "odd \"quoted\"" : "even", start, start + 900, i % 4, window,
                        i % 7 == 0 ? 1 : 0);
      if (i % 5 == 0) writer.add_function_region(worker, 0x300, start + 100, start + 200, 1, window);
    }
    writer.add_region(worker, "", 1'000'000'000, 1'000'000'000, 0);  // empty name, no duration
    writer.commit();
  }
  auto profile = db::open_profile(path);
  for (const auto range : {db::window_range{}, db::window_range::only(0, 1), db::window_range::only(1, 1)}) {
    using region = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t,
                              std::int64_t>;  // name tid ts dur clipped (ns)
    std::vector<region> viewed;
    auto origin = profile.prepare(
        "SELECT MIN(t) FROM (SELECT MIN(time_ns) AS t FROM sample UNION ALL "
        "SELECT MIN(start_ns) FROM regions)");
    REQUIRE(origin.step());
    const auto origin_ns = origin.integer(0);
    auto rows = profile.prepare(
        "SELECT regions.name, threads.tid, regions.start_ns, regions.duration_ns, regions.clipped FROM regions "
        "JOIN threads ON threads.id = regions.thread" +
        std::string{range.all ? ""
                              : " WHERE regions.window BETWEEN " + std::to_string(range.first) + " AND " +
                                    std::to_string(range.last)});
    while (rows.step())
      viewed.emplace_back(std::string{rows.text(0)}, rows.integer(1), rows.integer(2) - origin_ns, rows.integer(3),
                          rows.integer(4));
    std::ostringstream out;
    db::write_trace(profile, out, range);
    std::vector<region> traced;
    double last_main_ts = std::numeric_limits<double>::infinity();
    bool latest_first = true;
    const auto trace = nlohmann::json::parse(out.str());
    for (const auto& event : trace["traceEvents"]) {
      if (event.value("cat", "") != "region") continue;
      const auto ts = event["ts"].get<double>();
      if (event["tid"].get<std::int64_t>() == 4242) {
        latest_first = latest_first && ts < last_main_ts;
        last_main_ts = ts;
      }
      traced.emplace_back(event["name"].get<std::string>(), event["tid"].get<std::int64_t>(), std::llround(ts * 1e3),
                          std::llround(event["dur"].get<double>() * 1e3),
                          event.contains("args") ? event["args"].value("clipped", 0) : 0);
    }
    std::sort(viewed.begin(), viewed.end());
    std::sort(traced.begin(), traced.end());
    INFO("windows " << range.first << " to " << range.last << (range.all ? " (all)" : ""));
    CHECK(viewed.size() > 1000);
    REQUIRE(traced.size() == viewed.size());
    for (std::size_t i = 0; i < traced.size(); ++i)
      if (traced[i] != viewed[i]) {
        FAIL_CHECK("first difference: " << std::get<0>(traced[i]) << " " << std::get<2>(traced[i]) << " "
                                        << std::get<3>(traced[i]) << " against " << std::get<0>(viewed[i]) << " "
                                        << std::get<2>(viewed[i]) << " " << std::get<3>(viewed[i]));
        break;
      }
    // A thread's regions stream out in the reverse of the order they were written (the main
    // thread's in the order they ended, none nesting: latest first).
    CHECK(latest_first);
  }
}

TEST_CASE("the call graphs count every call a thread counted, and read rows only for a thread that counted none") {
  const auto path = fresh_path("call-tree");
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({4242, 1, std::nullopt, "host", "app", 0});
    const auto counted = writer.add_thread(process, {0, 0, 4242, "main", 0});
    const auto rows_only = writer.add_thread(process, {1, 1, 4243, "worker", 0});
    // main (0x100) calls solve (0x200) 21,891 times inside a region "phase"; only solve's one long
    // call made a row (the minimum duration's), as did main and the region.
    const db::profile_writer::call_tree_input tree[] = {{.node = 1,
                                                         .parent = 0,
                                                         .function_address = 0x100,
                                                         .calls = 1,
                                                         .total_ns = 90'000'000,
                                                         .min_ns = 90'000'000,
                                                         .max_ns = 90'000'000,
                                                         .sum_squares_ms = 8100},
                                                        {.node = 2,
                                                         .parent = 1,
                                                         .name = "phase",
                                                         .calls = 1,
                                                         .total_ns = 80'000'000,
                                                         .min_ns = 80'000'000,
                                                         .max_ns = 80'000'000,
                                                         .sum_squares_ms = 6400},
                                                        {.node = 3,
                                                         .parent = 2,
                                                         .function_address = 0x200,
                                                         .calls = 21'891,
                                                         .total_ns = 60'000'000,
                                                         .min_ns = 100,
                                                         .max_ns = 20'000'000,
                                                         .sum_squares_ms = 500}};
    writer.add_call_tree(counted, tree);
    writer.add_function_region(counted, 0x200, 1'010'000'000, 1'030'000'000, 2);
    writer.add_region(counted, "phase", 1'000'000'000, 1'080'000'000, 1);
    writer.add_function_region(counted, 0x100, 1'000'000'000, 1'090'000'000, 0);
    writer.add_region(rows_only, "load", 1'000'000'000, 1'010'000'000, 0);
    writer.add_region(rows_only, "load", 1'020'000'000, 1'030'000'000, 0);
    writer.commit();
  }
  auto profile = db::open_profile(path);
  std::ostringstream text, summary, html;
  db::write_text(profile, text);
  CHECK(text.str().find("     21891       60.000        2.741   100.0       1      solve") != std::string::npos);
  CHECK(text.str().find("         1       80.000    80000.000    25.0       1    phase") != std::string::npos);
  CHECK(text.str().find("         2       20.000    10000.000   100.0       1  load") != std::string::npos);
  db::write_summary_json(profile, summary);
  const auto graph = nlohmann::json::parse(summary.str())["call_graph"];
  REQUIRE(graph.size() == 4);
  CHECK(graph[0]["name"] == "main");
  CHECK(graph[0]["parent"].is_null());
  const auto solve = std::find_if(graph.begin(), graph.end(), [](const auto& node) { return node["name"] == "solve"; });
  REQUIRE(solve != graph.end());
  CHECK((*solve)["count"] == 21'891);
  CHECK((*solve)["min_ns"] == 100);
  CHECK(graph[(*solve)["parent"].get<std::size_t>()]["name"] == "phase");
  db::write_html(profile, html);
  CHECK(html.str().find(R"(solve</td><td class="n" data-v="21891">21891</td>)") != std::string::npos);
}

TEST_CASE("the text report's call graph nests each thread's regions as they ended, across blocks") {
  // Two threads walk a random tree of regions three names wide and four deep; each region's row is
  // written when it ends, as kairos writes them, several blocks a thread. The report's call graph
  // (read one block at a time, latest region first) must give every path its exact count and time.
  const auto path = fresh_path("region_call_graph");
  struct expected_node {
    std::int64_t count = 0, total_ns = 0;
    std::set<std::int64_t> threads;
  };
  std::map<std::string, expected_node> expected;  // by path, "a/b/c"
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({4242, 1, std::nullopt, "host", "app", 1'000'000'000});
    std::mt19937 random{17};
    for (std::int64_t tid : {4242, 4243}) {
      const auto thread = writer.add_thread(process, {tid - 4242, tid - 4242, tid, "t", 0});
      struct open_region {
        std::string name;
        std::int64_t start_ns;
      };
      std::vector<open_region> stack;
      std::int64_t now = 1'000'000'000;
      for (int step = 0; step < 30'000 || !stack.empty(); ++step) {
        now += 1'000 + static_cast<std::int64_t>(random() % 1'000);
        const bool push = step < 30'000 && stack.size() < 4 && (stack.empty() || random() % 2 == 0);
        if (push) {
          stack.push_back({std::string(1, static_cast<char>('a' + random() % 3)), now});
          continue;
        }
        std::string joined;
        for (const auto& region : stack) joined += (joined.empty() ? "" : "/") + region.name;
        auto& node = expected[joined];
        ++node.count;
        node.total_ns += now - stack.back().start_ns;
        node.threads.insert(tid);
        writer.add_region(thread, stack.back().name, stack.back().start_ns, now,
                          static_cast<std::int64_t>(stack.size()) - 1, 0);
        stack.pop_back();
      }
    }
    writer.commit();
  }
  auto profile = db::open_profile(path);
  REQUIRE(count(profile, "SELECT COUNT(*) FROM region_block") >= 6);
  std::ostringstream out;
  db::write_text(profile, out);
  std::istringstream text{out.str()};
  std::string line;
  while (std::getline(text, line) && line.find("call graph of regions") == std::string::npos) {
  }
  REQUIRE(std::getline(text, line));  // the header
  std::vector<std::string> open;
  std::size_t rows = 0;
  while (std::getline(text, line) && !line.empty() && !line.starts_with("...")) {
    std::istringstream fields{line};
    std::int64_t count = 0, threads = 0;
    double total_ms = 0, mean_us = 0, self_percent = 0;
    fields >> count >> total_ms >> mean_us >> self_percent >> threads;
    // Five right-aligned columns (10, 12, 12, 7, 7 wide, a space apart) and two spaces, then two
    // spaces of indent a depth and the name.
    constexpr std::size_t names_at = 54;
    REQUIRE(line.size() > names_at);
    const auto name_at = line.find_first_not_of(' ', names_at);
    const auto depth = (name_at - names_at) / 2;
    REQUIRE(depth <= open.size());
    open.resize(depth);
    open.push_back(line.substr(name_at));
    std::string joined;
    for (const auto& name : open) joined += (joined.empty() ? "" : "/") + name;
    INFO("path " << joined);
    const auto found = expected.find(joined);
    REQUIRE(found != expected.end());
    CHECK(count == found->second.count);
    CHECK(std::abs(total_ms - static_cast<double>(found->second.total_ns) * 1e-6) <= 0.0005001);  // 3 decimals
    CHECK(threads == static_cast<std::int64_t>(found->second.threads.size()));
    ++rows;
  }
  CHECK(rows == expected.size());
}

TEST_CASE("the HTML report stays bounded however many regions there are") {
  const auto path = fresh_path("html_bounded");
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({4242, 1, std::nullopt, "host", "app", 1'000'000'000});
    const auto thread = writer.add_thread(process, {0, 0, 4242, "main", 0});
    // 100,000 regions of 2,000 names, one every 10 µs; every tenth has a child two levels down
    // (its parent was never recorded: the region one level up adopts it).
    for (std::int64_t i = 0; i < 100'000; ++i) {
      const auto start = 1'000'000'000 + i * 10'000;
      writer.add_region(thread, "region " + std::to_string(i % 2000), start, start + 8'000, 0);
      if (i % 10 == 0) writer.add_region(thread, "orphan", start + 1'000, start + 2'000, 2);
    }
    writer.commit();
  }
  auto profile = db::open_profile(path);
  std::ostringstream out;
  db::write_html(profile, out);
  const auto page = out.str();
  CHECK(page.size() < 512 * 1024);
  const auto table = page.substr(page.find("id=\"region-table\""));
  std::size_t rows = 0;
  for (auto at = table.find("<tr>"); at != std::string::npos && at < table.find("</table>");
       at = table.find("<tr>", at + 1))
    ++rows;
  CHECK(rows == 1 + 500);  // the header and the rows shown
  CHECK(page.find("more rows are left out") != std::string::npos);
  // Contiguous regions merge into one run per lane: the timeline is a few boxes, not 110,000.
  std::size_t boxes = 0;
  for (auto at = page.find("class=\"region\""); at != std::string::npos; at = page.find("class=\"region\"", at + 1))
    ++boxes;
  CHECK(boxes <= 4);
  CHECK(page.find("regions of several names") != std::string::npos);
}

TEST_CASE("a killed writer leaves a valid database with everything up to the last commit") {
  const auto path = fresh_path("killed");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "", 0});
    const std::uint64_t stack[] = {0x100};
    for (int i = 0; i < 500; ++i) writer.add_sample(thread, i, 1, writer.add_stack(stack));
    writer.commit();
    for (int i = 0; i < 500; ++i) writer.add_sample(thread, i, 1, writer.add_stack(stack));
    ::kill(::getpid(), SIGKILL);  // uncommitted rows are lost, committed ones are not
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  // Killed in the middle of a transaction: its journal is hot, and the read-only reader still sees
  // the last commit (open_profile rolls the journal back first).
  REQUIRE(std::filesystem::file_size(path + "-journal") > 0);
  const auto stray = fresh_path("killed_journal_elsewhere");
  std::filesystem::copy_file(path + "-journal", stray + "-journal");
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample") == 500);
  auto integrity = profile.prepare("PRAGMA integrity_check");
  REQUIRE(integrity.step());
  CHECK(integrity.text(0) == "ok");
  // A journal whose database is gone is not rolled back into a new profile of that name.
  {
    db::profile_writer writer{stray, fake_symbols};
    writer.add_process({2, 0, std::nullopt, "h", "c", 0});
    writer.commit();
  }
  auto fresh = db::open_profile(stray);
  CHECK(count(fresh, "SELECT COUNT(*) FROM sample") == 0);
  CHECK(count(fresh, "SELECT COUNT(*) FROM process") == 1);
  auto fresh_integrity = fresh.prepare("PRAGMA integrity_check");
  REQUIRE(fresh_integrity.step());
  CHECK(fresh_integrity.text(0) == "ok");
}

namespace {
// This process's descriptors of `path` and its journal.
std::vector<int> descriptors_of(const std::string& path) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator{"/proc/self/fd"}) {
    std::error_code unreadable;
    const auto target = std::filesystem::read_symlink(entry.path(), unreadable).string();
    if (!unreadable && (target == path || target == path + "-journal"))
      found.push_back(std::stoi(entry.path().filename().string()));
  }
  REQUIRE(!found.empty());
  return found;
}
// Closes them behind SQLite's back, as a program's raw close_range system call does.
void close_descriptors_of(const std::string& path) {
  for (const int fd : descriptors_of(path)) ::close(fd);
}
// Makes the writer's next commit fail, its descriptors gone behind SQLite's back, then puts them
// back, so that the same writer can go on.
void fail_next_commit(db::profile_writer& writer, const std::string& path) {
  const auto held = descriptors_of(path);
  std::vector<int> spares;
  for (const int fd : held) spares.push_back(::dup(fd));
  for (const int fd : held) ::close(fd);
  CHECK_THROWS(writer.commit());
  for (std::size_t i = 0; i < held.size(); ++i) {
    REQUIRE(::dup2(spares[i], held[i]) == held[i]);
    ::close(spares[i]);
  }
}
}  // namespace

TEST_CASE("a failed commit forgets what it held, and a writer opened again goes on from the last commit") {
  const auto path = fresh_path("reopened");
  const std::uint64_t committed_stack[] = {0x200, 0x100};
  const std::uint64_t lost_stack[] = {0x300, 0x200, 0x100};
  std::int64_t process = 0, thread = 0;
  db::profile_writer::row_ids committed;
  {
    db::profile_writer writer{path, fake_symbols};
    writer.database().execute("PRAGMA main.locking_mode = EXCLUSIVE");  // as the runtime's
    process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    writer.add_sample(thread, 1, 1, writer.add_stack(committed_stack));
    writer.commit();
    committed = writer.committed_rows();
    CHECK(committed.thread == thread);
    CHECK(committed.stack == 2);
    CHECK(committed.frame == 2);
    const auto lost_thread = writer.add_thread(process, {1, 1, 2, "lost", 0});
    writer.add_sample(lost_thread, 2, 1, writer.add_stack(lost_stack));
    writer.add_region(thread, "lost region", 1, 2, 0);
    close_descriptors_of(path);
    CHECK_THROWS(writer.commit());
    const auto after = writer.committed_rows();
    CHECK(std::tie(after.string, after.frame, after.stack, after.thread) ==
          std::tie(committed.string, committed.frame, committed.stack, committed.thread));
    CHECK_FALSE(writer.roll_back_if_ended());  // the commit rolled it back already
  }
  {
    db::profile_writer writer{path, fake_symbols, db::profile_writer::reopen};
    const auto reopened = writer.committed_rows();
    CHECK(std::tie(reopened.string, reopened.frame, reopened.stack, reopened.thread) ==
          std::tie(committed.string, committed.frame, committed.stack, committed.thread));
    const auto next_thread = writer.add_thread(process, {1, 1, 2, "after", 0});
    CHECK(next_thread == thread + 1);  // the rolled-back row's id, now this one's
    writer.add_sample(next_thread, 3, 1, writer.add_stack(lost_stack));
    writer.add_sample(thread, 4, 1, writer.add_stack(committed_stack));
    writer.add_region(thread, "kept region", 3, 4, 0);
    writer.commit();
  }
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample") == 3);
  const auto [totals, from_samples] = totals_and_samples(profile);
  CHECK(totals == from_samples);  // the failed commit's sums were forgotten with its samples
  // What was committed is found again, not written twice: main;solve once, step under it.
  CHECK(count(profile, "SELECT COUNT(*) FROM frame") == 3);
  CHECK(count(profile, "SELECT COUNT(*) FROM stack") == 3);
  CHECK(count(profile, "SELECT COUNT(*) FROM string WHERE value = 'main'") == 1);
  CHECK(count(profile,
              "SELECT COUNT(*) FROM sample WHERE stack NOT IN (SELECT id FROM stack) "
              "OR thread NOT IN (SELECT id FROM thread)") == 0);
  CHECK(count(profile, "SELECT COUNT(*) FROM samples WHERE leaf = 'step'") == 1);
  CHECK(count(profile, "SELECT COUNT(*) FROM samples WHERE leaf = 'solve'") == 2);
  CHECK(count(profile, "SELECT COUNT(*) FROM thread WHERE name = (SELECT id FROM string WHERE value = 'lost')") == 0);
  CHECK(count(profile, "SELECT COUNT(*) FROM regions WHERE name = 'kept region'") == 1);
  CHECK(count(profile, "SELECT COUNT(*) FROM region") == 1);
  auto integrity = profile.prepare("PRAGMA integrity_check");
  REQUIRE(integrity.step());
  CHECK(integrity.text(0) == "ok");
}

TEST_CASE("after a failed commit the same writer goes on, and no row refers to one rolled back") {
  // A commit fails (its descriptors are gone for the moment, as a write error or a full disk
  // would make it fail), then the writer goes on: the ids it kept of the rolled-back rows (a
  // thread, strings, frames, stacks) would name rows that the next inserts number again.
  const auto path = fresh_path("rolled_back");
  const std::uint64_t committed_stack[] = {0x200, 0x100};
  const std::uint64_t lost_stack[] = {0x300, 0x200, 0x100};
  const std::uint64_t later_stack[] = {0x400, 0x100};
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    writer.add_sample(thread, 1, 1, writer.add_stack(committed_stack));
    writer.commit();
    const auto lost_thread = writer.add_thread(process, {1, 1, 2, "lost", 0});
    writer.add_sample(lost_thread, 2, 1, writer.add_stack(lost_stack));
    fail_next_commit(writer, path);
    // The same stacks and names again, and a new one: each row written anew, none reused.
    const auto later_thread = writer.add_thread(process, {2, 2, 3, "later", 0});
    writer.add_sample(later_thread, 3, 1, writer.add_stack(later_stack));
    writer.add_sample(later_thread, 4, 1, writer.add_stack(lost_stack));
    writer.add_sample(thread, 5, 1, writer.add_stack(committed_stack));
    writer.commit();
  }
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample") == 4);
  CHECK(count(profile,
              "SELECT COUNT(*) FROM sample WHERE stack NOT IN (SELECT id FROM stack) "
              "OR thread NOT IN (SELECT id FROM thread)") == 0);
  CHECK(count(profile,
              "SELECT COUNT(*) FROM stack WHERE frame NOT IN (SELECT id FROM frame) "
              "OR (parent IS NOT NULL AND parent NOT IN (SELECT id FROM stack))") == 0);
  CHECK(count(profile, "SELECT COUNT(*) FROM frame WHERE function NOT IN (SELECT id FROM string)") == 0);
  CHECK(count(profile, "SELECT COUNT(*) FROM stack") == 4);  // main, main;solve, main;solve;step, main;write
  CHECK(count(profile, "SELECT COUNT(*) FROM samples WHERE leaf = 'step'") == 1);
  CHECK(count(profile, "SELECT COUNT(*) FROM samples WHERE leaf = 'write'") == 1);
  CHECK(count(profile,
              "SELECT COUNT(*) FROM samples JOIN thread ON thread.id = samples.thread "
              "JOIN string ON string.id = thread.name WHERE string.value = 'later'") == 2);
}

// The streamed Perfetto sample packets (profile_writer::stream_perfetto_samples) read back: each
// packet's timestamp (TracePacket field 8, its first), in file order.
std::vector<std::int64_t> packet_times(const std::string& packets, std::size_t* last_packet_at = nullptr) {
  auto varint = [&](std::size_t& at) {
    std::uint64_t value = 0;
    for (int shift = 0; at < packets.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(packets[at++]);
      value |= std::uint64_t{byte & 0x7fu} << shift;
      if (byte < 0x80) break;
    }
    return value;
  };
  std::vector<std::int64_t> times;
  for (std::size_t at = 0; at < packets.size();) {
    if (last_packet_at) *last_packet_at = at;
    REQUIRE(packets[at++] == 0x0a);  // Trace.packet, length-delimited
    const auto end = at + varint(at);
    REQUIRE(packets[at++] == 0x40);  // TracePacket.timestamp, a varint
    times.push_back(static_cast<std::int64_t>(varint(at)));
    at = end;
  }
  return times;
}

TEST_CASE("a failed commit leaves no streamed Perfetto packets for the samples it lost") {
  const auto path = fresh_path("streamed_samples");
  const std::uint64_t committed_stack[] = {0x200, 0x100};
  const std::uint64_t lost_stack[] = {0x300, 0x200, 0x100};
  std::string streamed;
  int handed = 0;
  {
    db::profile_writer writer{path, fake_symbols};
    writer.stream_perfetto_samples([&](std::string_view packets) {
      streamed += packets;
      ++handed;
      return true;
    });
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    writer.add_sample(thread, 10, 1, writer.add_stack(committed_stack));
    writer.add_sample(thread, 11, 1, -1);  // no stack: no packet, as in the trace from the database
    CHECK(handed == 0);                    // nothing before the commit
    writer.commit();
    CHECK(handed == 1);
    CHECK(packet_times(streamed) == std::vector<std::int64_t>{10});
    // A commit that fails: its samples' packets are dropped with them.
    const auto lost_thread = writer.add_thread(process, {1, 1, 2, "lost", 0});
    writer.add_sample(lost_thread, 20, 1, writer.add_stack(lost_stack));
    writer.add_sample(thread, 21, 1, writer.add_stack(committed_stack));
    fail_next_commit(writer, path);
    CHECK(handed == 1);
    // The writer goes on, and the next commit hands over only what it stored.
    const auto later_thread = writer.add_thread(process, {2, 2, 3, "later", 0});
    writer.add_sample(later_thread, 30, 1, writer.add_stack(lost_stack));
    writer.add_sample(thread, 31, 1, writer.add_stack(committed_stack));
    writer.commit();
    CHECK(handed == 2);
    CHECK(writer.perfetto_samples_whole());
  }
  auto profile = db::open_profile(path);
  std::vector<std::int64_t> stored;
  auto samples = profile.prepare("SELECT time_ns FROM sample WHERE stack IS NOT NULL ORDER BY id");
  while (samples.step()) stored.push_back(samples.integer(0));
  CHECK(stored == std::vector<std::int64_t>{10, 30, 31});
  CHECK(packet_times(streamed) == stored);
  // The trace is written around them: they end it, as they were handed over.
  std::istringstream packets{streamed};
  std::ostringstream around;
  db::write_perfetto_with_streamed_samples(profile, around, packets);
  CHECK(around.str().size() > streamed.size());
  CHECK(around.str().ends_with(streamed));
  // A sample whose stack was interned before has the same packet in the trace from the database.
  std::size_t last_packet_at = 0;
  packet_times(streamed, &last_packet_at);
  std::ostringstream from_database;
  db::write_perfetto(profile, from_database);
  CHECK(from_database.str().ends_with(streamed.substr(last_packet_at)));
}

TEST_CASE("a writer whose packets cannot be written stops encoding them and says so") {
  const auto path = fresh_path("streamed_samples_broken");
  db::profile_writer writer{path, fake_symbols};
  CHECK_FALSE(writer.perfetto_samples_whole());  // not streaming
  int handed = 0;
  writer.stream_perfetto_samples([&](std::string_view) { return ++handed, false; });
  const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
  const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
  const std::uint64_t stack[] = {0x100};
  writer.add_sample(thread, 1, 1, writer.add_stack(stack));
  writer.commit();
  writer.add_sample(thread, 2, 1, writer.add_stack(stack));
  writer.commit();
  CHECK(handed == 1);
  CHECK_FALSE(writer.perfetto_samples_whole());
}

namespace {
// sample_timeline's rows, and the same sums made from the sample rows at the rows' one width.
using bucket_rows = std::vector<std::array<std::int64_t, 5>>;
std::pair<bucket_rows, bucket_rows> buckets_and_samples(db::connection& profile, std::int64_t width_ns) {
  auto read = [&](const std::string& sql) {
    bucket_rows rows;
    auto query = profile.prepare(sql);
    while (query.step()) {
      auto& row = rows.emplace_back();
      for (int column = 0; column < 5; ++column) row[static_cast<std::size_t>(column)] = query.integer(column);
    }
    return rows;
  };
  return {read("SELECT thread, window, start_ns, samples, weight_ns FROM sample_timeline ORDER BY 1, 2, 3"),
          read(fmt::format("SELECT thread, window, time_ns - time_ns % {0}, COUNT(*), SUM(weight_ns) FROM sample "
                           "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                           width_ns))};
}

// The width the writer's rule gives a span: the least power of two of which 8,192 cover it.
std::int64_t bucket_width_for(std::int64_t span_ns) {
  std::int64_t width = 1;
  while (span_ns > 8192 * width) width *= 2;
  return width;
}
}  // namespace

TEST_CASE("sample_timeline sums each thread's samples per window and time bucket, commit by commit") {
  const auto path = fresh_path("timeline_buckets");
  const std::uint64_t stack[] = {0x200, 0x100};
  std::int64_t last_ns = 0;
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const std::int64_t threads[] = {writer.add_thread(process, {0, 0, 1, "a", 0}),
                                    writer.add_thread(process, {1, 1, 2, "b", 0})};
    // Times out of order and growing by orders of magnitude: the width doubles within batches
    // and between commits, and committed rows are merged into it.
    std::mt19937_64 random{7};
    for (int i = 0; i < 20000; ++i) {
      const auto time_ns = static_cast<std::int64_t>(random() % (1000 + static_cast<std::uint64_t>(i) * i * 50));
      last_ns = std::max(last_ns, time_ns);
      writer.add_sample(threads[i % 2], time_ns, 1 + i % 5, i % 3 == 0 ? -1 : writer.add_stack(stack), i / 8000);
      if (i % 999 == 998) writer.commit();
    }
  }
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(DISTINCT width_ns) FROM sample_timeline") == 1);
  const auto width = count(profile, "SELECT width_ns FROM sample_timeline LIMIT 1");
  const auto first_ns = count(profile, "SELECT MIN(time_ns) FROM sample");
  CHECK(width == bucket_width_for(last_ns - first_ns));
  CHECK(width > 1024);
  CHECK(count(profile, "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM sample_timeline GROUP BY thread, window)") <=
        8193);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample_timeline WHERE start_ns % width_ns != 0") == 0);
  const auto [buckets, from_samples] = buckets_and_samples(profile, width);
  CHECK(buckets.size() > 1000);
  CHECK(buckets == from_samples);
}

TEST_CASE("sample_timeline holds nothing of a failed commit's samples, whatever width they made") {
  const auto path = fresh_path("timeline_rolled_back");
  const std::uint64_t stack[] = {0x200, 0x100};
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    for (int i = 0; i < 100; ++i) writer.add_sample(thread, i * 1000, 10, writer.add_stack(stack));
    writer.commit();
    // The lost batch: samples far later (the width grows a thousandfold) and in a window of their own.
    for (int i = 0; i < 100; ++i) writer.add_sample(thread, 1'000'000'000 + i * 1000, 7, writer.add_stack(stack), 3);
    fail_next_commit(writer, path);
    for (int i = 0; i < 100; ++i) writer.add_sample(thread, 100'000 + i * 1000, 20, writer.add_stack(stack));
    writer.commit();
  }
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample") == 200);
  CHECK(count(profile, "SELECT COUNT(*) FROM sample_timeline WHERE window = 3") == 0);
  CHECK(count(profile, "SELECT SUM(samples) FROM sample_timeline") == 200);
  CHECK(count(profile, "SELECT SUM(weight_ns) FROM sample_timeline") == 100 * 10 + 100 * 20);
  // The rolled-back samples' span may leave the buckets coarser, never wrong: every committed
  // sample is in its bucket.
  const auto width = count(profile, "SELECT MAX(width_ns) FROM sample_timeline");
  CHECK(count(profile, "SELECT COUNT(DISTINCT width_ns) FROM sample_timeline") == 1);
  const auto [buckets, from_samples] = buckets_and_samples(profile, width);
  CHECK(buckets == from_samples);
}

TEST_CASE("the HTML timeline drawn from the time buckets is the samples' within 1/32 of a bin") {
  const auto path = fresh_path("timeline_html");
  const std::uint64_t stack[] = {0x300, 0x200, 0x100};
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 1'000'000'000});
    std::vector<std::int64_t> threads;
    for (int i = 0; i < 4; ++i) threads.push_back(writer.add_thread(process, {i, i, 10 + i, "", 0}));
    // Threads busy in bursts over 10 s, at random times, in windows 0-2.
    std::mt19937_64 random{11};
    for (int i = 0; i < 40000; ++i) {
      const auto thread = static_cast<std::size_t>(i % 4);
      const auto time_ns = 1'000'000'000 + static_cast<std::int64_t>(random() % 10'000'000'000ull);
      if ((time_ns / 700'000'000) % 4 == static_cast<std::int64_t>(thread)) continue;  // idle a while
      writer.add_sample(threads[thread], time_ns, 500'000 + static_cast<std::int64_t>(random() % 1'000'000),
                        writer.add_stack(stack), time_ns / 4'000'000'000);
      if (i % 4096 == 4095) writer.commit();
    }
    writer.end_process(process, 11'000'000'000);
  }
  auto profile = db::open_profile(path);
  const std::int64_t origin_ns = 1'000'000'000, span_ns = 10'000'000'000;
  const int bins = 255;
  const auto width = count(profile, "SELECT MAX(width_ns) FROM sample_timeline");
  CHECK(static_cast<double>(width) / 2 <= static_cast<double>(span_ns) / bins / 32);
  for (const auto& range : {db::window_range{}, db::window_range::only(1, 1), db::window_range::only(0, 1)}) {
    CAPTURE(range.first);
    CAPTURE(range.all);
    const auto drawn = db::bin_cpu_time(profile, range, origin_ns, span_ns, bins);
    const auto sampled = db::bin_cpu_time(profile, range, origin_ns, span_ns, bins, true);
    CHECK(drawn.from_buckets);
    CHECK_FALSE(sampled.from_buckets);
    REQUIRE(drawn.weight_ns.size() == sampled.weight_ns.size());
    // A bin may differ from the samples' by the weight of the samples within half a bucket of its
    // edges (drawn in the neighbouring bin), no more; each thread's whole weight is the same.
    std::map<std::int64_t, std::vector<std::int64_t>> near_edges;
    auto samples = profile.prepare(
        "SELECT thread, time_ns, weight_ns FROM sample WHERE " +
        (range.all ? std::string{"1"} : fmt::format("window BETWEEN {} AND {}", range.first, range.last)));
    while (samples.step()) {
      auto& near = near_edges[samples.integer(0)];
      near.resize(bins);
      const double position = static_cast<double>(samples.integer(1) - origin_ns) * bins / span_ns;
      const auto bin = std::min(bins - 1, static_cast<int>(position));
      const double to_edge = std::min(position - bin, bin + 1 - position) * span_ns / bins;
      if (to_edge <= static_cast<double>(width) / 2) {
        near[static_cast<std::size_t>(bin)] += samples.integer(2);
        if (position - bin < 0.5 && bin > 0) near[static_cast<std::size_t>(bin - 1)] += samples.integer(2);
        if (position - bin >= 0.5 && bin + 1 < bins) near[static_cast<std::size_t>(bin + 1)] += samples.integer(2);
      }
    }
    std::int64_t moved_ns = 0, whole_ns = 0;
    for (const auto& [thread, weights] : sampled.weight_ns) {
      CAPTURE(thread);
      const auto& from_buckets = drawn.weight_ns.at(thread);
      CHECK(std::accumulate(weights.begin(), weights.end(), std::int64_t{0}) ==
            std::accumulate(from_buckets.begin(), from_buckets.end(), std::int64_t{0}));
      for (std::size_t bin = 0; bin < weights.size(); ++bin) {
        CHECK(std::abs(weights[bin] - from_buckets[bin]) <= near_edges[thread][bin]);
        moved_ns += std::abs(weights[bin] - from_buckets[bin]);
        whole_ns += weights[bin];
      }
    }
    CHECK(moved_ns < whole_ns / 10);  // a few percent of the weight drawn a bin off, at most
  }
  // The page reads no sample: without the sample rows it is the same page.
  std::ostringstream page;
  db::write_html(profile, page, {}, "kairos test");
  CHECK(page.str().find("% CPU</title>") != std::string::npos);
  const auto copy = fresh_path("timeline_html_no_samples");
  std::filesystem::copy_file(path, copy);
  {
    db::connection writable{copy, db::connection::mode::read_write};
    writable.execute("DELETE FROM sample");
  }
  auto without_samples = db::open_profile(copy);
  std::ostringstream same_page;
  db::write_html(without_samples, same_page, {}, "kairos test");
  CHECK(same_page.str() == page.str());
}

TEST_CASE("each window's sample count is its rows', real-time samples counted as added, a failed commit's not") {
  const auto path = fresh_path("window_counts");
  const std::uint64_t stack[] = {0x200, 0x100};
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    for (std::int64_t window = 1; window <= 3; ++window)
      writer.add_window({window, "realtime:0:1", "realtime", 0, 1, 0, 1, window * 100, window * 100 + 99});
    auto add = [&](int count, std::int64_t window) {
      for (int i = 0; i < count; ++i) {
        writer.add_sample(thread, window * 100 + i, 1, writer.add_stack(stack), window);
        writer.add_realtime_sample(thread, window * 100 + i, 1, writer.add_stack(stack), window);
        writer.add_realtime_sample(thread, window * 100 + i, 1, -1, window);
      }
    };
    add(10, 1);
    writer.commit();
    add(20, 2);  // lost with its commit
    fail_next_commit(writer, path);
    for (std::int64_t window = 1; window <= 3; ++window)  // the failed commit lost them too
      writer.add_window({window, "realtime:0:1", "realtime", 0, 1, 0, 1, window * 100, window * 100 + 99});
    add(5, 1);
    add(7, 3);
    writer.count_window_rows();  // uncommitted rows counted with the committed
    writer.commit();
  }
  auto profile = db::open_profile(path);
  CHECK(count(profile, "SELECT COUNT(*) FROM realtime_sample") == 2 * (10 + 5 + 7));
  auto windows = profile.prepare(
      "SELECT ordinal, samples, (SELECT COUNT(*) FROM sample WHERE window = ordinal) + "
      "(SELECT COUNT(*) FROM realtime_sample WHERE window = ordinal) FROM window ORDER BY ordinal");
  std::vector<std::array<std::int64_t, 3>> rows;
  while (windows.step()) rows.push_back({windows.integer(0), windows.integer(1), windows.integer(2)});
  CHECK(rows == std::vector<std::array<std::int64_t, 3>>{{1, 45, 45}, {2, 0, 0}, {3, 21, 21}});
}

TEST_CASE("a profile its program still writes is named as locked, not as foreign") {
  // The runtime's writer holds the lock until its program ends (locking_mode EXCLUSIVE); a reader
  // waits SQLite's 5 s, then is told why.
  const auto path = fresh_path("locked");
  db::profile_writer writer{path, fake_symbols};
  writer.database().execute("PRAGMA main.locking_mode = EXCLUSIVE");
  const auto process = writer.add_process({1, 0, std::nullopt, "h", "c", 0});
  const auto thread = writer.add_thread(process, {0, 0, 1, "", 0});
  const std::uint64_t stack[] = {0x100};
  writer.add_sample(thread, 1, 1, writer.add_stack(stack));
  writer.commit();
  CHECK_THROWS_WITH(db::open_profile(path), doctest::Contains("is locked by the program writing it"));
}

TEST_CASE("bad paths and foreign files are refused by name") {
  CHECK_THROWS_WITH(db::profile_writer("/nonexistent-directory/p.db", fake_symbols),
                    doctest::Contains("/nonexistent-directory/p.db"));
  const auto existing = write_known_profile("exists");
  CHECK_THROWS_WITH(db::profile_writer(existing, fake_symbols), doctest::Contains("already exists"));
  const auto foreign = fresh_path("foreign");
  {
    db::connection other{foreign, db::connection::mode::create};
    other.execute("CREATE TABLE t (x)");
  }
  CHECK_THROWS_WITH(db::open_profile(foreign), doctest::Contains("not a kairos profile"));
  CHECK_THROWS_WITH(db::open_profile(fresh_path("missing")), doctest::Contains("missing.db"));
}

TEST_CASE("an MPI rank's launch and calls are stored, and its text report weighs communication and waiting") {
  const auto path = fresh_path("mpi");
  {
    db::profile_writer writer{path, fake_symbols};
    db::process_info rank;
    rank.pid = 7;
    rank.hostname = "node1";
    rank.command = "app";
    rank.start_ns = 0;
    rank.rank = 0;
    rank.size = 2;
    rank.launch_id = "openmpi-1234";
    const auto process = writer.add_process(rank);
    writer.end_process(process, 1'000'000'000);
    const auto thread = writer.add_thread(process, {0, 0, 7, "main", 0});
    writer.add_mpi_call(thread, "MPI_Send", 100, 100'000'100, 4000, 1);
    writer.add_mpi_call(thread, "MPI_Barrier", 200'000'000, 500'000'000, std::nullopt, std::nullopt);
    writer.set_process_rank(process, 1, 4);  // MPI_Init's answer replaces the launcher's
    writer.commit();
  }
  auto profile = db::open_profile(path);
  auto process = profile.prepare("SELECT rank, size, launch_id, hostname FROM processes");
  REQUIRE(process.step());
  CHECK(process.integer(0) == 1);
  CHECK(process.integer(1) == 4);
  CHECK(process.text(2) == "openmpi-1234");
  CHECK(process.text(3) == "node1");
  auto send = profile.prepare("SELECT duration_ns, bytes, peer FROM mpi_calls WHERE name = 'MPI_Send'");
  REQUIRE(send.step());
  CHECK(send.integer(0) == 100'000'000);
  CHECK(send.integer(1) == 4000);
  CHECK(send.integer(2) == 1);
  auto barrier = profile.prepare("SELECT bytes IS NULL AND peer IS NULL FROM mpi_calls WHERE name = 'MPI_Barrier'");
  REQUIRE(barrier.step());
  CHECK(barrier.integer(0) == 1);
  std::ostringstream text;
  db::write_text(profile, text, {});
  CHECK(text.str().find("MPI, rank 1 of 4 (launch openmpi-1234): 2 calls, 0.400 s in MPI of 1.000 s elapsed "
                        "(40.0%): communication 0.100 s (10.0%), waiting 0.300 s (30.0%)") != std::string::npos);
}

TEST_CASE("a causal experiment is stored with its progress points, a latency point's visits in delta") {
  const auto path = fresh_path("causal_writer");
  std::int64_t id = 0;
  {
    db::profile_writer writer{path, fake_symbols};
    writer.add_process({1, 0, std::nullopt, "h", "c", 0});
    const db::causal_progress_info progress[] = {
        {.name = "requests", .kind = "throughput", .delta = 40},
        {.name = "query", .kind = "latency", .arrivals = 12, .departures = 11, .difference = 3}};
    id = writer.add_causal_experiment({.scope = "line",
                                       .selected = "app.cpp:42",
                                       .speedup = 0.25,
                                       .start_ns = 1'000,
                                       .duration_ns = 500'000'000,
                                       .delay_ns = 20'000'000,
                                       .selected_samples = 77,
                                       .window = 0},
                                      progress);
    writer.add_causal_samples("line", "app.cpp:42", 300);
    writer.add_causal_samples("line", "app.cpp:43", 5);
  }
  auto profile = db::open_profile(path);
  auto experiment = profile.prepare(
      "SELECT id, process, scope, selected, speedup, start_ns, duration_ns, delay_ns, selected_samples, window "
      "FROM causal_experiment");
  REQUIRE(experiment.step());
  CHECK(experiment.integer(0) == id);
  CHECK(experiment.integer(1) == 1);
  CHECK(experiment.text(2) == "line");
  CHECK(experiment.text(3) == "app.cpp:42");
  CHECK(experiment.real(4) == 0.25);
  CHECK(experiment.integer(5) == 1'000);
  CHECK(experiment.integer(6) == 500'000'000);
  CHECK(experiment.integer(7) == 20'000'000);
  CHECK(experiment.integer(8) == 77);
  CHECK(experiment.integer(9) == 0);
  auto throughput = profile.prepare(
      "SELECT delta, arrivals IS NULL AND departures IS NULL AND difference IS NULL FROM causal_progress "
      "WHERE name = 'requests' AND kind = 'throughput' AND experiment = ?");
  throughput.bind(1, id);
  REQUIRE(throughput.step());
  CHECK(throughput.integer(0) == 40);
  CHECK(throughput.integer(1) == 1);
  auto latency = profile.prepare(
      "SELECT delta, arrivals, departures, difference FROM causal_progress WHERE name = 'query' AND kind = 'latency'");
  REQUIRE(latency.step());
  CHECK(latency.integer(0) == 12);
  CHECK(latency.integer(1) == 12);
  CHECK(latency.integer(2) == 11);
  CHECK(latency.integer(3) == 3);
  CHECK(count(profile, "SELECT SUM(count) FROM causal_sample WHERE scope = 'line'") == 305);
}

TEST_CASE("the outputs' function weights are the top_functions_by_thread view's, windows and recursion included") {
  // The text report, the summary and the HTML page weigh functions in C++; users query the view.
  // A profile of deep, recursive and shared stacks over three threads and three windows.
  const auto path = fresh_path("weights");
  {
    db::profile_writer writer{path, fake_symbols};
    const auto process = writer.add_process({7, 1, std::nullopt, "host", "app", 0});
    std::vector<std::int64_t> threads;
    for (int i = 0; i < 3; ++i) threads.push_back(writer.add_thread(process, {i, i, 100 + i, "", 0}));
    std::uint64_t state = 12345;
    auto next = [&state](std::uint64_t bound) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return (state >> 33) % bound;
    };
    for (int i = 0; i < 3000; ++i) {
      std::vector<std::uint64_t> stack;  // leaf first, main at the root
      const auto depth = 1 + next(12);
      for (std::uint64_t d = 0; d < depth; ++d) stack.push_back(0x100 * (1 + next(4)));
      stack.push_back(0x100);
      writer.add_sample(threads[next(3)], i * 1'000, static_cast<std::int64_t>(1 + next(1000)), writer.add_stack(stack),
                        static_cast<std::int32_t>(next(3)));
    }
    writer.commit();
  }
  auto profile = db::open_profile(path);
  using weights = std::map<std::pair<std::int64_t, std::string>, std::pair<std::int64_t, std::int64_t>>;
  auto rows_of = [](const nlohmann::json& functions, std::int64_t key, weights& into) {
    for (const auto& row : functions)
      into[{key, row["name"].get<std::string>()}] = {row["self_ns"].get<std::int64_t>(),
                                                     row["total_ns"].get<std::int64_t>()};
  };
  db::text_options in_two_windows;
  in_two_windows.windows = db::window_range::only(1, 2);
  for (const auto& [options, filter] : {std::pair{db::text_options{}, std::string{}},
                                        std::pair{in_two_windows, std::string{" WHERE window BETWEEN 1 AND 2"}}}) {
    weights expected;  // key -1: all threads; else the thread's sequent id
    auto overall =
        profile.prepare("SELECT name, SUM(self), SUM(total) FROM top_functions_by_thread" + filter + " GROUP BY name");
    while (overall.step()) expected[{-1, std::string{overall.text(0)}}] = {overall.integer(1), overall.integer(2)};
    auto by_thread = profile.prepare(
        "SELECT thread.sequent_id, weights.name, SUM(weights.self), SUM(weights.total) FROM top_functions_by_thread AS "
        "weights "
        "JOIN thread ON thread.id = weights.thread" +
        filter + " GROUP BY thread.sequent_id, weights.name");
    while (by_thread.step())
      expected[{by_thread.integer(0), std::string{by_thread.text(1)}}] = {by_thread.integer(2), by_thread.integer(3)};
    std::ostringstream out;
    db::write_summary_json(profile, out, options);
    const auto summary = nlohmann::json::parse(out.str());
    weights found;
    rows_of(summary["top_functions"], -1, found);
    for (const auto& thread : summary["threads"])
      rows_of(thread["top_functions"], thread["sequent_id"].get<std::int64_t>(), found);
    CHECK(expected.size() == 16);  // four functions, overall and on each of three threads
    CHECK(found == expected);
  }
}
