#pragma once
// kairos::papi_array<N> — N PAPI events fixed at construction; get() returns a std::array (no
// allocation on read), NaN for an event that cannot count here.
#include <array>
#include <cstddef>
#include <limits>
#include <string_view>

#include <kairos/plugins/papi/event_counters.hpp>

namespace kairos {

template <std::size_t N>
class papi_array : public papi::event_counters {
 public:
  static constexpr bool available_at_build = true;
  static constexpr std::string_view label() { return "papi_array"; }
  static constexpr std::string_view description() { return "a fixed number of PAPI counters of the calling thread"; }
  static constexpr std::string_view unit() { return "count"; }

  explicit papi_array(const std::array<std::string_view, N>& event_names) : event_counters(event_names) {
    for (std::size_t index = 0; index < N; ++index)
      for (std::size_t counted = 0; counted < size(); ++counted)
        if (name(counted) == event_names[index]) positions_[index] = counted;
  }
  template <class... Names>
  requires(sizeof...(Names) == N &&
           (std::convertible_to<Names, std::string_view> && ...)) explicit papi_array(Names... event_names)
      : papi_array(std::array<std::string_view, N>{std::string_view{event_names}...}) {}

  std::array<double, N> get() const noexcept {
    std::array<double, N> values;
    for (std::size_t index = 0; index < N; ++index)
      values[index] = counting(positions_[index]) ? static_cast<double>(total(positions_[index]))
                                                  : std::numeric_limits<double>::quiet_NaN();
    return values;
  }
  std::array<std::string_view, N> value_labels() const {
    std::array<std::string_view, N> labels;
    for (std::size_t index = 0; index < N; ++index) labels[index] = name(positions_[index]);
    return labels;
  }

 private:
  std::array<std::size_t, N> positions_{};  // a name given twice is counted once, shown twice
};

}  // namespace kairos
