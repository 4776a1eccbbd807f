// Storage: per-thread call graphs, statistics, merging, modes.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>
#include <vector>

#include <kairos/auto_tuple.hpp>
#include <kairos/components/page_faults.hpp>
#include <kairos/report.hpp>

#include "scripted_clock.hpp"

namespace {

const kairos::report_value& value_of(const kairos::report_data& data, const kairos::report_tree& tree,
                                     std::string_view path, std::string_view component) {
  const auto* node = tree.find(path);
  REQUIRE_MESSAGE(node != nullptr, path);
  const auto* value = node->value(static_cast<std::uint32_t>(data.component(component)));
  REQUIRE(value != nullptr);
  return *value;
}

void recurse(int depth) {
  kairos::auto_tuple<kairos::testing::scripted_clock> region{"recurse"};
  if (depth > 1) recurse(depth - 1);
}

}  // namespace

TEST_CASE("statistics follow Welford and merge exactly") {
  kairos::statistics all, first, second;
  const double values[] = {2, 4, 4, 4, 5, 5, 7, 9};
  for (int i = 0; i < 8; ++i) {
    all.add(values[i]);
    (i < 3 ? first : second).add(values[i]);
  }
  CHECK(all.count == 8);
  CHECK(all.sum == 40);
  CHECK(all.mean == 5);
  CHECK(all.min == 2);
  CHECK(all.max == 9);
  CHECK(all.stddev() == doctest::Approx(std::sqrt(32.0 / 7.0)));  // sample standard deviation
  first.merge(second);
  CHECK(first.count == all.count);
  CHECK(first.mean == doctest::Approx(all.mean));
  CHECK(first.squared_deviations == doctest::Approx(all.squared_deviations));
}

TEST_CASE("nested regions form a tree with inclusive and self values") {
  kairos::thread_graphs::instance().clear();
  kairos::testing::scripted_clock::play({0, 10, 12, 20, 21, 100});  // start/stop times in ms
  {
    kairos::auto_tuple<kairos::testing::scripted_clock> outer{"outer"};      // 0 .. 100
    { kairos::auto_tuple<kairos::testing::scripted_clock> inner{"inner"}; }  // 10 .. 12
    { kairos::auto_tuple<kairos::testing::scripted_clock> inner{"inner"}; }  // 20 .. 21
  }
  const auto data = kairos::report();
  const auto& outer = value_of(data, data.process, "outer", "scripted_clock");
  const auto& inner = value_of(data, data.process, "outer/inner", "scripted_clock");
  CHECK(outer.stats.count == 1);
  CHECK(outer.stats.sum == 100);
  CHECK(outer.self_sum == 97);
  CHECK(inner.stats.count == 2);
  CHECK(inner.stats.sum == 3);
  CHECK(inner.stats.min == 1);
  CHECK(inner.stats.max == 2);
  CHECK(data.process.find("outer/inner")->depth == 1);
}

TEST_CASE("a recursive function nests one node per level") {
  kairos::thread_graphs::instance().clear();
  kairos::testing::scripted_clock::play(std::vector<double>(8, 0));
  recurse(4);
  const auto data = kairos::report();
  REQUIRE(data.process.nodes.size() == 4);
  CHECK(data.process.find("recurse/recurse/recurse/recurse")->depth == 3);
}

TEST_CASE("a reused stored bundle records what each phase added") {
  kairos::thread_graphs::instance().clear();
  kairos::testing::scripted_clock::play({0, 5, 10, 17});
  kairos::stored<kairos::component_tuple<kairos::testing::scripted_clock>> bundle{"lap"};
  bundle.start();
  bundle.stop();
  bundle.start();
  bundle.stop();
  const auto data = kairos::report();
  const auto& lap = value_of(data, data.process, "lap", "scripted_clock");
  CHECK(lap.stats.count == 2);
  CHECK(lap.stats.min == 5);
  CHECK(lap.stats.max == 7);
  CHECK(bundle.get<kairos::testing::scripted_clock>() == 12);  // the bundle itself accumulates
}

