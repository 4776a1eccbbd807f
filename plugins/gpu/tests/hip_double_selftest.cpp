// The HIP test double's own behaviour (hip_double/hip_double.cpp), checked against its simulated
// timeline before other tests rely on it. Linked against the double, not the real runtime.
//
// By the double's convention a kernel's FIRST argument is its duration in nanoseconds; the kernels
// here are host functions whose addresses stand for device code (the double never calls them).
// Events are timed exactly: a lead kernel on the null stream holds every blocking stream for
// lead_ns, so work issued meanwhile starts at a time that does not depend on the host's pace.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <hip/hip_runtime_api.h>

// Not declared by HIP 5.2's headers (later ones declare it).
extern "C" hipError_t hipLaunchKernel_spt(const void* function_address, dim3 numBlocks, dim3 dimBlocks, void** args,
                                          size_t sharedMemBytes, hipStream_t stream);

namespace {

constexpr std::uint64_t ms = 1'000'000;  // ns
constexpr std::uint64_t lead_ns = 50 * ms;
constexpr double tolerance_ms = 0.3;

void kernel(std::uint64_t duration_ns) { static_cast<void>(duration_ns); }
const void* const kernel_address = reinterpret_cast<const void*>(&kernel);

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}
double ms_since(std::int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e6; }

hipError_t launch(std::uint64_t duration_ns, hipStream_t stream) {
  void* args[] = {&duration_ns};
  return hipLaunchKernel(kernel_address, dim3(1), dim3(64), args, 0, stream);
}

// Holds every blocking stream for lead_ns (see the top of the file).
void lead() { REQUIRE(launch(lead_ns, nullptr) == hipSuccess); }

