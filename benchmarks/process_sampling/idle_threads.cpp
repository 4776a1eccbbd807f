// The program process sampling's cost is measured on (cost.py): N threads that sleep for S seconds,
// so that what kairos's own threads use stands out. One user-API region at the start creates the
// profile database, where process sampling's rows go.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <kairos/user.h>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 8;
  kairos_push_region("start");
  kairos_pop_region("start");
  const auto length = std::chrono::duration<double>(seconds);
  std::vector<std::thread> sleepers;
  for (int i = 1; i < threads; ++i) sleepers.emplace_back([length] { std::this_thread::sleep_for(length); });
  std::this_thread::sleep_for(length);
  for (auto& sleeper : sleepers) sleeper.join();
  std::printf("slept %.3f s in %d threads\n", seconds, threads);
  return 0;
}
