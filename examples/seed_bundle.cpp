// The bundle example of the design guide kairos learns from: a bundle calls on each member only
// what that member has, chosen at compile time. (The guide declares `spam::start(int)`; with no int
// given it could not be called, so here it is `spam::start()` and the published output holds.)
#include <cstdio>

#include <kairos/component_tuple.hpp>

struct foo {
  void sample() { std::puts("foo::sample()"); }
};

struct bar {
  void sample(int) { std::puts("bar::sample(int)"); }
};

struct spam {
  void start() { std::puts("spam::start()"); }
  void stop() { std::puts("spam::stop()"); }
};

int main() {
  auto bundle = kairos::component_tuple<foo, bar, spam>{"main"};
  std::puts("A");
  bundle.start();  // only spam has start()
  std::puts("B");
  bundle.sample(10);  // foo::sample() (no int taken), then bar::sample(int)
  std::puts("C");
  bundle.sample();  // bar::sample(int) cannot be called without an int
  std::puts("D");
  bundle.stop();
}
