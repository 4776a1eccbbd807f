// Time per NVTX range (benchmarks/annotations/overhead.py): COUNT nvtxRangePushA/nvtxRangePop
// pairs around an add, timed with the steady clock; prints "range_ns VALUE". NVTX v3 is
// header-only: without a tool each call is a no-op through a function pointer.
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 1000000;
  volatile long sink = 0;
  nvtxRangePushA("warm-up");  // NVTX loads its tool at the first call: not timed
  nvtxRangePop();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) {
    nvtxRangePushA("range");
    sink = sink + i;
    nvtxRangePop();
  }
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("range_ns %.1f\n", elapsed.count() / static_cast<double>(count));
  return 0;
}
