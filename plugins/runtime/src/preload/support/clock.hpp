#pragma once
// The runtime's one clock for spans and deadlines: CLOCK_MONOTONIC, the profile database's clock.
#include <time.h>

#include <cstdint>

namespace kairos::runtime {

inline std::int64_t to_ns(const timespec& time) noexcept { return time.tv_sec * 1'000'000'000ll + time.tv_nsec; }

// Async-signal-safe (clock_gettime is).
inline std::int64_t steady_now_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return to_ns(now);
}

}  // namespace kairos::runtime
