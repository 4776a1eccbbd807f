// A host-only HIP program for the GPU plugin's tests: built with g++ against HIP's headers and linked
// against the real runtime (libamdhip64.so.5); run with LD_LIBRARY_PATH naming the HIP test double
// (hip_double/) it runs its plan there, and on the real runtime of a machine without a GPU it shows
// the no-device path.
//
// Its "kernels" are ordinary host functions, as the stubs hipcc generates are: the double never calls
// them, and since they are registered with no runtime, the runtime gives no names for them; built
// with -rdynamic, their addresses resolve to dynamic symbols the host can symbolize (one C++ name,
// physics::integrate, to demangle; one extern "C", reduce_sum). By the double's convention a
// kernel's FIRST argument is its duration in nanoseconds (std::uint64_t).
//
// Usage: hip_program [plan]. A plan is steps separated by ';', each words separated by spaces:
//   kernel <stream> <integrate|reduce_sum> <duration> <grid> <block> <shared bytes>
//                            hipLaunchKernel
//   h2d <bytes>              hipMemcpy, host to device (synchronous)
//   d2h <bytes> <stream>     hipMemcpyAsync, device to host
//   memset <bytes>           hipMemset (synchronous)
//   sync                     hipDeviceSynchronize
// <stream>: 0 is the null stream; any other name a stream created (hipStreamCreate) at its first
// use. <duration>: a number with ns, us or ms; <bytes>: a number, optionally with KiB or MiB;
// <grid>, <block>: XxYxZ. After the plan the program synchronizes the device and frees everything.
//
// Output: "hip_program: N kernels, M copies" on stdout (memsets count as copies), exit status 0.
// No device (hipGetDeviceCount fails or counts 0): "hip_program: no device: <hipGetErrorString>" on
// stderr, exit status 3. A failed call: its text and error on stderr, 1. A plan it cannot read: 2.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <hip/hip_runtime_api.h>

namespace physics {
void integrate(std::uint64_t duration_ns, float* data) { data[0] += static_cast<float>(duration_ns); }
}  // namespace physics

extern "C" void reduce_sum(std::uint64_t duration_ns, const float* in, float* out) {
  out[0] = in[0] + static_cast<float>(duration_ns);
}

namespace {

constexpr std::string_view default_plan =
    "h2d 1MiB; memset 64KiB;"
    " kernel A integrate 2ms 64x1x1 256x1x1 0;"
    " kernel A integrate 3ms 128x1x1 128x2x1 1024;"
    " kernel A integrate 4ms 256x2x1 64x4x1 2048;"
    " kernel B reduce_sum 5ms 32x1x1 256x1x1 0;"
    " d2h 512KiB A";

void check(hipError_t error, const char* call) {
  if (error == hipSuccess) return;
  std::fprintf(stderr, "hip_program: %s: %s (%s)\n", call, hipGetErrorName(error), hipGetErrorString(error));
  std::exit(1);
}
#define HIP_CHECK(call) check((call), #call)

struct step {
  enum { kernel, h2d, d2h, memset, sync } kind;
  std::string stream;     // kernel, d2h
  bool integrate = true;  // kernel: physics::integrate, else reduce_sum
  std::uint64_t duration_ns = 0;
  dim3 grid, block;
  std::uint64_t bytes = 0;  // kernel: shared memory
};

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(separator), text.size());
    if (end > 0) parts.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return parts;
}

std::string_view trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(' ');
  return first == std::string_view::npos ? std::string_view{}
                                         : text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// A number followed by one of `units` (suffix, multiplier); "" among them makes the unit optional.
std::optional<std::uint64_t> quantity(std::string_view word,
                                      std::initializer_list<std::pair<std::string_view, std::uint64_t>> units) {
  std::uint64_t number = 0;
  const auto [rest, error] = std::from_chars(word.data(), word.data() + word.size(), number);
  if (error != std::errc{} || rest == word.data()) return std::nullopt;
  const std::string_view unit{rest, static_cast<std::size_t>(word.data() + word.size() - rest)};
  for (const auto& [suffix, multiplier] : units)
    if (unit == suffix) return number * multiplier;
  return std::nullopt;
}
std::optional<std::uint64_t> duration(std::string_view word) {
  return quantity(word, {{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}});
}
std::optional<std::uint64_t> bytes(std::string_view word) {
  return quantity(word, {{"", 1}, {"KiB", 1024}, {"MiB", 1024 * 1024}});
}
std::optional<dim3> dimensions(std::string_view word) {
  const auto parts = split(word, 'x');
  if (parts.size() != 3) return std::nullopt;
  unsigned sizes[3]{};
  for (int i = 0; i < 3; ++i) {
    const auto size = quantity(parts[i], {{"", 1}});
    if (!size || *size == 0 || *size > 0xffffffffu) return std::nullopt;
    sizes[i] = static_cast<unsigned>(*size);
  }
  return dim3(sizes[0], sizes[1], sizes[2]);
}

