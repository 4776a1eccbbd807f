// The causal profile's analysis and files, on synthetic experiments whose answer is known: each
// location's period at each line speedup is set, so the program speedup it implies is too.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database.hpp>
#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos_test_skip.hpp>

namespace db = kairos::database;

namespace {

std::string fresh_path(const std::string& name) {
  const auto path = std::filesystem::current_path() / "causal_tests" / (name + ".db");
  std::filesystem::create_directories(path.parent_path());
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path.string() + suffix);
  return path.string();
}

constexpr double speedups[] = {0.0, 0.25, 0.5, 0.75, 1.0};
constexpr int repeats = 4;  // experiments per (location, speedup)
constexpr std::int64_t visits = 200;

// A location whose speedup s makes the program's time per visit (1 - slope s) ms; `noise` spreads
// each experiment's duration by up to +-noise (alternating, so the mean stays on the line).
struct synthetic_location {
  std::string selected;
  double slope = 0;
  double noise = 0;
  bool baseline = true;  // experiments at 0%
};

// Every experiment of `locations` with one throughput point "done"; the profile's path.
// `core_share_permille`: the runtime's causal.core_share_permille, if any.
std::string write_experiments(const std::string& name, const std::vector<synthetic_location>& locations,
                              std::string_view core_share_permille = {}) {
  const auto path = fresh_path(name);
  db::profile_writer writer{path, {}};
  writer.add_process({1, 0, std::nullopt, "host", "app", 1'000});
  if (!core_share_permille.empty())
    writer.set_metadata(db::metadata_key::causal_core_share_permille, core_share_permille);
  std::int64_t start_ns = 2'000;
  for (const auto& location : locations)
    for (const double speedup : speedups) {
      if (speedup == 0 && !location.baseline) continue;
      for (int repeat = 0; repeat < repeats; ++repeat) {
        const double sign = repeat % 2 == 0 ? 1 : -1;
        const double period_ns = 1e6 * (1 - location.slope * speedup) * (1 + sign * location.noise);
        const auto duration_ns = static_cast<std::int64_t>(std::llround(period_ns * visits));
        const db::causal_progress_info done[] = {{.name = "done", .kind = "throughput", .delta = visits}};
        writer.add_causal_experiment({.scope = "line",
                                      .selected = location.selected,
                                      .speedup = speedup,
                                      .start_ns = start_ns,
                                      .duration_ns = duration_ns,
                                      .delay_ns = 1'000,
                                      .selected_samples = 10,
                                      .window = 0},
                                     done);
        start_ns += duration_ns + 1'000;
      }
    }
  return path;
}

// Keep the summary: the location is a reference into it.
const db::causal_location& find(const db::causal_summary& summary, const std::string& selected) {
  for (const auto& location : summary.locations)
    if (location.selected == selected) return location;
  FAIL("no location " << selected);
  throw;
}

std::string text_report(db::connection& profile) {
  std::ostringstream text;
  db::write_text(profile, text);
  return text.str();
}

}  // namespace

TEST_CASE("a location whose period shrinks linearly with its speedup gives the line it implies") {
  auto profile = db::open_profile(write_experiments("linear", {{"app.cpp:10", 0.6}}));
  const auto summary = db::analyze_causal(profile);
  CHECK(summary.experiments == 5 * repeats);
  CHECK(summary.progress_points == std::vector<std::string>{"done (throughput)"});
  const auto& location = find(summary, "app.cpp:10");
  REQUIRE(location.curves.size() == 1);
  const auto& curve = location.curves.front();
  REQUIRE(curve.estimates.size() == 5);
  for (std::size_t index = 0; index < 5; ++index) {
    CHECK(curve.estimates[index].line_speedup == doctest::Approx(speedups[index]));
    CHECK(curve.estimates[index].program_speedup == doctest::Approx(0.6 * speedups[index]).epsilon(1e-6));
    CHECK(curve.estimates[index].experiments == repeats);
    CHECK(curve.estimates[index].visits == repeats * visits);
  }
  // Area under 0.6 s from 0 to 1, over a width of 1.
  CHECK(location.impact == doctest::Approx(0.3));
}

TEST_CASE("a location with no effect reads about zero, inside its interval") {
  auto profile = db::open_profile(write_experiments("no_effect", {{"app.cpp:20", 0.0, 0.03}}));
  const auto summary = db::analyze_causal(profile);
  const auto& location = find(summary, "app.cpp:20");
  for (const auto& point : location.curves.front().estimates) {
    CHECK(std::abs(point.program_speedup) < 0.01);
    CHECK(point.interval > std::abs(point.program_speedup));
  }
  CHECK(text_report(profile).find("speeding up app.cpp:20 by 100% has no effect distinguishable from noise") !=
        std::string::npos);
}

TEST_CASE("locations are ranked by impact, the steepest first") {
  auto profile = db::open_profile(write_experiments(
      "ranking", {{"flat.cpp:1", 0.0, 0.01}, {"gentle.cpp:2", 0.2, 0.01}, {"steep.cpp:3", 0.6, 0.01}}));
  const auto summary = db::analyze_causal(profile);
  REQUIRE(summary.locations.size() == 3);
  CHECK(summary.locations[0].selected == "steep.cpp:3");
  CHECK(summary.locations[1].selected == "gentle.cpp:2");
  CHECK(summary.locations[2].selected == "flat.cpp:1");
  CHECK(summary.locations[0].impact > summary.locations[1].impact);
}

TEST_CASE("noisier experiments give wider intervals, which still hold the true speedup") {
  auto profile = db::open_profile(write_experiments("noise", {{"quiet.cpp:1", 0.4, 0.01}, {"noisy.cpp:2", 0.4, 0.10}}));
  const auto summary = db::analyze_causal(profile);
  const auto& quiet = find(summary, "quiet.cpp:1").curves.front().estimates;
  const auto& noisy = find(summary, "noisy.cpp:2").curves.front().estimates;
  REQUIRE(quiet.size() == noisy.size());
  for (std::size_t index = 1; index < quiet.size(); ++index) {
    // Both share the pooled baseline (whose spread the noisy location's 0% experiments widen), so
    // their intervals differ by their own cells' spread only.
    CHECK(noisy[index].interval > 2 * quiet[index].interval);
    CHECK(std::abs(noisy[index].program_speedup - 0.4 * speedups[index]) <= noisy[index].interval);
  }
}

TEST_CASE("a single experiment at a speedup gives an estimate without an interval") {
  const auto path = fresh_path("single");
  {
    db::profile_writer writer{path, {}};
    writer.add_process({1, 0, std::nullopt, "host", "app", 0});
    const db::causal_progress_info done[] = {{.name = "done", .kind = "throughput", .delta = 100}};
    for (const double speedup : {0.0, 0.5})
      writer.add_causal_experiment({.scope = "line",
                                    .selected = "one.cpp:1",
                                    .speedup = speedup,
                                    .duration_ns = static_cast<std::int64_t>(1e8 * (1 - speedup / 2))},
                                   done);
  }
  auto profile = db::open_profile(path);
  const auto summary = db::analyze_causal(profile);
  const auto& estimates = find(summary, "one.cpp:1").curves.front().estimates;
  REQUIRE(estimates.size() == 2);
  CHECK(estimates[1].program_speedup == doctest::Approx(0.25));
  CHECK(std::isnan(estimates[1].interval));
  CHECK(text_report(profile).find("one experiment at that speedup gives no interval") != std::string::npos);
}

TEST_CASE("every location is measured against every 0% experiment together, its own 0% cell or none") {
  auto profile =
      db::open_profile(write_experiments("pooled", {{"base.cpp:1", 0.0}, {"orphan.cpp:2", 0.5, 0.0, false}}));
  const auto summary = db::analyze_causal(profile);
  const auto& curve = find(summary, "orphan.cpp:2").curves.front();
  REQUIRE(curve.estimates.size() == 4);
  CHECK(curve.estimates.front().line_speedup == doctest::Approx(0.25));
  CHECK(curve.estimates.back().program_speedup == doctest::Approx(0.5));
  CHECK(text_report(profile).find("against every 0% experiment together") != std::string::npos);
}

TEST_CASE("cells with fewer than 5 visits are left out") {
  const auto path = fresh_path("few_visits");
  {
    db::profile_writer writer{path, {}};
    writer.add_process({1, 0, std::nullopt, "host", "app", 0});
    for (const auto& [speedup, count] : std::vector<std::pair<double, std::int64_t>>{{0.0, 50}, {0.5, 4}, {1.0, 50}}) {
      const db::causal_progress_info done[] = {{.name = "done", .kind = "throughput", .delta = count}};
      writer.add_causal_experiment(
          {.scope = "line", .selected = "rare.cpp:1", .speedup = speedup, .duration_ns = 50'000'000}, done);
    }
  }
  auto profile = db::open_profile(path);
  const auto summary = db::analyze_causal(profile);
  const auto& estimates = find(summary, "rare.cpp:1").curves.front().estimates;
  REQUIRE(estimates.size() == 2);
  CHECK(estimates[0].line_speedup == 0.0);
  CHECK(estimates[1].line_speedup == 1.0);
}

TEST_CASE("a latency point's speedup is its mean latency's by Little's law, positive when it shrinks") {
  const auto path = fresh_path("latency");
  {
    db::profile_writer writer{path, {}};
    writer.add_process({1, 0, std::nullopt, "host", "app", 0});
    // 100 arrivals in 100 ms; in flight 8, 6, 4: mean latency 8, 6, 4 ms.
    for (const auto& [speedup, in_flight] : std::vector<std::pair<double, std::int64_t>>{{0.0, 8}, {0.5, 6}, {1.0, 4}})
      for (int repeat = 0; repeat < 3; ++repeat) {
        const db::causal_progress_info query[] = {
            {.name = "query", .kind = "latency", .arrivals = 100, .departures = 100, .difference = in_flight}};
        writer.add_causal_experiment(
            {.scope = "function", .selected = "parse", .speedup = speedup, .duration_ns = 100'000'000}, query);
      }
  }
  auto profile = db::open_profile(path);
  const auto summary = db::analyze_causal(profile);
  const auto& curve = find(summary, "parse").curves.front();
  CHECK(curve.kind == "latency");
  REQUIRE(curve.estimates.size() == 3);
  CHECK(curve.estimates[1].program_speedup == doctest::Approx(0.25));
  CHECK(curve.estimates[2].program_speedup == doctest::Approx(0.5));
  CHECK(text_report(profile).find(
            "speeding up parse by 100% would shorten query's latency by 50.0% \u00b1 0.0 (query)") !=
        std::string::npos);
}

TEST_CASE("the text report's causal section gives the curve and what it predicts in words") {
  auto profile = db::open_profile(write_experiments("text", {{"hot.cpp:7", 0.6}, {"cold.cpp:9", 0.0}}));
  const auto text = text_report(profile);
  CHECK(text.find("causal profile: 40 experiments; progress points: done (throughput)") != std::string::npos);
  CHECK(text.find("  1. hot.cpp:7 (line, 20 experiments): impact +30.0%") != std::string::npos);
  CHECK(text.find("done (throughput): 0% -> +0.0% \u00b1 0.0, 25% -> +15.0% \u00b1 0.0, 50% -> +30.0% \u00b1 0.0") !=
        std::string::npos);
  CHECK(text.find("speeding up hot.cpp:7 by 100% would speed the program up by 60.0% \u00b1 0.0 (done)") !=
        std::string::npos);
  CHECK(text.find("  2. cold.cpp:9") != std::string::npos);
  CHECK(text.find("causal profile") < text.find("no samples were recorded"));
}

TEST_CASE("a profile without causal experiments has no causal section and no coz file") {
  const auto path = fresh_path("none");
  {
    db::profile_writer writer{path, {}};
    writer.add_process({1, 0, std::nullopt, "host", "app", 0});
  }
  auto profile = db::open_profile(path);
  CHECK(text_report(profile).find("causal profile") == std::string::npos);
  std::ostringstream ignored;
  const auto expected = path + " has no causal experiments: run the program under kairos-causal";
  CHECK_THROWS_WITH(db::write_coz_profile(profile, ignored), doctest::Contains(expected.c_str()));
  CHECK_THROWS_WITH(db::write_causal_svg(profile, ignored), doctest::Contains(expected.c_str()));
  std::ostringstream out, errors;
  CHECK(db::run_report({.databases = {path}, .format = "coz"}, out, errors) == 1);
  CHECK(errors.str() == "[kairos] " + expected + "\n");
}

TEST_CASE("profile.coz parses back to the database's numbers, in coz's records") {
  const auto path = fresh_path("coz");
  {
    db::profile_writer writer{path, {}};
    const auto process = writer.add_process({1, 0, std::nullopt, "host", "app", 1'000});
    const db::causal_progress_info first[] = {
        {.name = "done", .kind = "throughput", .delta = 40},
        {.name = "query", .kind = "latency", .arrivals = 12, .departures = 11, .difference = 3}};
    writer.add_causal_experiment({.scope = "line",
                                  .selected = "app.cpp:42",
                                  .speedup = 0.25,
                                  .start_ns = 2'000,
                                  .duration_ns = 500'000,
                                  .delay_ns = 700,
                                  .selected_samples = 77},
                                 first);
    const db::causal_progress_info second[] = {{.name = "done", .kind = "throughput", .delta = 9}};
    writer.add_causal_experiment({.scope = "line",
                                  .selected = "app.cpp:43",
                                  .speedup = 0.0,
                                  .start_ns = 600'000,
                                  .duration_ns = 300'000,
                                  .delay_ns = 0,
                                  .selected_samples = 5},
                                 second);
    writer.add_causal_samples("line", "app.cpp:42", 300);
    writer.end_process(process, 1'001'000);
  }
  auto profile = db::open_profile(path);
  std::ostringstream file;
  db::write_coz_profile(profile, file);
  // Each record: its type, then key=value fields, tab-separated (as coz's viewer splits them).
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> records;
  std::istringstream lines{file.str()};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields{line};
    std::string type, field;
    std::getline(fields, type, '\t');
    std::map<std::string, std::string> values;
    while (std::getline(fields, field, '\t'))
      values[field.substr(0, field.find('='))] = field.substr(field.find('=') + 1);
    records.emplace_back(type, values);
  }
  using fields = std::map<std::string, std::string>;
  const std::vector<std::pair<std::string, fields>> expected{
      {"startup", {{"time", "1000"}}},
      {"experiment",
       {{"selected", "app.cpp:42"}, {"speedup", "0.25"}, {"duration", "500000"}, {"selected-samples", "77"}}},
      {"throughput-point", {{"name", "done"}, {"delta", "40"}}},
      {"latency-point", {{"name", "query"}, {"arrivals", "12"}, {"departures", "11"}, {"difference", "3"}}},
      {"experiment", {{"selected", "app.cpp:43"}, {"speedup", "0"}, {"duration", "300000"}, {"selected-samples", "5"}}},
      {"throughput-point", {{"name", "done"}, {"delta", "9"}}},
      {"runtime", {{"time", "1000000"}}},
      {"samples", {{"location", "app.cpp:42"}, {"count", "300"}}}};
  CHECK(records == expected);
}

TEST_CASE("the SVG is well-formed XML with one chart per location, highest impact first") {
  const auto path = write_experiments("svg", {{"a.cpp:1", 0.1, 0.02}, {"b <&> c.cpp:2", 0.5, 0.02}, {"c.cpp:3", 0.3}});
  auto profile = db::open_profile(path);
  const auto svg_path = path + ".svg";
  {
    std::ofstream svg{svg_path};
    db::write_causal_svg(profile, svg, 2);
  }
  // An XML parser other than the writer's: Python's, where this machine has one.
  const auto script = fmt::format(
      "python3 -c \"import xml.etree.ElementTree as E; n='{{http://www.w3.org/2000/svg}}'; "
      "r=E.parse('{}').getroot(); c=[g for g in r.iter(n+'g') if g.get('class')=='chart']; "
      "print(len(c)); [print(g.find(n+'text').text) for g in c]; "
      "print(sum(1 for g in c for _ in g.iter(n+'circle')))\" 2>&1",
      svg_path);
  if (std::system("python3 -c 'import xml.etree.ElementTree' 2>/dev/null") != 0)
    return kairos_test::skip("python3 with xml.etree is needed to parse the SVG");
  std::string output;
  if (FILE* pipe = ::popen(script.c_str(), "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
    ::pclose(pipe);
  }
  // Two of three locations shown; each chart's 5 points of its one curve.
  CHECK(output == "2\n1. b <&> c.cpp:2\n2. c.cpp:3\n10\n");
}

TEST_CASE("with time windows, the causal outputs keep only their experiments") {
  const auto path = fresh_path("windows");
  {
    db::profile_writer writer{path, {}};
    writer.add_process({1, 0, std::nullopt, "host", "app", 0});
    const db::causal_progress_info done[] = {{.name = "done", .kind = "throughput", .delta = 100}};
    for (const std::int64_t window : {1, 2})
      for (const double speedup : {0.0, 0.5})
        writer.add_causal_experiment({.scope = "line",
                                      .selected = fmt::format("window{}.cpp:1", window),
                                      .speedup = speedup,
                                      .duration_ns = 1'000'000,
                                      .window = window},
                                     done);
  }
  auto profile = db::open_profile(path);
  const auto first = db::window_range::only(1, 1);
  std::ostringstream coz;
  db::write_coz_profile(profile, coz, first);
  CHECK(coz.str().find("selected=window1.cpp:1") != std::string::npos);
  CHECK(coz.str().find("window2") == std::string::npos);
  const auto summary = db::analyze_causal(profile, first);
  CHECK(summary.experiments == 2);
  REQUIRE(summary.locations.size() == 1);
  CHECK(summary.locations.front().selected == "window1.cpp:1");
}

TEST_CASE("the text report says when the program's threads lacked cores, and only then") {
  for (const auto& [permille, share, said] : std::vector<std::tuple<std::string, double, bool>>{
           {"", 1.0, false}, {"990", 0.99, false}, {"812", 0.812, true}}) {
    auto profile = db::open_profile(write_experiments("core_share" + permille, {{"app.cpp:30", 0.5, 0.01}}, permille));
    CHECK(db::analyze_causal(profile).core_share == doctest::Approx(share));
    CHECK((text_report(profile).find("the program's threads had a core 81% of the time they were ready to run") !=
           std::string::npos) == said);
  }
}
