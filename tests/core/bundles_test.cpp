// component_tuple, component_list, auto_tuple/auto_list, composition and shared caches.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>
#include <kairos/scoped.hpp>

namespace {

struct alpha {
  int value = 0;
  void start() { value += 1; }
  void stop() { value += 10; }
  int get() const { return value; }
  static int record() { return 1; }
};
struct beta {
  double get() const { return 2.5; }
  static int record() { return 2; }
};
struct gamma_ {
  static constexpr std::string_view label() { return "gamma"; }
  int starts = 0;
  void start() { ++starts; }
};
struct not_built {
  static constexpr bool available_at_build = false;
  void start() { FAIL("a component unavailable at build must not be called"); }
};
struct specialized_out {};
struct unavailable_here {
  static bool available() { return false; }
  static std::string unavailable_reason() { return "no such device"; }
  void start() { FAIL("a component unavailable here must not be switched on"); }
};

int cache_readings = 0;
struct counting_cache {
  int reading;
  counting_cache() : reading{++cache_readings} {}
};
struct cached_one {
  using cache_type = counting_cache;
  int seen = 0;
  void start(const counting_cache& cache) { seen = cache.reading; }
};
struct cached_two : cached_one {};

}  // namespace

template <>
struct kairos::is_available_at_build<specialized_out> : std::false_type {};

TEST_CASE("component_tuple forwards record and get as tuples in declaration order") {
  kairos::component_tuple<alpha, beta> bundle{"main"};
  CHECK(bundle.label() == "main");
  bundle.start();
  bundle.stop();
  CHECK(bundle.record() == std::tuple{1, 2});
  CHECK(bundle.get() == std::tuple{11, 2.5});
  CHECK(bundle.get<alpha>() == 11);
  CHECK(bundle.laps() == 1);
}

TEST_CASE("laps count completed phases") {
  kairos::component_tuple<alpha> bundle{"laps"};
  for (int lap = 0; lap < 3; ++lap) {
    bundle.start();
    bundle.stop();
  }
  CHECK(bundle.laps() == 3);
  CHECK(bundle.get<alpha>() == 33);
}

TEST_CASE("a bundle given another bundle's type flattens it and removes duplicates") {
  using inner = kairos::component_tuple<beta, alpha>;
  using outer = kairos::component_tuple<alpha, inner, gamma_, kairos::component_list<gamma_>>;
  static_assert(std::is_same_v<outer::component_types, std::tuple<alpha, beta, gamma_>>);
  outer bundle{"flat"};
  bundle.start();
  CHECK(bundle.component<gamma_>().starts == 1);  // once, though named twice
}

TEST_CASE("components unavailable at build are dropped, by member or by trait") {
  using bundle_type = kairos::component_tuple<not_built, alpha, specialized_out>;
  static_assert(std::is_same_v<bundle_type::component_types, std::tuple<alpha>>);
  bundle_type bundle{"filtered"};
  bundle.start();
  CHECK(bundle.get<alpha>() == 1);
}

TEST_CASE("members sharing a cache get one reading per operation") {
  cache_readings = 0;
  kairos::component_tuple<cached_one, alpha, cached_two> bundle{"cached"};
  bundle.start();
  CHECK(cache_readings == 1);
  CHECK(bundle.component<cached_one>().seen == 1);
  CHECK(bundle.component<cached_two>().seen == 1);
  bundle.start();
  CHECK(cache_readings == 2);
  bundle.mark();  // an operation that takes no reading builds no cache
  CHECK(cache_readings == 2);
}

TEST_CASE("a list takes no shared reading for members that are off") {
  cache_readings = 0;
  kairos::component_list<cached_one, alpha> list{"lazy", {"alpha"}};
  list.start();
  list.stop();
  CHECK(cache_readings == 0);
  list.enable<cached_one>();
  list.start();
  CHECK(cache_readings == 1);
  CHECK(list.component<cached_one>().seen == 1);
}

TEST_CASE("component_list switches members by type") {
  kairos::component_list<alpha, gamma_> list{"list"};
  CHECK(list.enabled<alpha>());
  list.disable<alpha>();
  list.start();
  CHECK(list.component<alpha>().value == 0);
  CHECK(list.component<gamma_>().starts == 1);
  CHECK(list.enable<alpha>());
  list.start();
  CHECK(list.component<alpha>().value == 1);
}

TEST_CASE("component_list switches members by name and results of switched-off members are empty") {
  kairos::component_list<alpha, beta, gamma_> list{"named", {"gamma", "beta"}};
  CHECK_FALSE(list.enabled("alpha"));
  CHECK(list.enabled("gamma"));
  list.start();
  const auto [alpha_result, beta_result] = list.get();
  CHECK_FALSE(alpha_result.has_value());
  CHECK(beta_result == 2.5);
  list.disable("gamma");
  list.start();
  CHECK(list.component<gamma_>().starts == 1);
}

TEST_CASE("an unknown component name is an error that lists the known names") {
  kairos::component_list<kairos::wall_clock, kairos::peak_rss> list{"region"};
  try {
    list.enable("peek_rss");
    FAIL("an unknown name was accepted");
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    CHECK(message.find("'peek_rss'") != std::string::npos);
    CHECK(message.find("wall_clock, peak_rss") != std::string::npos);
  }
  CHECK_THROWS_AS((kairos::component_list<alpha>{"ctor", {"nope"}}), std::invalid_argument);
}

TEST_CASE("a component that cannot measure here stays off") {
  kairos::component_list<unavailable_here, alpha> list{"hardware"};
  CHECK_FALSE(list.enabled<unavailable_here>());
  CHECK_FALSE(list.enable("unavailable_here"));
  list.start();  // unavailable_here::start would FAIL
  CHECK(list.component<alpha>().value == 1);
  CHECK(kairos::unavailable_reason_of<unavailable_here>() == "no such device");
}

TEST_CASE("scoped starts a bundle at construction and stops it at destruction") {
  int laps = 0;
  {
    kairos::scoped<kairos::component_tuple<alpha, kairos::wall_clock>> scope{"scope"};
    CHECK(scope.get<alpha>() == 1);
    laps = static_cast<int>(scope.laps());
  }
  CHECK(laps == 0);
  struct observer {
    int* stopped;
    void stop() { ++*stopped; }
  };
  int stopped = 0;
  {
    kairos::scoped<kairos::component_tuple<observer>> scope{"observed"};
    scope.component<observer>().stopped = &stopped;
  }
  CHECK(stopped == 1);
}

TEST_CASE("a scoped component_list starts only its switched-on members") {
  {
    kairos::scoped<kairos::component_list<alpha, gamma_>> scope{"scope", {"gamma"}};
    CHECK(scope.component<gamma_>().starts == 1);
    CHECK(scope.component<alpha>().value == 0);
  }
}
