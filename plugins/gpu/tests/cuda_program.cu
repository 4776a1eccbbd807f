// A small CUDA program for the GPU plugin's tests (nvcc): the CUDA counterpart of hip_program's
// default plan, on a real device. Kernels spin on clock64() for a given time, so their durations are
// known ahead; each is timed by the program itself with a pair of cudaEvents around its launch.
//
//   cudaMemcpy             host to device, 1 MiB (synchronous)
//   cudaMemset             64 KiB (synchronous)
//   physics::integrate     stream A, 2000 µs, grid 64x1x1,  block 256x1x1, dynamic shared 0
//   physics::integrate     stream A, 3000 µs, grid 128x1x1, block 128x2x1, dynamic shared 1024
//   physics::integrate     stream A, 4000 µs, grid 256x2x1, block 64x4x1,  dynamic shared 2048
//   reduce_sum (extern C)  stream B, 5000 µs, grid 32x1x1,  block 256x1x1, dynamic shared 0
//   cudaMemcpyAsync        device to host, 512 KiB, stream A (pinned memory)
//   cudaDeviceSynchronize
// physics::integrate also has 128 bytes of static shared memory (cudaFuncGetAttributes tells).
//
// Output: one line per kernel on stderr, "cuda_program: kernel <name> <ms>" (its cudaEvent time),
// then "cuda_program: 4 kernels, 3 copies" on stdout (memsets count as copies), exit status 0.
// No device (cudaGetDeviceCount fails or counts 0): "cuda_program: no device: <cudaGetErrorString>"
// on stderr, exit status 3. A failed call: its text and error on stderr, 1.
//
// Built with -DCUDA_PROGRAM_NO_MAIN it is the workload of cupti_check (cupti_check.cpp declares the
// same cuda_program:: structures and functions): it then runs in that program's process.
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "cuda_workload.hpp"

namespace physics {
__device__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void integrate(float* data, long long cycles, unsigned dynamic_floats) {
  __shared__ float tile[32];
  extern __shared__ float scratch[];
  const unsigned thread = threadIdx.x + blockDim.x * threadIdx.y;
  if (thread < 32) tile[thread] = static_cast<float>(thread);
  if (thread < dynamic_floats) scratch[thread] = static_cast<float>(thread);
  __syncthreads();
  spin(cycles);
  if (thread == 0)
    data[blockIdx.x + gridDim.x * blockIdx.y] += tile[blockIdx.x % 32] + (dynamic_floats ? scratch[0] : 0.f);
}
}  // namespace physics

extern "C" __global__ void reduce_sum(const float* in, float* out, long long cycles) {
  physics::spin(cycles);
  if (threadIdx.x == 0) out[blockIdx.x] = in[blockIdx.x] + 1.f;
}

namespace cuda_program {
namespace {

long long steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct failure {
  int status;
};

char* failure_text = nullptr;
std::size_t failure_size = 0;

void check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  if (failure_text)
    std::snprintf(failure_text, failure_size, "%s: %s (%s)", call, cudaGetErrorString(error), cudaGetErrorName(error));
  throw failure{1};
}
#define CHECK(call) check((call), #call)

}  // namespace

// Finds the device and creates its context (the CUDA runtime and driver are loaded afterwards).
// 0: ready; 3: no device; 1: a call failed. `message` says why when not 0.
int initialise(char* message, std::size_t size) {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess || count == 0) {
    std::snprintf(message, size, "%s",
                  error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount counts 0");
    return 3;
  }
  failure_text = message;
  failure_size = size;
  try {
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr));  // the context
  } catch (const failure& f) {
    return f.status;
  }
  return 0;
}

