#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include <kairos/components/rusage_cache.hpp>

namespace kairos {

// Context switches of the process: voluntary (it waited: I/O, a lock, sleep) and involuntary
// (the scheduler preempted it).
struct context_switches : rusage_component<context_switches, std::array<std::int64_t, 2>> {
  static constexpr std::string_view label() { return "context_switches"; }
  static constexpr std::string_view description() {
    return "context switches of the process: voluntary (waited) and involuntary (preempted)";
  }
  static constexpr std::string_view unit() { return ""; }
  static constexpr std::array<std::string_view, 2> value_labels() { return {"voluntary", "involuntary"}; }

  static value_type read(const rusage_cache& cache) noexcept { return {cache.usage.ru_nvcsw, cache.usage.ru_nivcsw}; }
  std::int64_t voluntary() const noexcept { return total()[0]; }
  std::int64_t involuntary() const noexcept { return total()[1]; }
  value_type get() const noexcept { return total(); }
};

}  // namespace kairos
