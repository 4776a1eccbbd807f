// The best-match rule: exact arguments, else no arguments, else nothing; in declaration order.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <kairos/component_tuple.hpp>
#include <kairos/operations.hpp>

namespace {

std::vector<std::string> calls;

struct takes_int {
  void sample(int value) { calls.push_back("takes_int::sample(" + std::to_string(value) + ")"); }
};
struct takes_nothing {
  void sample() { calls.push_back("takes_nothing::sample()"); }
};
struct has_no_sample {
  void start() { calls.push_back("has_no_sample::start()"); }
};
struct start_needs_int {
  void start(int value) { calls.push_back("start_needs_int::start(" + std::to_string(value) + ")"); }
};
struct both_overloads {
  void mark() { calls.push_back("both_overloads::mark()"); }
  void mark(int) { calls.push_back("both_overloads::mark(int)"); }
};
struct keeps_string {
  std::string seen;
  void store(std::string text) { seen = std::move(text); }
};

}  // namespace

TEST_CASE("a member taking the given arguments is called with them") {
  calls.clear();
  kairos::component_tuple<takes_int> bundle{"exact"};
  bundle.sample(42);
  CHECK(calls == std::vector<std::string>{"takes_int::sample(42)"});
}

TEST_CASE("a member that cannot take the arguments is called without them") {
  calls.clear();
  kairos::component_tuple<takes_nothing> bundle{"fallback"};
  bundle.sample(42);
  CHECK(calls == std::vector<std::string>{"takes_nothing::sample()"});
}

TEST_CASE("a member without the operation is skipped, and one needing arguments is not guessed") {
  calls.clear();
  kairos::component_tuple<has_no_sample, takes_int> bundle{"skip"};
  bundle.sample();  // takes_int::sample(int) cannot be called without an int
  CHECK(calls.empty());
  static_assert(kairos::reach_of<kairos::op::sample, has_no_sample, int>() == kairos::reach::none);
  static_assert(kairos::reach_of<kairos::op::sample, takes_int>() == kairos::reach::none);
}

TEST_CASE("members are called in declaration order") {
  calls.clear();
  kairos::component_tuple<takes_nothing, takes_int, has_no_sample> bundle{"order"};
  bundle.sample(7);
  bundle.start();
  CHECK(calls == std::vector<std::string>{"takes_nothing::sample()", "takes_int::sample(7)", "has_no_sample::start()"});
}

TEST_CASE("start(int) is not called by start() and is called by start(7)") {
  calls.clear();
  kairos::component_tuple<start_needs_int> bundle{"pinned"};
  bundle.start();
  CHECK(calls.empty());
  bundle.start(7);
  CHECK(calls == std::vector<std::string>{"start_needs_int::start(7)"});
}

TEST_CASE("the exact overload wins over the one without arguments") {
  calls.clear();
  kairos::component_tuple<both_overloads> bundle{"overloads"};
  bundle.mark(1);
  bundle.mark();
  CHECK(calls == std::vector<std::string>{"both_overloads::mark(int)", "both_overloads::mark()"});
}

TEST_CASE("every member sees the same arguments, none moved from") {
  struct other_keeper : keeps_string {};
  kairos::component_tuple<keeps_string, other_keeper> two{"two"};
  two.store(std::string(64, 'x'));
  CHECK(two.component<keeps_string>().seen == std::string(64, 'x'));
  CHECK(two.component<other_keeper>().seen == std::string(64, 'x'));
}

namespace {
struct counter {
  int starts = 0;
  int stops = 0;
  constexpr void start() { ++starts; }
  constexpr void stop() { ++stops; }
};
struct inert {};

// The whole dispatch resolves at compile time: a bundle runs in a constant expression.
constexpr int laps_in_constant_expression() {
  kairos::component_tuple<inert, counter> bundle{"constexpr"};
  bundle.start();
  bundle.stop();
  bundle.start();
  bundle.stop();
  return bundle.component<counter>().starts * 100 + bundle.component<counter>().stops * 10 +
         static_cast<int>(bundle.laps());
}
}  // namespace

TEST_CASE("dispatch is decided at compile time and adds no state for absent members") {
  static_assert(laps_in_constant_expression() == 222);
  // A bundle holds its members, a label and a lap count; nothing per absent operation.
  struct empty {};
  CHECK(sizeof(kairos::component_tuple<counter, empty>) <=
        sizeof(counter) + sizeof(std::string_view) + sizeof(std::size_t) + alignof(std::size_t));
}