struct event {
  hipEvent_t handle = nullptr;
  explicit event(unsigned flags = hipEventDefault) { REQUIRE(hipEventCreateWithFlags(&handle, flags) == hipSuccess); }
  ~event() { CHECK(hipEventDestroy(handle) == hipSuccess); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  operator hipEvent_t() const { return handle; }
};

struct stream {
  hipStream_t handle = nullptr;
  explicit stream(unsigned flags = hipStreamDefault) {
    REQUIRE(hipStreamCreateWithFlags(&handle, flags) == hipSuccess);
  }
  ~stream() { CHECK(hipStreamDestroy(handle) == hipSuccess); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  operator hipStream_t() const { return handle; }
};

struct device_buffer {
  void* memory = nullptr;
  explicit device_buffer(std::size_t bytes) { REQUIRE(hipMalloc(&memory, bytes) == hipSuccess); }
  ~device_buffer() { CHECK(hipFree(memory) == hipSuccess); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  unsigned char* bytes() const { return static_cast<unsigned char*>(memory); }
};

float elapsed_ms(hipEvent_t start, hipEvent_t stop) {
  float elapsed = -1;
  REQUIRE(hipEventElapsedTime(&elapsed, start, stop) == hipSuccess);
  return elapsed;
}

// The time between two completed events is `expected_ms`, within `tolerance`.
void check_elapsed(hipEvent_t start, hipEvent_t stop, double expected_ms, double tolerance = tolerance_ms) {
  const double elapsed = elapsed_ms(start, stop);
  CHECK_MESSAGE(std::abs(elapsed - expected_ms) <= tolerance, "elapsed ", elapsed, " ms, expected ", expected_ms,
                " ms within ", tolerance, " ms");
}

std::vector<unsigned char> pattern(std::size_t bytes) {
  std::vector<unsigned char> values(bytes);
  for (std::size_t i = 0; i < bytes; ++i) values[i] = static_cast<unsigned char>(i * 7 + 3);
  return values;
}

}  // namespace

TEST_CASE("the double is one device: kairos HIP test double, gfx90a") {
  int count = 0;
  REQUIRE(hipGetDeviceCount(&count) == hipSuccess);
  CHECK(count == 1);
  hipDeviceProp_t properties{};
  REQUIRE(hipGetDeviceProperties(&properties, 0) == hipSuccess);
  CHECK(std::string_view{properties.name} == "kairos HIP test double");
  CHECK(std::string_view{properties.gcnArchName} == "gfx90a");
  CHECK(properties.totalGlobalMem == std::size_t{16} << 30);
  CHECK(properties.multiProcessorCount == 104);
  CHECK(properties.clockRate == 1'700'000);
  CHECK(properties.memoryClockRate == 1'600'000);
  CHECK(properties.major == 9);
  CHECK(properties.minor == 0);
  int value = 0;
  CHECK(hipDeviceGetAttribute(&value, hipDeviceAttributeMultiprocessorCount, 0) == hipSuccess);
  CHECK(value == 104);
  CHECK(hipGetDevice(&value) == hipSuccess);
  CHECK(value == 0);
  CHECK(hipSetDevice(0) == hipSuccess);
  CHECK(hipSetDevice(1) == hipErrorInvalidDevice);
  CHECK(hipGetDeviceProperties(&properties, 1) == hipErrorInvalidDevice);
  CHECK(hipRuntimeGetVersion(&value) == hipSuccess);
  CHECK(value == HIP_VERSION);
  CHECK(hipDriverGetVersion(&value) == hipSuccess);
  CHECK(value == HIP_VERSION);
  CHECK(std::string_view{hipGetErrorName(hipErrorNotReady)} == "hipErrorNotReady");
  CHECK(std::string_view{hipGetErrorString(hipErrorNoDevice)} == "hipErrorNoDevice");  // as HIP 5.2's
  static_cast<void>(hipGetLastError());
}

TEST_CASE("an event pair around a kernel times its simulated duration") {
  stream s;
  event start, stop;
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  REQUIRE(launch(5 * ms, s) == hipSuccess);
  REQUIRE(hipEventRecord(stop, s) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  check_elapsed(start, stop, 5.0);
}

TEST_CASE("work is NotReady until its simulated end, and a synchronization waits for it") {
  stream s;
  event start, stop;
  const std::int64_t issued_ns = now_ns();
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  REQUIRE(launch(100 * ms, s) == hipSuccess);
  REQUIRE(hipEventRecord(stop, s) == hipSuccess);
  CHECK(ms_since(issued_ns) < static_cast<double>(lead_ns) / 1e6);  // launches return at once
  CHECK(hipEventQuery(stop) == hipErrorNotReady);
  CHECK(hipStreamQuery(s) == hipErrorNotReady);
  float elapsed = 0;
  CHECK(hipEventElapsedTime(&elapsed, start, stop) == hipErrorNotReady);
  REQUIRE(hipStreamSynchronize(s) == hipSuccess);
  CHECK(ms_since(issued_ns) >= static_cast<double>(lead_ns) / 1e6 + 100);
  CHECK(hipEventQuery(stop) == hipSuccess);
  CHECK(hipStreamQuery(s) == hipSuccess);
  check_elapsed(start, stop, 100.0);
  static_cast<void>(hipGetLastError());
}

TEST_CASE("two kernels on one stream run one after the other") {
  stream s;
  event start, stop;
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  REQUIRE(launch(3 * ms, s) == hipSuccess);
  REQUIRE(launch(4 * ms, s) == hipSuccess);
  REQUIRE(hipEventRecord(stop, s) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  check_elapsed(start, stop, 7.0);
}

TEST_CASE("kernels on two streams overlap") {
  stream first, second;
  event start, first_done, second_done;
  lead();
  REQUIRE(hipEventRecord(start, first) == hipSuccess);
  REQUIRE(launch(20 * ms, first) == hipSuccess);
  REQUIRE(launch(20 * ms, second) == hipSuccess);
  REQUIRE(hipEventRecord(first_done, first) == hipSuccess);
  REQUIRE(hipEventRecord(second_done, second) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  check_elapsed(start, first_done, 20.0);
  check_elapsed(start, second_done, 20.0);
}

TEST_CASE(
    "the null stream waits for every blocking stream, and they for it; a non-blocking stream "
    "waits only for itself") {
  stream first, second, independent{hipStreamNonBlocking};
  event start, null_done, after_null, independent_now;
  lead();
  REQUIRE(hipEventRecord(start, first) == hipSuccess);
  REQUIRE(launch(4 * ms, first) == hipSuccess);
  REQUIRE(launch(2 * ms, second) == hipSuccess);
  REQUIRE(launch(1 * ms, nullptr) == hipSuccess);  // after first's 4 ms
  REQUIRE(hipEventRecord(null_done, nullptr) == hipSuccess);
  REQUIRE(launch(3 * ms, second) == hipSuccess);  // after the null stream's work
  REQUIRE(hipEventRecord(after_null, second) == hipSuccess);
  // Recorded while the lead holds the blocking streams: a non-blocking stream's event is reached now.
  const std::int64_t recorded_ns = now_ns();
  REQUIRE(hipEventRecord(independent_now, independent) == hipSuccess);
  REQUIRE(hipEventSynchronize(independent_now) == hipSuccess);
  CHECK(ms_since(recorded_ns) < static_cast<double>(lead_ns) / 1e6);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  check_elapsed(start, null_done, 5.0);
  check_elapsed(start, after_null, 8.0);
  CHECK(elapsed_ms(start, independent_now) < 0);  // before the lead's end
}

TEST_CASE("hipStreamPerThread is a blocking stream of each thread's own") {
  stream s;
  event start, own_done, other_done;
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  REQUIRE(launch(10 * ms, s) == hipSuccess);
  std::uint64_t duration_ns = 10 * ms;
  void* args[] = {&duration_ns};
  REQUIRE(hipLaunchKernel_spt(kernel_address, dim3(1), dim3(1), args, 0, nullptr) == hipSuccess);
  REQUIRE(hipEventRecord(own_done, hipStreamPerThread) == hipSuccess);
  hipError_t other_thread = hipErrorUnknown;
  std::thread{[&] {
    other_thread = launch(10 * ms, hipStreamPerThread);
    if (other_thread == hipSuccess) other_thread = hipEventRecord(other_done, hipStreamPerThread);
  }}.join();
  REQUIRE(other_thread == hipSuccess);
  REQUIRE(hipStreamSynchronize(hipStreamPerThread) == hipSuccess);
  REQUIRE(hipDeviceSynchronize() == hipSuccess);
  check_elapsed(start, own_done, 10.0);
  check_elapsed(start, other_done, 10.0);
}

TEST_CASE("hipExtLaunchKernel records its events at the kernel's simulated start and end") {
  stream s;
  event start, stop;
  std::uint64_t duration_ns = 7 * ms;
  void* args[] = {&duration_ns};
  REQUIRE(hipExtLaunchKernel(kernel_address, dim3(1), dim3(1), args, 0, s, start, stop, 0) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  check_elapsed(start, stop, 7.0, 0.001);
}

TEST_CASE("hipModuleLaunchKernel takes its function as an opaque handle") {
  stream s;
  event start, stop;
  std::uint64_t duration_ns = 3 * ms;
  void* params[] = {&duration_ns};
  const auto function = reinterpret_cast<hipFunction_t>(std::uintptr_t{0x1000});
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  REQUIRE(hipModuleLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, s, params, nullptr) == hipSuccess);
  REQUIRE(hipEventRecord(stop, s) == hipSuccess);
  REQUIRE(hipEventSynchronize(stop) == hipSuccess);
  check_elapsed(start, stop, 3.0);
  CHECK(hipKernelNameRef(function) == nullptr);
  CHECK(hipKernelNameRefByPtr(kernel_address, s) == nullptr);
}

TEST_CASE("a failed call is the thread's last error until hipGetLastError reads it") {
  static_cast<void>(hipGetLastError());
  void* args[] = {nullptr};
  CHECK(hipLaunchKernel(nullptr, dim3(1), dim3(1), args, 0, nullptr) == hipErrorInvalidDeviceFunction);
  CHECK(hipPeekAtLastError() == hipErrorInvalidDeviceFunction);
  CHECK(hipGetLastError() == hipErrorInvalidDeviceFunction);
  CHECK(hipGetLastError() == hipSuccess);
  int stale = 0;
  CHECK(launch(1, reinterpret_cast<hipStream_t>(&stale)) == hipErrorInvalidHandle);
  static_cast<void>(hipGetLastError());
}

TEST_CASE("events that cannot be timed") {
  event recorded, unrecorded, untimed{hipEventDisableTiming};
  REQUIRE(hipEventRecord(recorded, nullptr) == hipSuccess);
  REQUIRE(hipEventRecord(untimed, nullptr) == hipSuccess);
  REQUIRE(hipEventSynchronize(untimed) == hipSuccess);
  float elapsed = 0;
  CHECK(hipEventQuery(unrecorded) == hipSuccess);
  CHECK(hipEventElapsedTime(&elapsed, recorded, unrecorded) == hipErrorInvalidHandle);
  CHECK(hipEventElapsedTime(&elapsed, recorded, untimed) == hipErrorInvalidHandle);
  static_cast<void>(hipGetLastError());
}

TEST_CASE("synchronous copies move their bytes and block for 1 ns a byte") {
  constexpr std::size_t bytes = 4 << 20;
  const auto source = pattern(bytes);
  std::vector<unsigned char> back(bytes);
  device_buffer d(bytes), e(bytes);

  std::int64_t issued_ns = now_ns();
  REQUIRE(hipMemcpy(d.memory, source.data(), bytes, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(ms_since(issued_ns) >= static_cast<double>(bytes) / 1e6);
  CHECK(std::memcmp(d.memory, source.data(), bytes) == 0);

  REQUIRE(hipMemcpyDtoD(e.memory, d.memory, bytes) == hipSuccess);
  REQUIRE(hipMemcpyDtoH(back.data(), e.memory, bytes) == hipSuccess);
  CHECK(back == source);
  REQUIRE(hipMemcpyPeer(d.memory, 0, source.data() + 1, 0, bytes - 1) == hipSuccess);
  CHECK(std::memcmp(d.memory, source.data() + 1, bytes - 1) == 0);
  CHECK(hipMemcpyPeer(d.memory, 1, e.memory, 0, bytes) == hipErrorInvalidDevice);

  issued_ns = now_ns();
  REQUIRE(hipMemset(d.memory, 0xab, bytes) == hipSuccess);
  CHECK(ms_since(issued_ns) >= static_cast<double>(bytes) / 1e6);
  CHECK(d.bytes()[0] == 0xab);
  CHECK(d.bytes()[bytes - 1] == 0xab);
  REQUIRE(hipMemsetD32(d.memory, 0x01020304, 2) == hipSuccess);
  std::int32_t words[3]{};
  std::memcpy(words, d.memory, sizeof words);
  CHECK(words[0] == 0x01020304);
  CHECK(words[1] == 0x01020304);
  CHECK(d.bytes()[8] == 0xab);

  // Rows of 3 bytes from a pitch of 4 to a pitch of 5.
  const unsigned char rows[8] = {1, 2, 3, 9, 4, 5, 6, 9};
  REQUIRE(hipMemcpy2D(e.memory, 5, rows, 4, 3, 2, hipMemcpyHostToDevice) == hipSuccess);
  CHECK(std::memcmp(e.memory, "\1\2\3", 3) == 0);
  CHECK(std::memcmp(e.bytes() + 5, "\4\5\6", 3) == 0);
  REQUIRE(hipMemcpyHtoD(e.memory, back.data(), 16) == hipSuccess);
  REQUIRE(hipMemcpyWithStream(back.data() + 16, e.memory, 16, hipMemcpyDefault, nullptr) == hipSuccess);
  CHECK(std::memcmp(back.data(), back.data() + 16, 16) == 0);
  CHECK(hipMemcpy(d.memory, e.memory, 1, static_cast<hipMemcpyKind>(7)) == hipErrorInvalidMemcpyDirection);
  static_cast<void>(hipGetLastError());
}

TEST_CASE("asynchronous copies return at once and take 1 ns a byte on their stream") {
  constexpr std::size_t bytes = 8 << 20;
  const auto source = pattern(bytes);
  device_buffer d(bytes), e(bytes);
  std::vector<unsigned char> back(bytes);
  stream s;
  event start, copied, stop;
  lead();
  REQUIRE(hipEventRecord(start, s) == hipSuccess);
  const std::int64_t issued_ns = now_ns();
  REQUIRE(hipMemcpyAsync(d.memory, source.data(), bytes, hipMemcpyHostToDevice, s) == hipSuccess);
  CHECK(ms_since(issued_ns) < static_cast<double>(lead_ns) / 1e6);
  REQUIRE(hipEventRecord(copied, s) == hipSuccess);
  constexpr std::size_t part = 1 << 20;
  REQUIRE(hipMemcpyHtoDAsync(e.memory, d.memory, part, s) == hipSuccess);
  REQUIRE(hipMemcpyDtoDAsync(e.bytes() + part, d.bytes() + part, part, s) == hipSuccess);
  REQUIRE(hipMemcpyDtoHAsync(back.data(), e.memory, 2 * part, s) == hipSuccess);
  REQUIRE(hipMemsetAsync(e.memory, 0, part, s) == hipSuccess);
  REQUIRE(hipMemcpy2DAsync(e.bytes() + part, 1024, d.memory, 1024, 1024, 1024, hipMemcpyDeviceToDevice, s) ==
          hipSuccess);
  REQUIRE(hipEventRecord(stop, s) == hipSuccess);
  REQUIRE(hipStreamSynchronize(s) == hipSuccess);
  check_elapsed(start, copied, bytes / 1e6);
  check_elapsed(copied, stop, 6 * part / 1e6);
  CHECK(std::memcmp(d.memory, source.data(), bytes) == 0);
  CHECK(std::memcmp(back.data(), source.data(), 2 * part) == 0);
  CHECK(e.bytes()[0] == 0);
  CHECK(std::memcmp(e.bytes() + part, source.data(), part) == 0);
}

TEST_CASE("memory: device memory is host memory, 16 GiB of it") {
  void* memory = nullptr;
  CHECK(hipMalloc(&memory, std::size_t{17} << 30) == hipErrorOutOfMemory);
  CHECK(memory == nullptr);
  REQUIRE(hipHostMalloc(&memory, 64, hipHostMallocDefault) == hipSuccess);
  static_cast<unsigned char*>(memory)[63] = 1;
  CHECK(hipHostFree(memory) == hipSuccess);
  REQUIRE(hipMallocManaged(&memory, 64, hipMemAttachGlobal) == hipSuccess);
  CHECK(hipFree(memory) == hipSuccess);
  CHECK(hipFree(memory) == hipErrorInvalidValue);
  CHECK(hipFree(nullptr) == hipSuccess);
  static_cast<void>(hipGetLastError());
}

TEST_CASE("__hipPushCallConfiguration and __hipPopCallConfiguration") {
  REQUIRE(__hipPushCallConfiguration(dim3(2, 3, 4), dim3(64, 2, 1), 512, hipStreamPerThread) == hipSuccess);
  dim3 grid, block;
  std::size_t shared = 0;
  hipStream_t popped = nullptr;
  REQUIRE(__hipPopCallConfiguration(&grid, &block, &shared, &popped) == hipSuccess);
  CHECK((grid.x == 2 && grid.y == 3 && grid.z == 4));
  CHECK((block.x == 64 && block.y == 2 && block.z == 1));
  CHECK(shared == 512);
  CHECK(popped == hipStreamPerThread);
  CHECK(__hipPopCallConfiguration(&grid, &block, &shared, &popped) == hipErrorMissingConfiguration);
  static_cast<void>(hipGetLastError());
}

namespace {
constexpr const char* no_device_test =
    "no device: HIP_DOUBLE_NO_DEVICE set to 1 makes every call fail with hipErrorNoDevice";
// The exit status of the process that ran that test with the variable set, when all its checks
// passed: not 0, which a process that ran no test at all would give.
constexpr int no_device_passed = 42;
}  // namespace

TEST_CASE(no_device_test) {
  if (std::getenv("HIP_DOUBLE_NO_DEVICE") == nullptr) {
    // The double reads the variable at its first call, long made in this process: this test runs
    // again, alone, in a new process that has it.
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      setenv("HIP_DOUBLE_NO_DEVICE", "1", 1);
      const std::string filter = std::string{"--test-case="} + no_device_test;
      execl("/proc/self/exe", "hip_double_selftest", filter.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == no_device_passed);
    return;
  }
  // In that process: REQUIRE, so that any failure ends the test before the exit below.
  int count = -1;
  REQUIRE(hipGetDeviceCount(&count) == hipErrorNoDevice);
  REQUIRE(count == 0);
  hipDeviceProp_t properties{};
  REQUIRE(hipGetDeviceProperties(&properties, 0) == hipErrorNoDevice);
  REQUIRE(hipGetDevice(&count) == hipErrorNoDevice);
  REQUIRE(hipSetDevice(0) == hipErrorNoDevice);
  REQUIRE(hipRuntimeGetVersion(&count) == hipErrorNoDevice);
  void* memory = nullptr;
  REQUIRE(hipMalloc(&memory, 64) == hipErrorNoDevice);
  hipStream_t s = nullptr;
  REQUIRE(hipStreamCreate(&s) == hipErrorNoDevice);
  hipEvent_t e = nullptr;
  REQUIRE(hipEventCreate(&e) == hipErrorNoDevice);
  REQUIRE(launch(1, nullptr) == hipErrorNoDevice);
  unsigned char bytes[2]{};
  REQUIRE(hipMemcpy(bytes, bytes + 1, 1, hipMemcpyHostToHost) == hipErrorNoDevice);
  REQUIRE(hipDeviceSynchronize() == hipErrorNoDevice);
  REQUIRE(hipGetLastError() == hipErrorNoDevice);
  REQUIRE(std::string_view{hipGetErrorString(hipErrorNoDevice)} == "hipErrorNoDevice");
  std::_Exit(no_device_passed);
}
