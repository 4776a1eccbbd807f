#pragma once
#include <cstdint>
#include <string_view>

#include <kairos/components/rusage_cache.hpp>

namespace kairos {

// CPU time the process spent in user mode (getrusage; microsecond resolution).
struct user_clock : rusage_component<user_clock, std::int64_t> {
  static constexpr std::string_view label() { return "user_clock"; }
  static constexpr std::string_view description() { return "CPU time of the process in user mode"; }
  static constexpr std::string_view unit() { return "ms"; }

  static std::int64_t read(const rusage_cache& cache) noexcept { return rusage_cache::to_ns(cache.usage.ru_utime); }
  double get() const noexcept { return static_cast<double>(total()) * 1e-6; }
};

}  // namespace kairos
