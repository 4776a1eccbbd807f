// describe<Bundle, Args...>(): which members each operation reaches, and with which call.
#include <doctest/doctest.h>

#include <string>

#include <kairos/component_tuple.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/describe.hpp>

namespace {
struct typo {
  void strat() {}  // meant start()
  void stop() {}
};
struct foo {
  void sample() {}
};
struct bar {
  void sample(int) {}
};
}  // namespace

TEST_CASE("a misspelt start is reported as not reached") {
  const auto description = kairos::describe<kairos::component_tuple<typo>>();
  CHECK(description.explain("typo").find("start: not reached\n") != std::string::npos);
  CHECK(description.explain("typo").find("stop: stop()\n") != std::string::npos);
  CHECK(description.reach("typo", "start") == "not reached");
}

TEST_CASE("the description names the call each member receives for given arguments") {
  using bundle = kairos::component_tuple<foo, bar>;
  CHECK(kairos::describe<bundle, int>().reach("foo", "sample") == "sample()");
  CHECK(kairos::describe<bundle, int>().reach("bar", "sample") == "sample(int)");
  CHECK(kairos::describe<bundle>().reach("bar", "sample") == "not reached");
}

TEST_CASE("the description prints as a table, an operation a row, a component a column") {
  const std::string table = kairos::describe<kairos::component_tuple<kairos::wall_clock, kairos::peak_rss>>().table();
  CHECK(table.find("operation   wall_clock") != std::string::npos);
  CHECK(table.find("start       start()") != std::string::npos);
  // peak_rss shares the bundle's getrusage reading.
  CHECK(table.find("start(const rusage_cache)") != std::string::npos);
}
