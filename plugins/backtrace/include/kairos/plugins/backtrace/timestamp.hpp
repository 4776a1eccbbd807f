#pragma once
// kairos::backtrace_timestamp: the wall-clock time of a sample (CLOCK_REALTIME, nanoseconds since
// the Unix epoch), so samples line up with other processes' and with trace events.
// clock_gettime is async-signal-safe (POSIX), so this may be sampled from a signal handler.
#include <time.h>

#include <cstdint>
#include <string_view>

namespace kairos {

struct backtrace_timestamp {
  using value_type = std::int64_t;
  static constexpr bool available_at_build = true;

  std::int64_t wall_time_ns = 0;

  static constexpr std::string_view label() { return "backtrace_timestamp"; }
  static constexpr std::string_view description() { return "wall-clock time of the sample (since the Unix epoch)"; }
  static constexpr std::string_view unit() { return "ns"; }
  static bool available() noexcept { return true; }

  static std::int64_t record() noexcept {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  }
  void sample() noexcept { wall_time_ns = record(); }
  std::int64_t get() const noexcept { return wall_time_ns; }
};

}  // namespace kairos
