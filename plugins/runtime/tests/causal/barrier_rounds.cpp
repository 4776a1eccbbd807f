// Causal profiling's toy for rounds shorter than a sample period (issue 39): thread A does 3 units
// of work in a_work, thread B 2 units in b_work, a unit about 0.1 ms, and they meet at a barrier
// every round (0.3 ms, under the 1 ms sample period); A marks a progress point per round.
// Speeding a_work up by s speeds the program up by s until s = 1/3 and by 1/3 beyond; speeding
// b_work up changes nothing.
//
//   barrier_rounds std|condvar SECONDS [A_FACTOR [B_FACTOR]]
// std: a std::barrier (a futex kairos must see); condvar: a mutex and a condition variable.
// Prints the rounds per second on stdout, then per CPU second of the busiest thread (which
// counts std::barrier's spinning: condvar's is the rate to trust).
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "toy.hpp"

namespace {

constexpr long iterations_per_unit = 80'000;  // about 0.1 ms here

double a_factor = 1, b_factor = 1;
std::chrono::steady_clock::time_point deadline;
bool done = false;  // decided by A between the two meetings of a round
long rounds = 0;

[[gnu::noinline]] unsigned long a_work() {
  auto result = causal_toy::work(3 * a_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}
[[gnu::noinline]] unsigned long b_work() {
  auto result = causal_toy::work(2 * b_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}

// A barrier of two threads on a mutex and a condition variable.
class condvar_barrier {
 public:
  void arrive_and_wait() {
    std::unique_lock lock{mutex_};
    const auto generation = generation_;
    if (++arrived_ == 2) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long generation_ = 0;
};

template <class Barrier>
void run(Barrier& meet) {
  unsigned long sink_a = 0, sink_b = 0;
  std::thread a{[&] {
    for (;;) {
      sink_a += a_work();
      meet.arrive_and_wait();
      ++rounds;
      mark_progress("round");
      done = std::chrono::steady_clock::now() >= deadline;
      meet.arrive_and_wait();
      if (done) return causal_toy::note_thread_cpu();
    }
  }};
  std::thread b{[&] {
    for (;;) {
      sink_b += b_work();
      meet.arrive_and_wait();
      meet.arrive_and_wait();
      if (done) return causal_toy::note_thread_cpu();
    }
  }};
  a.join();
  b.join();
  std::printf("checksum %lu\n", (sink_a ^ sink_b) & 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[1], "std") != 0 && std::strcmp(argv[1], "condvar") != 0)) {
    std::fprintf(stderr, "usage: %s std|condvar SECONDS [A_FACTOR [B_FACTOR]]\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[2]);
  if (argc > 3) a_factor = std::atof(argv[3]);
  if (argc > 4) b_factor = std::atof(argv[4]);
  const auto start = std::chrono::steady_clock::now();
  deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  if (std::strcmp(argv[1], "std") == 0) {
    std::barrier meet{2};
    run(meet);
  } else {
    condvar_barrier meet;
    run(meet);
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rounds per second: %.3f (%ld rounds)\n", rounds / elapsed, rounds);
  causal_toy::print_cpu_rates("rounds", rounds);
  return 0;
}
