// An OpenMP program with known answers (tests/annotations_tests.py, benchmarks/annotations/),
// built with g++ (libgomp) and with clang++ (libomp, OMPT); it knows nothing of kairos.
//   openmp_program imbalance UNIT_MS INSTANCES   a parallel for on 4 threads in which thread t
//                                                 sleeps t+1 units: the work's largest over its
//                                                 mean is 4 / 2.5 = 1.6, and thread t waits
//                                                 3 - t units at the closing barrier
//   openmp_program barrier UNIT_MS INSTANCES     likewise, then an explicit barrier, then the
//                                                 other way round: thread t sleeps 4 - t units
//   openmp_program regions COUNT                 COUNT parallel regions of 2 threads, each
//                                                 adding to a sum (the cost of a region)
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int team = 4;

void sleep_units(int units, long unit_ms) { usleep(static_cast<useconds_t>(units * unit_ms * 1000)); }

// On stderr, how long each thread really slept (a loaded machine wakes sleepers late): the
// work the profile should show, where stdout must stay the same with and without kairos.
int imbalance(long unit_ms, int instances) {
  long done = 0;
  std::atomic<long long> slept_ns[team] = {};
  for (int instance = 0; instance < instances; ++instance) {
#pragma omp parallel for schedule(static, 1) num_threads(team) reduction(+ : done)
    for (int thread = 0; thread < team; ++thread) {
      const auto start = std::chrono::steady_clock::now();
      sleep_units(thread + 1, unit_ms);
      slept_ns[thread] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
      done += thread + 1;
    }
  }
  std::printf("units done: %ld\n", done);
  std::fprintf(stderr, "slept ns: %lld %lld %lld %lld\n", slept_ns[0].load(), slept_ns[1].load(), slept_ns[2].load(),
               slept_ns[3].load());
  return 0;
}

int with_barrier(long unit_ms, int instances) {
  std::atomic<long> done{0};
  for (int instance = 0; instance < instances; ++instance) {
#pragma omp parallel num_threads(team)
    {
      const int thread = omp_get_thread_num();
      sleep_units(thread + 1, unit_ms);
#pragma omp barrier
      sleep_units(team - thread, unit_ms);
      done += 1;
    }
  }
  std::printf("members done: %ld\n", done.load());
  return 0;
}

int regions(long count) {
  std::atomic<long> sum{0};
  for (long region = 0; region < count; ++region) {
#pragma omp parallel num_threads(2)
    sum.fetch_add(1, std::memory_order_relaxed);
  }
  std::printf("sum: %ld\n", sum.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "imbalance") == 0) return imbalance(std::atol(argv[2]), std::atoi(argv[3]));
  if (argc == 4 && std::strcmp(argv[1], "barrier") == 0) return with_barrier(std::atol(argv[2]), std::atoi(argv[3]));
  if (argc == 3 && std::strcmp(argv[1], "regions") == 0) return regions(std::atol(argv[2]));
  std::fprintf(stderr, "usage: %s imbalance|barrier UNIT_MS INSTANCES | regions COUNT\n", argv[0]);
  return 2;
}