std::optional<step> parse_step(std::string_view text) {
  const auto words = split(text, ' ');
  if (words.empty()) return std::nullopt;
  step s{};
  if (words[0] == "kernel" && words.size() == 7 && (words[2] == "integrate" || words[2] == "reduce_sum")) {
    const auto time = duration(words[3]);
    const auto grid = dimensions(words[4]), block = dimensions(words[5]);
    const auto shared = bytes(words[6]);
    if (!time || !grid || !block || !shared) return std::nullopt;
    s = {step::kernel, std::string{words[1]}, words[2] == "integrate", *time, *grid, *block, *shared};
  } else if ((words[0] == "h2d" || words[0] == "memset") && words.size() == 2) {
    const auto size = bytes(words[1]);
    if (!size) return std::nullopt;
    s.kind = words[0] == "h2d" ? step::h2d : step::memset;
    s.bytes = *size;
  } else if (words[0] == "d2h" && words.size() == 3) {
    const auto size = bytes(words[1]);
    if (!size) return std::nullopt;
    s.kind = step::d2h;
    s.bytes = *size;
    s.stream = words[2];
  } else if (words[0] == "sync" && words.size() == 1) {
    s.kind = step::sync;
  } else {
    return std::nullopt;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: hip_program [plan]\n");
    return 2;
  }
  std::vector<step> plan;
  for (const std::string_view text : split(argc == 2 ? std::string_view{argv[1]} : default_plan, ';')) {
    if (trimmed(text).empty()) continue;
    const auto parsed = parse_step(trimmed(text));
    if (!parsed) {
      std::fprintf(stderr, "hip_program: cannot read the step \"%.*s\"\n", static_cast<int>(text.size()), text.data());
      return 2;
    }
    plan.push_back(*parsed);
  }

  int devices = 0;
  if (hipError_t error = hipGetDeviceCount(&devices); error != hipSuccess || devices == 0) {
    std::fprintf(stderr, "hip_program: no device: %s\n",
                 hipGetErrorString(error != hipSuccess ? error : hipErrorNoDevice));
    return 3;
  }

  // One device buffer and one pinned host buffer, large enough for every copy and the kernels' data.
  std::uint64_t buffer_bytes = 4096;
  for (const step& s : plan)
    if (s.kind != step::kernel) buffer_bytes = std::max(buffer_bytes, s.bytes);
  void* device_buffer = nullptr;
  void* host_buffer = nullptr;
  HIP_CHECK(hipMalloc(&device_buffer, buffer_bytes));
  HIP_CHECK(hipHostMalloc(&host_buffer, buffer_bytes, hipHostMallocDefault));
  float* data = static_cast<float*>(device_buffer);

  std::map<std::string, hipStream_t, std::less<>> streams{{"0", nullptr}};
  auto stream_named = [&](const std::string& name) {
    auto found = streams.find(name);
    if (found == streams.end()) {
      hipStream_t created = nullptr;
      HIP_CHECK(hipStreamCreate(&created));
      found = streams.emplace(name, created).first;
    }
    return found->second;
  };

  int kernels = 0, copies = 0;
  for (const step& s : plan) {
    switch (s.kind) {
      case step::kernel: {
        std::uint64_t duration_ns = s.duration_ns;
        float* output = data + 1;
        void* integrate_args[] = {&duration_ns, &data};
        void* reduce_args[] = {&duration_ns, &data, &output};
        const void* function = s.integrate ? reinterpret_cast<const void*>(&physics::integrate)
                                           : reinterpret_cast<const void*>(&reduce_sum);
        HIP_CHECK(hipLaunchKernel(function, s.grid, s.block, s.integrate ? integrate_args : reduce_args, s.bytes,
                                  stream_named(s.stream)));
        ++kernels;
        break;
      }
      case step::h2d:
        HIP_CHECK(hipMemcpy(device_buffer, host_buffer, s.bytes, hipMemcpyHostToDevice));
        ++copies;
        break;
      case step::d2h:
        HIP_CHECK(hipMemcpyAsync(host_buffer, device_buffer, s.bytes, hipMemcpyDeviceToHost, stream_named(s.stream)));
        ++copies;
        break;
      case step::memset:
        HIP_CHECK(hipMemset(device_buffer, 0, s.bytes));
        ++copies;
        break;
      case step::sync:
        HIP_CHECK(hipDeviceSynchronize());
        break;
    }
  }
  HIP_CHECK(hipDeviceSynchronize());

  for (const auto& [name, stream] : streams)
    if (stream != nullptr) HIP_CHECK(hipStreamDestroy(stream));
  HIP_CHECK(hipHostFree(host_buffer));
  HIP_CHECK(hipFree(device_buffer));
  std::printf("hip_program: %d kernels, %d copies\n", kernels, copies);
  return 0;
}
