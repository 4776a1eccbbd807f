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

// CLOCK_BOOTTIME and CLOCK_MONOTONIC read together: boot time against the midpoint of the monotonic
// reads around it. They part at every suspend; a trace that pairs them (Perfetto's ClockSnapshot)
// lands beside a system trace stamped in boot time.
struct clock_pair {
  std::int64_t boottime_ns, monotonic_ns;
};
inline clock_pair boottime_and_monotonic_ns() noexcept {
  timespec before{}, boot{}, after{};
  clock_gettime(CLOCK_MONOTONIC, &before);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  clock_gettime(CLOCK_MONOTONIC, &after);
  return {to_ns(boot), to_ns(before) + (to_ns(after) - to_ns(before)) / 2};
}

}  // namespace kairos::runtime
