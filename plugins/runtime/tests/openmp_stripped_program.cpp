// Calls the stripped library's parallel construct a few times (tests/annotations_tests.py).
#include <cstdio>

extern "C" long stripped_parallel_sum(int threads, long per_thread);

int main() {
  long sum = 0;
  for (int instance = 0; instance < 5; ++instance) sum += stripped_parallel_sum(4, 1'000'000);
  std::printf("sum: %ld\n", sum);
  return 0;
}
