#pragma once
// What cpu_clock and thread_cpu_clock share: a clock_gettime() clock read in nanoseconds,
// accumulated over start/stop phases and shown in milliseconds.
#include <cstdint>
#include <ctime>

#include <kairos/components/phase_total.hpp>

namespace kairos::detail {

template <clockid_t Clock>
inline std::int64_t posix_clock_ns() noexcept {
  timespec now{};
  clock_gettime(Clock, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

template <clockid_t Clock>
struct posix_clock_component {
  using value_type = std::int64_t;  // nanoseconds

  static value_type record() noexcept { return posix_clock_ns<Clock>(); }
  void start() noexcept { phase.begin(record()); }
  void stop() noexcept { phase.end(record()); }

  std::int64_t total_ns() const noexcept { return phase.total; }
  double get() const noexcept { return static_cast<double>(phase.total) * 1e-6; }

 private:
  phase_total<value_type> phase;
};

}  // namespace kairos::detail
