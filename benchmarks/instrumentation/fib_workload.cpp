// The instrumentation benchmark's program (benchmarks/instrumentation/overhead.py): fib(n) `repeat`
// times, every call a function call (noinline), built plain, with -finstrument-functions and with
// -pg. Prints the result and the number of fib calls, so the benchmark needs no formula.
// Usage: fib_workload N REPEAT   |   fib_workload --clock-pairs COUNT (steady_clock::now() pairs)
//        fib_workload --regions COUNT (user-API regions, push and pop; the build linked to
//        libkairos-user.so defines KAIROS_USER_API)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef KAIROS_USER_API
#include <kairos/user.h>
#endif

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
#ifdef KAIROS_USER_API
  if (argc == 3 && std::strcmp(argv[1], "--regions") == 0) {
    const long count = std::atol(argv[2]);
    for (long i = 0; i < count; ++i) {
      kairos_push_region("region");
      kairos_pop_region("region");
    }
    std::printf("regions %ld\n", count);
    return 0;
  }
#endif
  const int n = argc > 1 ? std::atoi(argv[1]) : 30;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
  long result = 0;
  for (int i = 0; i < repeat; ++i) result += fib(n);
  std::printf("fib %ld calls %lu\n", result, calls);
  return 0;
}
