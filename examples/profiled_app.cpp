// An ordinary program for kairos-run to profile: two threads, three functions with known shares of
// the CPU time, and a few user-API regions. It runs the same with or without kairos.
//
//   kairos-run -- ./profiled_app
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include <kairos/user.h>

namespace {

// Each call burns about the same CPU time, so the shares follow the call counts.
[[gnu::noinline]] double integrate(int round) {
  double sum = 0;
  for (int i = 1; i < 2'000'000; ++i) sum += std::sin(i * 1e-6 * round) / i;
  return sum;
}

[[gnu::noinline]] double transform(int round) {
  double sum = 0;
  for (int i = 1; i < 2'000'000; ++i) sum += std::sqrt(i + round) * 1e-9;
  return sum;
}

[[gnu::noinline]] double reduce(const std::vector<double>& values, int round) {
  double sum = 0;
  for (int pass = 0; pass < 40; ++pass)
    for (double value : values) sum += std::cbrt(value + pass + round);
  return sum;
}

double solver(int rounds) {
  kairos::scoped_region region{"solver"};
  double sum = 0;
  for (int round = 0; round < rounds; ++round) {
    kairos::scoped_region step{"step"};
    sum += integrate(round) + 0.5 * transform(round) + integrate(round + 1);
  }
  return sum;
}

double postprocess(int rounds) {
  kairos::scoped_region region{"postprocess"};
  std::vector<double> values(50'000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  double sum = 0;
  for (int round = 0; round < rounds; ++round) sum += reduce(values, round);
  return sum;
}

}  // namespace

int main() {
  double solved = 0, processed = 0;
  std::thread worker{[&] { processed = postprocess(20); }};
  solved = solver(60);
  worker.join();
  std::printf("solver %.6f, postprocess %.6f\n", solved, processed);
}
