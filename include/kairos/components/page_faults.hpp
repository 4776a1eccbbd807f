#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include <kairos/components/rusage_cache.hpp>

namespace kairos {

// Page faults of the process: minor (no I/O: first touch, copy-on-write) and major (read from disk).
struct page_faults : rusage_component<page_faults, std::array<std::int64_t, 2>> {
  static constexpr std::string_view label() { return "page_faults"; }
  static constexpr std::string_view description() {
    return "page faults of the process: minor (no I/O) and major (needed I/O)";
  }
  static constexpr std::string_view unit() { return ""; }
  static constexpr std::array<std::string_view, 2> value_labels() { return {"minor", "major"}; }

  static value_type read(const rusage_cache& cache) noexcept { return {cache.usage.ru_minflt, cache.usage.ru_majflt}; }
  std::int64_t minor() const noexcept { return total()[0]; }
  std::int64_t major() const noexcept { return total()[1]; }
  value_type get() const noexcept { return total(); }
};

}  // namespace kairos
