// Causal profiling's fork-join toy (docs/causal.md, "Validation"): each round the main thread
// starts a worker through std::counting_semaphore, does its own share, and waits for the worker on
// a std::latch, then marks a progress point. The worker does 3 units of work in left_work, the
// main thread 2 units in right_work, a unit about 0.5 ms. A round lasts max(left, right):
// speeding left_work up by s speeds the program up by s until s = 1/3 and by 1/3 beyond; speeding
// right_work up changes nothing. Every wait is a futex in the program's own code (libstdc++'s
// atomic wait), none a pthread function. Two threads, so that a 2-core machine gives each its
// core (with a third thread, one that mostly waits, the cores were shared at every round's start
// and predictions moved with the machine's scheduling).
//
//   fork_join SECONDS [LEFT_FACTOR [RIGHT_FACTOR]]   (factors scale each share's work)
// Prints the rounds per second on stdout, then per CPU second of the busiest thread.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <optional>
#include <semaphore>
#include <thread>

#include "toy.hpp"

namespace {

constexpr long iterations_per_unit = 400'000;  // about 0.5 ms here

double left_factor = 1, right_factor = 1;
std::counting_semaphore<1> start_left{0};
// Round k's latch is round_done[k % 2], emplaced by main before it starts the worker: the worker
// may still be inside count_down when main's wait returns, so main reuses a latch only a round
// later, when the worker has started (and so left) the next one.
std::optional<std::latch> round_done[2];
long round_number = 0;  // written by main before it starts the worker
bool done = false;      // set by main before the last start
unsigned long sink_left = 0, sink_right = 0;

[[gnu::noinline]] unsigned long left_work() {
  auto result = causal_toy::work(3 * left_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}
[[gnu::noinline]] unsigned long right_work() {
  auto result = causal_toy::work(2 * right_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}

void worker() {
  for (;;) {
    start_left.acquire();
    if (done) return causal_toy::note_thread_cpu();
    sink_left += left_work();
    round_done[round_number % 2]->count_down();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SECONDS [LEFT_FACTOR [RIGHT_FACTOR]]\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  if (argc > 2) left_factor = std::atof(argv[2]);
  if (argc > 3) right_factor = std::atof(argv[3]);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  std::thread left{worker};
  long rounds = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    round_number = rounds;
    auto& latch = round_done[rounds % 2].emplace(2);
    start_left.release();
    sink_right += right_work();
    latch.arrive_and_wait();
    ++rounds;
    mark_progress("round");
  }
  done = true;
  start_left.release();
  left.join();
  causal_toy::note_thread_cpu();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rounds per second: %.3f (%ld rounds, checksum %lu)\n", rounds / elapsed, rounds,
              (sink_left ^ sink_right) & 1);
  causal_toy::print_cpu_rates("rounds", rounds);
  return 0;
}
