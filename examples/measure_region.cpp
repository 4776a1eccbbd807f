// Wall time, CPU time and peak-RSS growth around a workload, printed with fmt.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include <kairos/component_tuple.hpp>
#include <kairos/components/cpu_clock.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/wall_clock.hpp>

double solve(std::size_t size) {
  std::vector<double> values(size);
  for (std::size_t i = 0; i < size; ++i) values[i] = std::sqrt(static_cast<double>(i));
  double sum = 0;
  for (double value : values) sum += value;
  return sum;
}

int main() {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::peak_rss> region{"solve"};
  region.start();
  const double result = solve(8 << 20);  // 64 MiB of doubles
  region.stop();

  const auto [wall_ms, cpu_ms, peak_rss_mib] = region.get();
  fmt::print("{}: wall {:.2f} ms, cpu {:.2f} ms, peak_rss +{:.1f} MiB (result {:.6g})\n", region.label(), wall_ms,
             cpu_ms, peak_rss_mib, result);
}
