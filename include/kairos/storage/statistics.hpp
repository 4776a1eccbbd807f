#pragma once
// Running statistics of one measured value: count, sum, min, max, mean and variance (Welford's
// update, numerically stable), and the exact merge of two such summaries (Chan et al.).
#include <cstdint>
#include <limits>

namespace kairos {

// Every recording file includes this header, so it does without <algorithm> and <cmath> (std::min
// and std::max written out; the compiler's sqrt, which std::sqrt is): those headers were a
// noticeable part of each such file's compile time (docs/performance-log.md, "Measured reasons in
// the code").
struct statistics {
  std::uint64_t count = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double mean = 0;
  double squared_deviations = 0;  // sum of (x - mean)^2, Welford's M2

  constexpr void add(double value) noexcept {
    ++count;
    sum += value;
    min = value < min ? value : min;
    max = max < value ? value : max;
    const double delta = value - mean;
    mean += delta / static_cast<double>(count);
    squared_deviations += delta * (value - mean);
  }

  constexpr void merge(const statistics& other) noexcept {
    if (other.count == 0) return;
    if (count == 0) {
      *this = other;
      return;
    }
    const double total = static_cast<double>(count + other.count);
    const double delta = other.mean - mean;
    squared_deviations += other.squared_deviations +
                          delta * delta * static_cast<double>(count) * static_cast<double>(other.count) / total;
    mean += delta * static_cast<double>(other.count) / total;
    count += other.count;
    sum += other.sum;
    min = other.min < min ? other.min : min;
    max = max < other.max ? other.max : max;
  }

  // Sample variance (n - 1 in the denominator) of the recorded values; 0 for fewer than two.
  double variance() const noexcept { return count > 1 ? squared_deviations / static_cast<double>(count - 1) : 0.0; }
  double stddev() const noexcept { return __builtin_sqrt(variance()); }

  friend bool operator==(const statistics&, const statistics&) = default;
};

}  // namespace kairos
