// Regions recorded into the call graph from two threads, then the merged report printed: each
// thread records into its own graph, and the report joins them by label path.
#include <cmath>
#include <iostream>
#include <thread>
#include <vector>

#include <kairos/auto_tuple.hpp>
#include <kairos/components/cpu_clock.hpp>
#include <kairos/components/thread_cpu_clock.hpp>
#include <kairos/report.hpp>

double step(int size) {
  KAIROS_REGION("step");
  double sum = 0;
  for (int i = 0; i < size; ++i) sum += std::sqrt(static_cast<double>(i));
  return sum;
}

double solve(int steps) {
  kairos::auto_tuple<kairos::wall_clock, kairos::thread_cpu_clock> region{"solve"};
  double sum = 0;
  for (int i = 0; i < steps; ++i) sum += step(200'000);
  return sum;
}

int main() {
  double results[2] = {};
  std::thread worker{[&] { results[1] = solve(10); }};
  results[0] = solve(20);
  worker.join();
  kairos::print_report(std::cout);
  return results[0] > results[1] ? 0 : 1;
}
