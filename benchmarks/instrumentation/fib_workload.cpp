// The instrumentation benchmark's program (benchmarks/instrumentation/overhead.py): fib(n) `repeat`
// times, every call a function call (noinline), built plain, with -finstrument-functions and with
// -pg. Prints the result and the number of fib calls, so the benchmark needs no formula.
// Usage: fib_workload N REPEAT   |   fib_workload --clock-pairs COUNT (steady_clock::now() pairs)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static unsigned long calls = 0;

__attribute__((noinline)) long fib(int n) {
  ++calls;
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--clock-pairs") == 0) {
    // The baseline the issue states costs against: a raw pair of steady_clock reads per call.
    const long count = std::atol(argv[2]);
    long long sum = 0;
    for (long i = 0; i < count; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto stop = std::chrono::steady_clock::now();
      sum += (stop - start).count();
    }
    std::printf("pairs %ld %lld\n", count, sum);
    return 0;
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 30;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
  long result = 0;
  for (int i = 0; i < repeat; ++i) result += fib(n);
  std::printf("fib %ld calls %lu\n", result, calls);
  return 0;
}
