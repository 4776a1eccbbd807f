#pragma once
#include <string_view>

#include <kairos/components/posix_clock.hpp>

namespace kairos {

// CPU time of the whole process (all threads, user + kernel).
struct cpu_clock : detail::posix_clock_component<CLOCK_PROCESS_CPUTIME_ID> {
  static constexpr std::string_view label() { return "cpu_clock"; }
  static constexpr std::string_view description() { return "CPU time of the process, all threads"; }
  static constexpr std::string_view unit() { return "ms"; }
};

}  // namespace kairos
