// The GPU components in a program of their own (no kairos-run). The binary is linked against
// Debian's HIP runtime and registered twice: as it is (no GPU on these machines: the no-device
// path) and with LD_LIBRARY_PATH naming the test double (hip_double/), which simulates kernels and
// copies of known durations. Each test case runs in the case it is about and reports itself skipped
// in the other.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <hip/hip_runtime_api.h>
#include <kairos/component_tuple.hpp>
#include <kairos/plugins/gpu.hpp>

#include "kairos_test_skip.hpp"

namespace {

void simulated_kernel(std::uint64_t, float*) {}

bool device_present() {
  int count = 0;
  return hipGetDeviceCount(&count) == hipSuccess && count > 0;
}

// Launches a kernel the double runs for `duration_ns` (its convention: the first argument).
void launch(std::uint64_t duration_ns, hipStream_t stream) {
  static float data[1];
  float* pointer = data;
  void* arguments[] = {&duration_ns, &pointer};
  REQUIRE(hipLaunchKernel(reinterpret_cast<const void*>(&simulated_kernel), dim3(1), dim3(64), arguments, 0, stream) ==
          hipSuccess);
}

constexpr double tolerance_ms = 0.3;

}  // namespace

TEST_CASE("without a device, the components say why in HIP's own words") {
  if (device_present()) return kairos_test::skip("a HIP device (or the test double) is present");
  CHECK_FALSE(kairos::gpu_kernel_time::available());
  const auto reason = kairos::gpu_kernel_time::unavailable_reason();
  CHECK(reason.find("hip: hipErrorNoDevice") != std::string::npos);
  CHECK(reason.find(hipGetErrorString(hipErrorNoDevice)) != std::string::npos);
  CHECK(kairos::gpu_api_time::unavailable_reason() == reason);
}

TEST_CASE("kernel time is the device time of the kernels launched in the region, resolved when read") {
  if (!device_present()) return kairos_test::skip("no HIP device and no test double");
  REQUIRE(kairos::gpu_kernel_time::available());
  hipStream_t stream = nullptr;
  REQUIRE(hipStreamCreate(&stream) == hipSuccess);
  launch(1'000'000, stream);  // before the region: not counted
  kairos::component_tuple<kairos::gpu_kernel_time, kairos::gpu_api_time> region{"step"};
  region.start();
  launch(2'000'000, stream);
  launch(3'000'000, stream);
  region.stop();
  launch(4'000'000, stream);  // after: not counted
  const auto& kernels = region.component<kairos::gpu_kernel_time>();
  CHECK(kernels.issued() == 2);
  CHECK(kernels.get() == doctest::Approx(5.0).epsilon(tolerance_ms / 5.0));
  CHECK(region.get<kairos::gpu_api_time>() > 0.0);  // two launches' host time
  REQUIRE(hipStreamSynchronize(stream) == hipSuccess);
  REQUIRE(hipStreamDestroy(stream) == hipSuccess);
}

TEST_CASE("copies are counted by direction, in bytes and device time") {
  if (!device_present()) return kairos_test::skip("no HIP device and no test double");
  std::vector<char> host(256 << 10);
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, host.size()) == hipSuccess);
  kairos::component_tuple<kairos::gpu_memcpy_bytes, kairos::gpu_memcpy_time> copies{"copies"};
  copies.start();
  REQUIRE(hipMemcpy(device, host.data(), host.size(), hipMemcpyHostToDevice) == hipSuccess);
  REQUIRE(hipMemcpy(host.data(), device, 64 << 10, hipMemcpyDeviceToHost) == hipSuccess);
  copies.stop();
  const auto& bytes = copies.component<kairos::gpu_memcpy_bytes>();
  CHECK(bytes.bytes(kairos::gpu::copy_kind::host_to_device) == host.size());
  CHECK(bytes.bytes(kairos::gpu::copy_kind::device_to_host) == (64u << 10));
  CHECK(bytes.total_bytes() == host.size() + (64u << 10));
  // The double copies at 1 GB/s: 320 KiB take 0.33 ms of device time.
  CHECK(copies.get<kairos::gpu_memcpy_time>() >= 0.3);
  REQUIRE(hipFree(device) == hipSuccess);
}

TEST_CASE("api time is the host time spent inside the runtime's calls") {
  if (!device_present()) return kairos_test::skip("no HIP device and no test double");
  std::vector<char> host(1 << 20);
  void* device = nullptr;
  REQUIRE(hipMalloc(&device, host.size()) == hipSuccess);
  kairos::component_tuple<kairos::gpu_api_time> calls{"calls"};
  calls.start();
  // Synchronous: the call returns when the double's 1 GB/s copy of 1 MiB is done (1.05 ms).
  REQUIRE(hipMemcpy(device, host.data(), host.size(), hipMemcpyHostToDevice) == hipSuccess);
  calls.stop();
  CHECK(calls.get<kairos::gpu_api_time>() >= 1.0);
  REQUIRE(hipFree(device) == hipSuccess);
}
