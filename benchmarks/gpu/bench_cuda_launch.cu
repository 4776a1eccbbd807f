// Host time per CUDA call, for cuda_launch_overhead.py: N empty kernel launches, then N small
// asynchronous copies, on one stream, timed on the host (steady_clock) without synchronising in
// between. Prints "launch_ns <per launch> memcpy_ns <per copy>" and exits 0; 3 with no device.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

namespace {
double per_call_ns(std::chrono::steady_clock::time_point begin, int calls) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count() / calls;
}
}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_cuda_launch: no device\n");
    return 3;
  }
  cudaStream_t stream = nullptr;
  char* device = nullptr;
  char* host = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess || cudaMalloc(&device, 64) != cudaSuccess ||
      cudaMallocHost(&host, 64) != cudaSuccess)
    return 1;
  empty_kernel<<<1, 32, 0, stream>>>();  // loads the kernel and warms the stream
  if (cudaStreamSynchronize(stream) != cudaSuccess) return 1;

  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  const double launch_ns = per_call_ns(begin, calls);
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) return 1;

  begin = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) (void)cudaMemcpyAsync(device, host, 64, cudaMemcpyHostToDevice, stream);
  const double memcpy_ns = per_call_ns(begin, calls);
  if (cudaStreamSynchronize(stream) != cudaSuccess) return 1;
  std::printf("launch_ns %.1f memcpy_ns %.1f\n", launch_ns, memcpy_ns);
  return 0;
}
