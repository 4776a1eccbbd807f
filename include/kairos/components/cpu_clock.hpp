#pragma once
#include <cstdint>
#include <string_view>

#include <kairos/components/phase_total.hpp>
#include <kairos/components/posix_clock.hpp>

namespace kairos {

// CPU time of the whole process (all threads, user + kernel).
struct cpu_clock {
  using value_type = std::int64_t;  // nanoseconds

  static constexpr std::string_view label() { return "cpu_clock"; }
  static constexpr std::string_view description() { return "CPU time of the process, all threads"; }
  static constexpr std::string_view unit() { return "ms"; }

  static value_type record() noexcept { return detail::posix_clock_ns<CLOCK_PROCESS_CPUTIME_ID>(); }
  void start() noexcept { phase.begin(record()); }
  void stop() noexcept { phase.end(record()); }

  std::int64_t total_ns() const noexcept { return phase.total; }
  double get() const noexcept { return static_cast<double>(phase.total) * 1e-6; }

 private:
  phase_total<value_type> phase;
};

}  // namespace kairos
