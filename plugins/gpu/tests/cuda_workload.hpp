#pragma once
// cuda_program's workload, shared by cuda_program.cu (which defines it) and cupti_check.cpp (which
// runs it in its own process, built from cuda_program.cu with -DCUDA_PROGRAM_NO_MAIN).
#include <cstddef>

namespace cuda_program {

// One kernel launched: what was asked, the program's own timing (cudaEvent pair around the launch)
// and the host's steady_clock (CLOCK_MONOTONIC) around the launch and when its stop event was seen.
struct kernel_run {
  const char* name;  // "physics::integrate" or "reduce_sum"
  int stream;        // 0: stream A, 1: stream B
  unsigned grid[3], block[3];
  unsigned dynamic_shared, static_shared;
  long long spin_us;
  long long launch_begin_ns, launch_end_ns, done_ns;
  float event_ms;
};
// One copy or memset: kind is a cudaMemcpyKind, or -1 for a memset.
struct copy_run {
  int kind;
  unsigned long long bytes;
  bool asynchronous;
  long long begin_ns, end_ns;  // around the call
};
struct workload {
  kernel_run kernels[4];
  copy_run copies[3];
  int kernel_count, copy_count;
};

int initialise(char* message, std::size_t size);
int run(workload& out, char* message, std::size_t size);

}  // namespace cuda_program
