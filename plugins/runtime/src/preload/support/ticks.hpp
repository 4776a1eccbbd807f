#pragma once
// The cheapest timestamp a hot path can take, converted to the runtime's clock (CLOCK_MONOTONIC
// ns) off the hot path. On x86-64 with an invariant TSC, a tick is a TSC cycle: rdtsc costs about
// 11 ns in these VMs where clock_gettime costs 28. Elsewhere a tick is a CLOCK_MONOTONIC ns.
#include <cstdint>
#include <mutex>

#include "preload/support/clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace kairos::runtime {

namespace detail {
inline bool ticks_are_tsc = false;  // set once, by calibrate_ticks(), before any hot path runs
}

// Async-signal-safe.
inline std::uint64_t read_ticks() noexcept {
#if defined(__x86_64__)
  if (detail::ticks_are_tsc) return __rdtsc();
#endif
  return static_cast<std::uint64_t>(steady_now_ns());
}

// Ticks to CLOCK_MONOTONIC ns: a line through two (ticks, ns) points, the first taken by
// calibrate_ticks(), the second moved later as the run goes on, so the slope's error (the two
// clock reads' jitter over their distance) shrinks with the run.
struct tick_converter {
  std::uint64_t origin_ticks = 0;
  std::int64_t origin_ns = 0;
  double ns_per_tick = 1;

  std::int64_t to_ns(std::uint64_t ticks) const noexcept {
    const auto since = static_cast<std::int64_t>(ticks - origin_ticks);  // negative before the origin
    return origin_ns + static_cast<std::int64_t>(static_cast<double>(since) * ns_per_tick);
  }
};

// Chooses the tick source and takes the first calibration (about 0.2 ms with a TSC). Call once,
// before the first read_ticks() whose value is converted.
void calibrate_ticks();
// The conversion as of now (refined when enough time has passed since the last refinement).
tick_converter current_tick_converter();

}  // namespace kairos::runtime
