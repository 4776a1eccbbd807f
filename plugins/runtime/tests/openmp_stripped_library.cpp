// A shared library whose one parallel construct lives in an exported function, stripped of every
// symbol but its dynamic ones when built (tests/annotations_tests.py): the outlined body
// (stripped_parallel_sum._omp_fn.0) then has no name, as in Debian's GraphicsMagick.
#include <omp.h>

extern "C" [[gnu::visibility("default")]] long stripped_parallel_sum(int threads, long per_thread) {
  long sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  for (long i = 0; i < per_thread; ++i) sum += omp_get_thread_num() + 1;
  return sum;
}
