#pragma once
// kairos::gpu components: GPU work issued inside a region by the calling thread, observed through
// the HIP runtime (and CUDA's, through CUPTI, where kairos was built with the toolkit). The first
// use starts the collector (collector.hpp), which wraps the runtime loaded in this process; with
// no runtime or no device, available() is false and unavailable_reason() says why, in the
// runtime's own words. See docs/plugins/gpu.md.
//
//   kairos::auto_tuple<kairos::wall_clock, kairos::gpu_kernel_time, kairos::gpu_memcpy_bytes> r{"solve"};
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kairos/components/phase_total.hpp>
#include <kairos/plugins/gpu/activity.hpp>
#include <kairos/plugins/gpu/collector.hpp>

namespace kairos {
namespace gpu {

// Starts the collector once (components, or a program of its own); the backends' state.
const std::vector<backend_status>& ensure_started();
// Why no GPU work can be observed here ("" when some can): each backend's reason.
std::string unavailable_reason();
// How long get() waits for device times of work still running (kairos's own events only).
inline constexpr std::int64_t device_time_wait_ns = 2'000'000'000;

}  // namespace gpu

// Host time the calling thread spent inside GPU API calls (launches, copies, allocation,
// synchronisation), kairos's own overhead excluded.
struct gpu_api_time {
  using value_type = std::int64_t;  // ns
  static constexpr std::string_view label() { return "gpu_api_time"; }
  static constexpr std::string_view description() {
    return "host time in GPU runtime API calls (HIP, CUDA) on this thread";
  }
  static constexpr std::string_view unit() { return "ms"; }
  static bool available() { return gpu::unavailable_reason().empty(); }
  static std::string unavailable_reason() { return gpu::unavailable_reason(); }

  static value_type record() { return gpu::current_thread_tally().api_ns; }
  void start() {
    gpu::ensure_started();
    phase.begin(record());
  }
  void stop() { phase.end(record()); }
  double get() const { return static_cast<double>(phase.total) * 1e-6; }

 private:
  phase_total<value_type> phase;
};

// Bytes the calling thread copied (and set) on GPUs, in total and by direction.
struct gpu_memcpy_bytes {
  using value_type = std::array<std::uint64_t, 7>;  // by gpu::copy_kind
  static constexpr std::string_view label() { return "gpu_memcpy_bytes"; }
  static constexpr std::string_view description() {
    return "bytes copied to, from and on GPUs (memset included) by this thread";
  }
  static constexpr std::string_view unit() { return "MB"; }
  static bool available() { return gpu::unavailable_reason().empty(); }
  static std::string unavailable_reason() { return gpu::unavailable_reason(); }

  static value_type record() { return gpu::current_thread_tally().copy_bytes; }
  void start() {
    gpu::ensure_started();
    phase.begin(record());
  }
  void stop() { phase.end(record()); }
  std::uint64_t bytes(gpu::copy_kind kind) const { return phase.total[static_cast<std::size_t>(kind)]; }
  std::uint64_t total_bytes() const {
    std::uint64_t sum = 0;
    for (const auto bytes : phase.total) sum += bytes;
    return sum;
  }
  double get() const { return static_cast<double>(total_bytes()) * 1e-6; }

 private:
  phase_total<value_type> phase;
};

namespace gpu {
// Device time of the work (kernels or copies) the calling thread issued between start and stop.
// Resolved when read, never at stop: get() waits, up to device_time_wait_ns, for kairos's own
// events of work still running (the program's streams are not waited on). -1 ms when some of it
// could not be resolved.
template <bool Copies>
struct device_time {
  using value_type = std::uint64_t;  // ordinal of the thread's next kernel or copy
  static bool available() { return gpu::unavailable_reason().empty(); }
  static std::string unavailable_reason() { return gpu::unavailable_reason(); }
  static constexpr std::string_view unit() { return "ms"; }

  static value_type record() {
    const auto tally = current_thread_tally();
    return Copies ? tally.copies_issued : tally.kernels_launched;
  }
  void start() {
    ensure_started();
    ledger = this_thread_device_ledger();
    first = record();
  }
  void stop() {
    const auto last = record();
    issued_count += last - first;
    if (!ranges.empty() && ranges.back().second == first)
      ranges.back().second = last;
    else if (last > first)
      ranges.emplace_back(first, last);
  }
  std::uint64_t issued() const { return issued_count; }
  std::int64_t device_ns() const {
    for (const auto& [from, to] : ranges) {
      const auto ns = Copies ? copy_device_ns(ledger, from, to, device_time_wait_ns)
                             : kernel_device_ns(ledger, from, to, device_time_wait_ns);
      if (ns < 0)
        unresolved = true;
      else
        resolved_ns += ns;
    }
    ranges.clear();
    return unresolved ? -1 : resolved_ns;
  }
  double get() const {
    const auto ns = device_ns();
    return ns < 0 ? -1.0 : static_cast<double>(ns) * 1e-6;
  }

 private:
  device_ledger_handle ledger = nullptr;
  value_type first = 0;
  std::uint64_t issued_count = 0;
  // Issued but not yet read; consecutive laps share one range.
  mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  mutable std::int64_t resolved_ns = 0;
  mutable bool unresolved = false;
};
}  // namespace gpu

// Device time of the kernels the calling thread launched inside the region.
struct gpu_kernel_time : gpu::device_time<false> {
  static constexpr std::string_view label() { return "gpu_kernel_time"; }
  static constexpr std::string_view description() {
    return "device time of the GPU kernels this thread launched in the region";
  }
};

// Device time of the copies (and memsets) the calling thread issued inside the region.
struct gpu_memcpy_time : gpu::device_time<true> {
  static constexpr std::string_view label() { return "gpu_memcpy_time"; }
  static constexpr std::string_view description() {
    return "device time of the GPU copies and memsets this thread issued in the region";
  }
};

}  // namespace kairos
