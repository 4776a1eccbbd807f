#pragma once
#include <cstdint>
#include <string_view>

#include <kairos/components/rusage_cache.hpp>

namespace kairos {

// Growth of the process's peak resident set size during the phase (record() gives the peak itself).
struct peak_rss : rusage_component<peak_rss, std::int64_t> {
  static constexpr std::string_view label() { return "peak_rss"; }
  static constexpr std::string_view description() {
    return "growth of the process's peak resident memory (high-water mark)";
  }
  static constexpr std::string_view unit() { return "MiB"; }
  // A high-water mark: a parent's growth is not the sum of its children's.
  static constexpr bool additive = false;

  static std::int64_t read(const rusage_cache& cache) noexcept {
    return std::int64_t{cache.usage.ru_maxrss} * 1024;  // Linux reports KiB
  }
  std::int64_t total_bytes() const noexcept { return total(); }
  double get() const noexcept { return static_cast<double>(total()) / (1024.0 * 1024.0); }
};

}  // namespace kairos
