#pragma once
// What producers read of the time windows (docs/windows.md): whether windows govern collection,
// whether one is open now and its ordinal. Written only by the windows thread (windows.cpp); a
// producer's hot path reads two relaxed atomics. A region that was open across an edge asks for
// the windows it overlapped (a lock, taken only then).
#include <atomic>
#include <cstdint>
#include <limits>

namespace kairos::runtime {

namespace window_state_detail {
inline std::atomic<bool> governed{false};  // a plan was given: collect only inside windows
inline std::atomic<bool> open{false};
inline std::atomic<std::int32_t> ordinal{0};  // of the open window, else of the last one
inline std::atomic<std::uint64_t> edges{0};   // openings and closings so far
}  // namespace window_state_detail

inline bool windows_govern() noexcept { return window_state_detail::governed.load(std::memory_order_relaxed); }
// Whether producers collect now: always without windows.
inline bool inside_window() noexcept {
  return !windows_govern() || window_state_detail::open.load(std::memory_order_acquire);
}
// What a row records as its window: 0 without windows.
inline std::int32_t current_window() noexcept { return window_state_detail::ordinal.load(std::memory_order_relaxed); }
inline std::uint64_t window_edges() noexcept { return window_state_detail::edges.load(std::memory_order_acquire); }

// A window's span in CLOCK_MONOTONIC ns; close_ns is the maximum while it is open.
struct window_span {
  std::int32_t ordinal = 0;
  std::int64_t open_ns = 0;
  std::int64_t close_ns = std::numeric_limits<std::int64_t>::max();
};

// Calls `visit` for each of the last windows (up to 4,096) that overlap [from_ns, to_ns], oldest
// first. `visit` must not call back into kairos.
void for_each_window_between(std::int64_t from_ns, std::int64_t to_ns, void (*visit)(const window_span&, void*),
                             void* context);

template <class Visit>
void for_each_window_between(std::int64_t from_ns, std::int64_t to_ns, Visit&& visit) {
  for_each_window_between(
      from_ns, to_ns, [](const window_span& span, void* context) { (*static_cast<Visit*>(context))(span); }, &visit);
}

}  // namespace kairos::runtime
