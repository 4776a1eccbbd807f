#pragma once
// kairos::perf_counters where linux/perf_event.h is absent (not Linux, or no kernel headers):
// same name and metadata, counts nothing, and says why.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kairos {

class perf_counters {
 public:
  static constexpr bool available_at_build = false;
  static constexpr std::string_view label() { return "perf_counters"; }
  static constexpr std::string_view description() { return "perf_event counters (not built)"; }
  static constexpr std::string_view unit() { return ""; }
  static constexpr std::array<std::string_view, 5> default_event_names{"task-clock", "context-switches", "page-faults",
                                                                       "instructions", "cycles"};

  perf_counters() = default;
  template <class Names>
  explicit perf_counters(const Names&) {}
  perf_counters(std::initializer_list<std::string_view>) {}

  static bool available(std::string_view = {}) { return false; }
  static std::string unavailable_reason(std::string_view = {}) {
    return "perf_counters: built without linux/perf_event.h (install linux-libc-dev on Linux)";
  }
  void start() noexcept {}
  void stop() noexcept {}
  std::vector<double> get() const { return {}; }
  std::vector<std::string_view> value_labels() const { return {}; }
  std::vector<std::string_view> units() const { return {}; }
  std::optional<double> value_of(std::string_view) const { return std::nullopt; }
};

}  // namespace kairos
