// Built with kairos_instrument() (-finstrument-functions), run by tests/instrumentation_tests.py
// with and without kairos: a recursion with known call counts, an exception thrown through
// instrumented frames, a recursion as deep as asked, and a few standard-library calls that the
// default filters leave out.
// Usage: kairos_instrumented_program [fib_n (15)] [deep_depth (0)] [loop_seconds (0)] [regions (0)]
// With loop_seconds, it then calls fib(fib_n) again and again for that long, printing each call's
// CLOCK_MONOTONIC start and end in ns ("loop START END"): the time-window tests compare them with
// what was recorded. With regions, it last calls fib(fib_n) that many times more, each call inside
// a user-API region "outer".
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include <kairos/user.h>

__attribute__((noinline)) long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

// thrower(3) calls itself down to thrower(0), which throws: 4 calls, none returning normally.
__attribute__((noinline)) void thrower(int depth) {
  if (depth == 0) throw std::runtime_error{"from the bottom"};
  thrower(depth - 1);
}

__attribute__((noinline)) int catcher() {
  try {
    thrower(3);
  } catch (const std::exception&) {
    return 1;
  }
  return 0;
}

__attribute__((noinline)) long deep(long n) { return n == 0 ? 0 : 1 + deep(n - 1); }

long long monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1'000'000'000ll + now.tv_nsec;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 15;
  const long depth = argc > 2 ? std::atol(argv[2]) : 0;
  const double loop_seconds = argc > 3 ? std::atof(argv[3]) : 0;
  std::vector<long> values{fib(n), catcher(), depth > 0 ? deep(depth) : 0};
  std::printf("fib(%d) = %ld\ncaught %ld\ndeep %ld\n", n, values[0], values[1], values[2]);
  const auto loop_end = monotonic_ns() + static_cast<long long>(loop_seconds * 1e9);
  // Read and written through volatile: fib is pure, and clang would hoist one call out of the loop.
  volatile int argument = n;
  [[maybe_unused]] volatile long result = 0;
  while (monotonic_ns() < loop_end) {
    const auto start = monotonic_ns();
    result = fib(argument);
    std::printf("loop %lld %lld\n", start, monotonic_ns());
  }
  const long regions = argc > 4 ? std::atol(argv[4]) : 0;
  for (long i = 0; i < regions; ++i) {
    kairos_push_region("outer");
    result = fib(argument);
    kairos_pop_region("outer");
  }
  return 0;
}
