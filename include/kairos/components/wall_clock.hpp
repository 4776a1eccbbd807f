#pragma once
#include <chrono>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <kairos/components/phase_total.hpp>

namespace kairos {

// Elapsed real time, from the steady (monotonic) clock.
struct wall_clock {
  using value_type = std::int64_t;  // nanoseconds

  static constexpr std::string_view label() { return "wall_clock"; }
  static constexpr std::string_view description() { return "real (wall-clock) time, steady clock"; }
  static constexpr std::string_view unit() { return "ms"; }

  static value_type record() noexcept { return std::chrono::steady_clock::now().time_since_epoch().count(); }
  void start() noexcept { phase.begin(record()); }
  void stop() noexcept { phase.end(record()); }

  std::int64_t total_ns() const noexcept { return phase.total; }
  // The steady-clock reading (ns) at the last start(): with total_ns() after one lap, a span.
  std::int64_t last_start_ns() const noexcept { return phase.at_start; }
  double get() const noexcept { return static_cast<double>(phase.total) * 1e-6; }

 private:
  static_assert(std::is_same_v<std::chrono::steady_clock::period, std::nano>);
  phase_total<value_type> phase;
};

}  // namespace kairos
