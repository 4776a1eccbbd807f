#pragma once
#include <string_view>

#include <kairos/components/posix_clock.hpp>

namespace kairos {

// CPU time of the calling thread (user + kernel). Start and stop on the same thread.
struct thread_cpu_clock : detail::posix_clock_component<CLOCK_THREAD_CPUTIME_ID> {
  static constexpr std::string_view label() { return "thread_cpu_clock"; }
  static constexpr std::string_view description() { return "CPU time of the calling thread"; }
  static constexpr std::string_view unit() { return "ms"; }
};

}  // namespace kairos
