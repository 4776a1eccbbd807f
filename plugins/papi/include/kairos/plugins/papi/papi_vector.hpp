#pragma once
// kairos::papi_vector — PAPI events chosen at run time, counted on the calling thread.
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <kairos/plugins/papi/event_counters.hpp>

namespace kairos {

class papi_vector : public papi::event_counters {
 public:
  static constexpr bool available_at_build = true;
  static constexpr std::string_view label() { return "papi_vector"; }
  static constexpr std::string_view description() {
    return "PAPI counters (presets or native events) of the calling thread, chosen at run time";
  }
  static constexpr std::string_view unit() { return "count"; }
  static constexpr std::array<std::string_view, 2> default_event_names{"PAPI_TOT_INS", "PAPI_TOT_CYC"};

  papi_vector() : papi_vector(default_event_names) {}
  papi_vector(std::initializer_list<std::string_view> event_names)
      : papi_vector(std::span<const std::string_view>{event_names.begin(), event_names.size()}) {}
  template <std::ranges::input_range Names>
  requires std::convertible_to<std::ranges::range_reference_t<Names>, std::string_view>
  explicit papi_vector(const Names& event_names) : event_counters(event_names) {}

  // Totals of the events that count here, in the order asked for; value_labels() names them.
  std::vector<double> get() const {
    std::vector<double> values;
    for (std::size_t index = 0; index < size(); ++index)
      if (counting(index)) values.push_back(static_cast<double>(total(index)));
    return values;
  }
  std::vector<std::string_view> value_labels() const {
    std::vector<std::string_view> labels;
    for (std::size_t index = 0; index < size(); ++index)
      if (counting(index)) labels.push_back(name(index));
    return labels;
  }
  std::optional<double> value_of(std::string_view event_name) const {
    for (std::size_t index = 0; index < size(); ++index)
      if (name(index) == event_name && counting(index)) return static_cast<double>(total(index));
    return std::nullopt;
  }
};

}  // namespace kairos
