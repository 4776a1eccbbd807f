#pragma once
// A clock whose readings the test scripts, so statistics and reports have exact expected values.
#include <cstddef>
#include <string_view>
#include <vector>

namespace kairos::testing {

struct scripted_clock {
  static constexpr std::string_view label() { return "scripted_clock"; }
  static constexpr std::string_view unit() { return "ms"; }

  static void play(std::vector<double> readings) {
    script() = std::move(readings);
    next() = 0;
  }
  static double record() { return next() < script().size() ? script()[next()++] : 0.0; }
  void start() { at_start = record(); }
  void stop() { total += record() - at_start; }
  double get() const { return total; }

  double at_start = 0;
  double total = 0;

 private:
  static std::vector<double>& script() {
    static std::vector<double> readings;
    return readings;
  }
  static std::size_t& next() {
    static std::size_t position = 0;
    return position;
  }
};

}  // namespace kairos::testing
