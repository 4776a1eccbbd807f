#pragma once
// kairos::papi_vector and kairos::papi_array<N> when libpapi-dev was absent at configure time:
// same names and metadata, count nothing, and say why.
#include <array>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kairos {
namespace papi {
struct unavailable_at_build {
  static constexpr bool available_at_build = false;
  static constexpr std::string_view unit() { return "count"; }
  static bool available(std::string_view = {}) { return false; }
  static std::string unavailable_reason(std::string_view = {}) {
    return "PAPI: kairos was configured without libpapi-dev (papi.h and libpapi.so not found); "
           "install it and reconfigure";
  }
  void start() noexcept {}
  void stop() noexcept {}
};
}  // namespace papi

class papi_vector : public papi::unavailable_at_build {
 public:
  static constexpr std::string_view label() { return "papi_vector"; }
  static constexpr std::string_view description() { return "PAPI counters (not built)"; }
  papi_vector() = default;
  papi_vector(std::initializer_list<std::string_view>) {}
  template <class Names>
  explicit papi_vector(const Names&) {}
  std::vector<double> get() const { return {}; }
  std::vector<std::string_view> value_labels() const { return {}; }
  std::optional<double> value_of(std::string_view) const { return std::nullopt; }
};

template <std::size_t N>
class papi_array : public papi::unavailable_at_build {
 public:
  static constexpr std::string_view label() { return "papi_array"; }
  static constexpr std::string_view description() { return "PAPI counters (not built)"; }
  template <class... Names>
  explicit papi_array(Names...) {}
  std::array<double, N> get() const noexcept {
    std::array<double, N> values;
    values.fill(std::numeric_limits<double>::quiet_NaN());
    return values;
  }
};

}  // namespace kairos
