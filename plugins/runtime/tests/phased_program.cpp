// The time windows' test program (tests/windows_tests.py): three phases, each a known amount of
// CPU work in its own function, with an optional sleep between them, each inside a user-API
// region named after it.
//   phased_program SECONDS [SLEEP_SECONDS]
//     alpha() burns SECONDS of CPU time, sleeps SLEEP_SECONDS, beta() burns SECONDS, sleeps,
//     gamma() burns SECONDS. Prints each phase's monotonic start and end (ns) on stdout.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <kairos/user.h>

namespace {

std::int64_t now_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return now.tv_sec * 1'000'000'000ll + now.tv_nsec;
}

volatile std::uint64_t sink;

// Burns `seconds` of the thread's CPU time: the work is known whatever else the machine runs.
[[gnu::noinline]] void burn(double seconds) {
  const auto until = now_ns(CLOCK_THREAD_CPUTIME_ID) + static_cast<std::int64_t>(seconds * 1e9);
  std::uint64_t x = 1;
  while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
    for (int i = 0; i < 10'000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

[[gnu::noinline]] void alpha(double seconds) { burn(seconds); }
[[gnu::noinline]] void beta(double seconds) { burn(seconds); }
[[gnu::noinline]] void gamma_phase(double seconds) { burn(seconds); }

void phase(const char* name, void (*work)(double), double seconds) {
  const auto start = now_ns(CLOCK_MONOTONIC);
  kairos_push_region(name);
  work(seconds);
  kairos_pop_region(name);
  std::printf("%s %lld %lld\n", name, static_cast<long long>(start), static_cast<long long>(now_ns(CLOCK_MONOTONIC)));
}

void pause(double seconds) {
  if (seconds <= 0) return;
  const timespec interval{static_cast<time_t>(seconds),
                          static_cast<long>((seconds - static_cast<time_t>(seconds)) * 1e9)};
  nanosleep(&interval, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: phased_program SECONDS [SLEEP_SECONDS]\n");
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const double sleep_seconds = argc > 2 ? std::atof(argv[2]) : 0;
  phase("alpha", &alpha, seconds);
  pause(sleep_seconds);
  phase("beta", &beta, seconds);
  pause(sleep_seconds);
  phase("gamma", &gamma_phase, seconds);
  return 0;
}
