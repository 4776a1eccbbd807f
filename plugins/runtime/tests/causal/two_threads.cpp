// Causal profiling's first toy with a known answer (docs/causal.md, "Validation"): two threads
// meet at a barrier every round; thread A does 3 units of work in a_work, thread B 2 units in
// b_work, and A marks a progress point per round. A round lasts max(A, B): speeding a_work up by
// s shortens it to max(3(1-s), 2) units, so the program speeds up by s until s = 1/3 and by 1/3
// beyond; speeding b_work up changes nothing.
//
//   two_threads SECONDS [A_FACTOR [B_FACTOR]]   (factors scale each thread's work: a real speedup)
// Prints the rounds per second on stdout, then per CPU second of the busiest thread.
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "toy.hpp"

namespace {

constexpr long iterations_per_unit = 2'000'000;  // about 2.5 ms here: a round spans several sample periods

pthread_barrier_t round_end;
double a_factor = 1, b_factor = 1;
std::chrono::steady_clock::time_point deadline;
bool done = false;  // decided by A between the barriers, read by B after the second
long rounds = 0;

// A fixed amount of arithmetic the optimizer cannot drop or shorten.
// Each caller below keeps its frame (no tail call), so that a function-scope experiment finds it
// on the stack under work().
[[gnu::noinline]] unsigned long work(double units) {
  unsigned long state = 12345;
  const auto count = static_cast<long>(units * iterations_per_unit);
  for (long i = 0; i < count; ++i) {
    state = state * 6364136223846793005ul + 1442695040888963407ul;
    asm volatile("" : "+r"(state));
  }
  return state;
}

[[gnu::noinline]] unsigned long a_work() {
  auto result = work(3 * a_factor);
  asm volatile("" : "+r"(result));
  return result;
}
[[gnu::noinline]] unsigned long b_work() {
  auto result = work(2 * b_factor);
  asm volatile("" : "+r"(result));
  return result;
}

unsigned long sink = 0;

void* thread_a(void*) {
  for (;;) {
    sink += a_work();
    pthread_barrier_wait(&round_end);
    ++rounds;
    mark_progress("round");
    done = std::chrono::steady_clock::now() >= deadline;
    pthread_barrier_wait(&round_end);
    if (done) {
      causal_toy::note_thread_cpu();
      return nullptr;
    }
  }
}

void* thread_b(void*) {
  for (;;) {
    sink += b_work();
    pthread_barrier_wait(&round_end);
    pthread_barrier_wait(&round_end);
    if (done) {
      causal_toy::note_thread_cpu();
      return nullptr;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SECONDS [A_FACTOR [B_FACTOR]]\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  if (argc > 2) a_factor = std::atof(argv[2]);
  if (argc > 3) b_factor = std::atof(argv[3]);
  pthread_barrier_init(&round_end, nullptr, 2);
  const auto start = std::chrono::steady_clock::now();
  deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  pthread_t a, b;
  pthread_create(&a, nullptr, thread_a, nullptr);
  pthread_create(&b, nullptr, thread_b, nullptr);
  pthread_join(a, nullptr);
  pthread_join(b, nullptr);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rounds per second: %.3f (%ld rounds, checksum %lu)\n", rounds / elapsed, rounds, sink & 1);
  causal_toy::print_cpu_rates("rounds", rounds);
  return 0;
}
