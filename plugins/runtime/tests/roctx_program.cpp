// A program annotated with ROCTx, knowing nothing of kairos (tests/annotations_tests.py); linked
// to roctx_double.cpp's stand-in library. It prints the levels ROCTx returned, which kairos's
// wrappers must pass through unchanged.
//   roctx_program STEPS   STEPS ranges "step", each around 2 ranges "substep", a mark "event" in
//                         each step, and 2 start/stop ranges "load"
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
int roctxRangePushA(const char* message);
int roctxRangePop();
void roctxMarkA(const char* message);
std::uint64_t roctxRangeStartA(const char* message);
void roctxRangeStop(std::uint64_t id);
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  long levels = 0;
  for (int load = 0; load < 2; ++load) {
    const auto id = roctxRangeStartA("load");
    for (int step = 0; step < steps; ++step) {
      levels += roctxRangePushA("step");
      roctxMarkA("event");
      for (int substep = 0; substep < 2; ++substep) {
        levels += roctxRangePushA("substep");
        levels += roctxRangePop();
      }
      levels += roctxRangePop();
    }
    roctxRangeStop(id);
  }
  std::printf("steps %d levels %ld\n", steps, levels);
  return 0;
}
