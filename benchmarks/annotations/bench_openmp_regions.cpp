// Time per OpenMP parallel region (benchmarks/annotations/overhead.py): COUNT regions of a team of
// THREADS, each adding to a counter, timed with the steady clock; prints "region_ns VALUE". Built by
// g++ (libgomp) here, by clang++ (libomp) in overhead.py.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 20000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  std::atomic<long> sum{0};
  const auto start = std::chrono::steady_clock::now();
  for (long region = 0; region < count; ++region) {
#pragma omp parallel num_threads(threads)
    sum.fetch_add(1, std::memory_order_relaxed);
  }
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  if (sum.load() < count) return 1;
  std::printf("region_ns %.1f\n", elapsed.count() / static_cast<double>(count));
  return 0;
}
