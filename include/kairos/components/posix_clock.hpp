#pragma once
// A clock_gettime() reading in nanoseconds: what cpu_clock and thread_cpu_clock share.
#include <cstdint>
#include <ctime>

namespace kairos::detail {

template <clockid_t Clock>
inline std::int64_t posix_clock_ns() noexcept {
  timespec now{};
  clock_gettime(Clock, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace kairos::detail
