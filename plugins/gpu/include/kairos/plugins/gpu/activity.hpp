#pragma once
// What the GPU plugin observes, independent of the runtime that ran it (HIP or CUDA): devices,
// kernels, copies (memset included) and API calls. Times are host CLOCK_MONOTONIC nanoseconds:
// device timestamps are mapped onto the host clock by the backend (docs/plugins/gpu.md, "Clocks").
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kairos::gpu {

enum class runtime_api : std::uint8_t { hip, cuda };
constexpr std::string_view name_of(runtime_api api) { return api == runtime_api::hip ? "hip" : "cuda"; }

enum class copy_kind : std::uint8_t {
  host_to_device,
  device_to_host,
  device_to_device,
  host_to_host,
  peer,
  memset,
  unknown
};
constexpr std::string_view name_of(copy_kind kind) {
  constexpr std::array<std::string_view, 7> names{
      "host_to_device", "device_to_host", "device_to_device", "host_to_host", "peer", "memset", "unknown"};
  return names[static_cast<std::size_t>(kind)];
}

struct device_info {
  runtime_api api = runtime_api::hip;
  int index = 0;
  std::string name;
  std::string architecture;  // "sm_90" (CUDA compute capability) or "gfx90a" (AMD)
  std::uint64_t memory_bytes = 0;
  int multiprocessors = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
};

// Who asked for the work: the calling thread (gettid), when, and its call stack (leaf first; empty
// unless the host installed a stack capture, see collector.hpp).
struct call_site {
  std::int64_t tid = 0;
  std::int64_t call_ns = 0;
  std::vector<std::uint64_t> stack;
};

struct kernel_activity {
  runtime_api api = runtime_api::hip;
  int device = 0;
  std::uint64_t stream = 0;            // the runtime's stream handle (0: the default stream)
  std::string name;                    // demangled; "" when the runtime gave none (see function_address)
  std::uint64_t function_address = 0;  // the host stub launched (HIP), for the host to symbolize
  std::int64_t start_ns = 0, end_ns = 0;
  std::array<std::uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::uint32_t shared_bytes = 0;
  std::uint64_t correlation = 0;  // the launch's id, shared with its api_call
  call_site site;
};

struct copy_activity {
  runtime_api api = runtime_api::hip;
  int device = 0;
  std::uint64_t stream = 0;
  copy_kind kind = copy_kind::unknown;
  std::uint64_t bytes = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  bool asynchronous = false;
  std::uint64_t correlation = 0;
  call_site site;
};

struct api_call {
  runtime_api api = runtime_api::hip;
  std::string_view name;  // the function's name: static storage
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint64_t correlation = 0;
  std::int64_t tid = 0;
};

// What completed since the last take: handed to the host in one piece.
struct activity_batch {
  std::vector<device_info> devices;  // each device once, when first seen
  std::vector<kernel_activity> kernels;
  std::vector<copy_activity> copies;
  std::vector<api_call> calls;
  bool empty() const { return devices.empty() && kernels.empty() && copies.empty() && calls.empty(); }
};

}  // namespace kairos::gpu
