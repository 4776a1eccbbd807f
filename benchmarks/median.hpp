#pragma once
// The median of repeated measurements: what every kairos benchmark quotes.
#include <algorithm>
#include <vector>

namespace kairos::benchmarks {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// A median with its spread (the lowest and highest of the runs), printed as "median [min–max]".
struct spread {
  double median = 0, lowest = 0, highest = 0;
};
inline spread spread_of(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  return {median(values), values.front(), values.back()};
}

}  // namespace kairos::benchmarks