// Runs the workload (initialise() first). 0: done; 1: a call failed, `message` says which.
int run(workload& out, char* message, std::size_t size) {
  failure_text = message;
  failure_size = size;
  std::memset(&out, 0, sizeof out);
  try {
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    // Both kernels loaded before the timed part: with CUDA's lazy loading (the default), the first
    // launch of a kernel not yet loaded waits for the device's running kernels, which would serialise
    // reduce_sum on stream B behind stream A's kernels (seen on an H100 with CUDA 13.0).
    cudaFuncAttributes attributes{}, reduce_attributes{};
    CHECK(cudaFuncGetAttributes(&reduce_attributes, reduce_sum));
    CHECK(cudaFuncGetAttributes(&attributes, physics::integrate));

    constexpr std::size_t h2d_bytes = 1u << 20, d2h_bytes = 512u << 10, memset_bytes = 64u << 10;
    float *device_data = nullptr, *device_in = nullptr, *device_out = nullptr;
    void *host_source = nullptr, *host_destination = nullptr;
    CHECK(cudaMalloc(&device_data, h2d_bytes));
    CHECK(cudaMalloc(&device_in, 4096));
    CHECK(cudaMalloc(&device_out, 4096));
    CHECK(cudaMallocHost(&host_source, h2d_bytes));
    CHECK(cudaMallocHost(&host_destination, d2h_bytes));
    std::memset(host_source, 0, h2d_bytes);
    CHECK(cudaMemset(device_in, 0, 4096));  // setup: not one of the workload's copies
    CHECK(cudaDeviceSynchronize());
    cudaStream_t streams[2] = {};
    CHECK(cudaStreamCreateWithFlags(&streams[0], cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&streams[1], cudaStreamNonBlocking));
    cudaEvent_t starts[4] = {}, stops[4] = {};
    for (int i = 0; i < 4; ++i) {
      CHECK(cudaEventCreate(&starts[i]));
      CHECK(cudaEventCreate(&stops[i]));
    }

    auto& copies = out.copies;
    copies[0] = {cudaMemcpyHostToDevice, h2d_bytes, false, steady_ns(), 0};
    CHECK(cudaMemcpy(device_data, host_source, h2d_bytes, cudaMemcpyHostToDevice));
    copies[0].end_ns = steady_ns();
    copies[1] = {-1, memset_bytes, false, steady_ns(), 0};
    CHECK(cudaMemset(device_data, 0, memset_bytes));
    copies[1].end_ns = steady_ns();

    const kernel_run plan[4] = {
        {"physics::integrate", 0, {64, 1, 1}, {256, 1, 1}, 0, 0, 2000, 0, 0, 0, 0.f},
        {"physics::integrate", 0, {128, 1, 1}, {128, 2, 1}, 1024, 0, 3000, 0, 0, 0, 0.f},
        {"physics::integrate", 0, {256, 2, 1}, {64, 4, 1}, 2048, 0, 4000, 0, 0, 0, 0.f},
        {"reduce_sum", 1, {32, 1, 1}, {256, 1, 1}, 0, 0, 5000, 0, 0, 0, 0.f},
    };
    for (int i = 0; i < 4; ++i) {
      kernel_run& k = out.kernels[i] = plan[i];
      const dim3 grid{k.grid[0], k.grid[1], k.grid[2]}, block{k.block[0], k.block[1], k.block[2]};
      const long long cycles = k.spin_us * clock_khz / 1000;
      cudaStream_t stream = streams[k.stream];
      k.launch_begin_ns = steady_ns();
      CHECK(cudaEventRecord(starts[i], stream));
      if (k.stream == 0) {
        k.static_shared = static_cast<unsigned>(attributes.sharedSizeBytes);
        physics::integrate<<<grid, block, k.dynamic_shared, stream>>>(device_data, cycles, k.dynamic_shared / 4);
      } else {
        reduce_sum<<<grid, block, k.dynamic_shared, stream>>>(device_in, device_out, cycles);
      }
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(stops[i], stream));
      k.launch_end_ns = steady_ns();
    }
    copies[2] = {cudaMemcpyDeviceToHost, d2h_bytes, true, steady_ns(), 0};
    CHECK(cudaMemcpyAsync(host_destination, device_data, d2h_bytes, cudaMemcpyDeviceToHost, streams[0]));
    copies[2].end_ns = steady_ns();
    out.copy_count = 3;

    for (int i = 0; i < 4; ++i) {
      CHECK(cudaEventSynchronize(stops[i]));
      out.kernels[i].done_ns = steady_ns();
      CHECK(cudaEventElapsedTime(&out.kernels[i].event_ms, starts[i], stops[i]));
    }
    CHECK(cudaDeviceSynchronize());
    out.kernel_count = 4;

    for (int i = 0; i < 4; ++i) {
      CHECK(cudaEventDestroy(starts[i]));
      CHECK(cudaEventDestroy(stops[i]));
    }
    CHECK(cudaStreamDestroy(streams[0]));
    CHECK(cudaStreamDestroy(streams[1]));
    CHECK(cudaFreeHost(host_source));
    CHECK(cudaFreeHost(host_destination));
    CHECK(cudaFree(device_data));
    CHECK(cudaFree(device_in));
    CHECK(cudaFree(device_out));
  } catch (const failure& f) {
    return f.status;
  }
  return 0;
}

}  // namespace cuda_program

#ifndef CUDA_PROGRAM_NO_MAIN
int main() {
  char message[512] = {};
  if (const int status = cuda_program::initialise(message, sizeof message); status != 0) {
    std::fprintf(stderr, status == 3 ? "cuda_program: no device: %s\n" : "cuda_program: %s\n", message);
    return status;
  }
  cuda_program::workload done{};
  if (const int status = cuda_program::run(done, message, sizeof message); status != 0) {
    std::fprintf(stderr, "cuda_program: %s\n", message);
    return status;
  }
  for (int i = 0; i < done.kernel_count; ++i)
    std::fprintf(stderr, "cuda_program: kernel %s %.3f\n", done.kernels[i].name, done.kernels[i].event_ms);
  std::printf("cuda_program: %d kernels, %d copies\n", done.kernel_count, done.copy_count);
  return 0;
}
#endif