TEST_CASE("flat mode puts every label at depth 0") {
  kairos::thread_graphs::instance().clear();
  kairos::testing::scripted_clock::play(std::vector<double>(6, 0));
  const kairos::storage_options flat{kairos::storage_mode::flat};
  {
    kairos::auto_tuple<kairos::testing::scripted_clock> a{"a", flat};
    kairos::auto_tuple<kairos::testing::scripted_clock> b{"b", flat};
    kairos::auto_tuple<kairos::testing::scripted_clock> a_again{"a", flat};
  }
  const auto data = kairos::report();
  REQUIRE(data.process.nodes.size() == 2);
  CHECK(data.process.find("a")->depth == 0);
  CHECK(data.process.find("b")->depth == 0);
  CHECK(data.process.find("a")->values.at(0).stats.count == 2);
}

TEST_CASE("timeline mode gives every instance its own node") {
  kairos::thread_graphs::instance().clear();
  kairos::set_default_storage_mode(kairos::storage_mode::timeline);
  kairos::testing::scripted_clock::play({0, 1, 2, 4, 5, 8});
  for (int i = 0; i < 3; ++i) kairos::auto_tuple<kairos::testing::scripted_clock> step{"step"};
  kairos::set_default_storage_mode(kairos::storage_mode::tree);
  const auto data = kairos::report();
  REQUIRE(data.process.nodes.size() == 3);
  const auto id = static_cast<std::uint32_t>(data.component("scripted_clock"));
  CHECK(data.process.nodes[0].value(id)->stats.sum == 1);
  CHECK(data.process.nodes[1].value(id)->stats.sum == 2);
  CHECK(data.process.nodes[2].value(id)->stats.sum == 3);
}

TEST_CASE("8 threads x 10,000 regions merge to exact counts, each thread kept alone too") {
  kairos::thread_graphs::instance().clear();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 10'000; ++i) {
        kairos::auto_tuple<kairos::wall_clock> outer{"work"};
        kairos::auto_tuple<kairos::wall_clock> inner{"step"};
      }
    });
  for (auto& thread : threads) thread.join();  // every thread has exited before the merge
  const auto data = kairos::report();
  CHECK(value_of(data, data.process, "work", "wall_clock").stats.count == 80'000);
  CHECK(value_of(data, data.process, "work/step", "wall_clock").stats.count == 80'000);
  int threads_with_work = 0;
  for (const auto& tree : data.threads)
    if (tree.find("work") != nullptr) {
      ++threads_with_work;
      CHECK(value_of(data, tree, "work", "wall_clock").stats.count == 10'000);
    }
  CHECK(threads_with_work == 8);
}

TEST_CASE("a thread that exits before the merge is included") {
  kairos::thread_graphs::instance().clear();
  std::thread{[] { KAIROS_REGION("short_lived"); }}.join();
  const auto data = kairos::report();
  const auto* node = data.process.find("short_lived");
  REQUIRE(node != nullptr);
  CHECK(node->line > 0);
  CHECK(node->file.find("storage_test.cpp") != std::string::npos);
}

TEST_CASE("plain bundles touch no storage") {
  kairos::thread_graphs::instance().clear();
  kairos::component_tuple<kairos::wall_clock> plain{"plain"};
  plain.start();
  plain.stop();
  {
    kairos::scoped<kairos::component_tuple<kairos::wall_clock>> scoped_plain{"scoped"};
  }                                               // stopped here, before the report is taken
  CHECK(plain.get<kairos::wall_clock>() > 0.0);   // both measured...
  CHECK(kairos::report().process.nodes.empty());  // ...and nothing was stored
}

TEST_CASE("a stored component_list records only its switched-on members") {
  kairos::thread_graphs::instance().clear();
  { kairos::auto_list<kairos::wall_clock, kairos::page_faults> list{"listed", {"page_faults"}}; }
  const auto data = kairos::report();
  const auto* node = data.process.find("listed");
  REQUIRE(node != nullptr);
  REQUIRE(node->values.size() == 2);  // minor and major
  CHECK(data.components[node->values[0].component].label == "page_faults");
}
