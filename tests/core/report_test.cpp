// Reports: the text tables and the JSON form.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <kairos/auto_tuple.hpp>
#include <kairos/report.hpp>
#include <kairos/report_at_exit.hpp>
#include <kairos/report_json.hpp>

#include "scripted_clock.hpp"

namespace {
void record_scripted_program() {
  kairos::thread_graphs::instance().clear();
  // main 0..100 { solve 10..40 { step 12..20, step 20..30 }, write 50..55 }
  kairos::testing::scripted_clock::play({0, 10, 12, 20, 20, 30, 40, 50, 55, 100});
  kairos::auto_tuple<kairos::testing::scripted_clock> main_region{"main"};
  {
    kairos::auto_tuple<kairos::testing::scripted_clock> solve{"solve"};
    { kairos::auto_tuple<kairos::testing::scripted_clock> step{"step"}; }
    { kairos::auto_tuple<kairos::testing::scripted_clock> step{"step"}; }
  }
  { kairos::auto_tuple<kairos::testing::scripted_clock> write{"write"}; }
}
}  // namespace

TEST_CASE("the text report matches the golden table") {
  record_scripted_program();
  const std::string golden =
      "scripted_clock [ms]\n"
      "LABEL        COUNT DEPTH          SUM         MEAN          MIN          MAX       STDDEV  % SELF\n"
      "main             1     0      100.000      100.000      100.000      100.000        0.000    65.0\n"
      "  solve          1     1       30.000       30.000       30.000       30.000        0.000    40.0\n"
      "    step         2     2       18.000        9.000        8.000       10.000        1.414   100.0\n"
      "  write          1     1        5.000        5.000        5.000        5.000        0.000   100.0\n"
      "\n";
  CHECK(kairos::format_report(kairos::report()) == golden);
}

TEST_CASE("per-thread tables name their thread") {
  record_scripted_program();
  const auto text = kairos::format_report(kairos::report(), {.per_thread = true});
  CHECK(text.find("thread ") != std::string::npos);
  CHECK(text.find("(tid ") != std::string::npos);
}

TEST_CASE("the JSON report round-trips through the reader") {
  record_scripted_program();
  const auto data = kairos::report();
  const auto json = kairos::to_json(data);
  CHECK(kairos::read_json(nlohmann::json::parse(json.dump())) == data);
}

TEST_CASE("the JSON report has a flat list and a tree with statistics and units") {
  record_scripted_program();
  const auto json = kairos::to_json(kairos::report());
  CHECK(json["kairos_report_version"] == 1);
  const auto& nodes = json["process"]["nodes"];
  REQUIRE(nodes.size() == 4);
  CHECK(nodes[0]["label"] == "main");
  CHECK(nodes[0]["values"][0]["unit"] == "ms");
  CHECK(nodes[0]["values"][0]["sum"] == 100.0);
  const auto& tree = json["process"]["tree"];
  REQUIRE(tree.size() == 1);
  CHECK(tree[0]["children"][0]["label"] == "solve");
  CHECK(tree[0]["children"][0]["children"][0]["values"][0]["count"] == 2);
}

TEST_CASE("write_json writes a file the reader accepts and names a path it cannot write") {
  record_scripted_program();
  const std::string path = "kairos_report_test.json";
  kairos::write_json(path);
  std::ifstream file{path};
  const auto data = kairos::read_json(nlohmann::json::parse(file));
  CHECK(data.process.find("main/solve/step") != nullptr);
  std::remove(path.c_str());
  CHECK_THROWS_WITH(kairos::write_json("/nonexistent-directory/report.json"),
                    doctest::Contains("/nonexistent-directory/report.json"));
}

TEST_CASE("the reader rejects another version by name") {
  CHECK_THROWS_WITH(kairos::read_json(nlohmann::json{{"kairos_report_version", 99}}), doctest::Contains("version 99"));
}

TEST_CASE("report_at_exit in a file without report_json.hpp refuses a JSON path, naming the header") {
  // report_at_exit<> is the text-only one, the only one such a file sees; it registers nothing.
  CHECK_THROWS_WITH_AS(kairos::report_at_exit<>({.json_path = "report.json"}),
                       doctest::Contains("include <kairos/report_json.hpp>"), std::invalid_argument);
}
