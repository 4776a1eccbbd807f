// Causal profiling's second toy (docs/causal.md, "Validation"): a producer makes items (1 unit of
// work each, in produce_item) into a bounded queue, a consumer takes them (2 units each, in
// consume_item) and marks a progress point per item. The consumer is the bottleneck: speeding
// consume_item up by s raises throughput by 1/(1-s) until it meets the producer at s = 1/2 (the
// period shrinks by s until then); speeding produce_item up changes nothing.
//
//   pipeline SECONDS [PRODUCE_FACTOR [CONSUME_FACTOR]]
// Prints the items per second on stdout, then per CPU second of the busiest thread.
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include "toy.hpp"

namespace {

constexpr long iterations_per_unit = 2'000'000;  // about 2.5 ms here: a round spans several sample periods
constexpr std::size_t queue_limit = 16;

pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
std::deque<unsigned long> queue;
bool finished = false;
double produce_factor = 1, consume_factor = 1;
std::chrono::steady_clock::time_point deadline;
long consumed = 0;
unsigned long sink = 0;

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

[[gnu::noinline]] unsigned long produce_item() {
  auto result = work(1 * produce_factor);
  asm volatile("" : "+r"(result));
  return result;
}
[[gnu::noinline]] unsigned long consume_item(unsigned long item) {
  auto result = item ^ work(2 * consume_factor);
  asm volatile("" : "+r"(result));
  return result;
}

void* producer(void*) {
  while (std::chrono::steady_clock::now() < deadline) {
    const auto item = produce_item();
    pthread_mutex_lock(&mutex);
    while (queue.size() == queue_limit) pthread_cond_wait(&not_full, &mutex);
    queue.push_back(item);
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&mutex);
  }
  pthread_mutex_lock(&mutex);
  finished = true;
  pthread_cond_signal(&not_empty);
  pthread_mutex_unlock(&mutex);
  causal_toy::note_thread_cpu();
  return nullptr;
}

void* consumer(void*) {
  for (;;) {
    pthread_mutex_lock(&mutex);
    while (queue.empty() && !finished) pthread_cond_wait(&not_empty, &mutex);
    if (queue.empty()) {
      pthread_mutex_unlock(&mutex);
      causal_toy::note_thread_cpu();
      return nullptr;
    }
    const auto item = queue.front();
    queue.pop_front();
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&mutex);
    sink += consume_item(item);
    ++consumed;
    mark_progress("item");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SECONDS [PRODUCE_FACTOR [CONSUME_FACTOR]]\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  if (argc > 2) produce_factor = std::atof(argv[2]);
  if (argc > 3) consume_factor = std::atof(argv[3]);
  const auto start = std::chrono::steady_clock::now();
  deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  pthread_t p, c;
  pthread_create(&p, nullptr, producer, nullptr);
  pthread_create(&c, nullptr, consumer, nullptr);
  pthread_join(p, nullptr);
  pthread_join(c, nullptr);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("items per second: %.3f (%ld items, checksum %lu)\n", consumed / elapsed, consumed, sink & 1);
  causal_toy::print_cpu_rates("items", consumed);
  return 0;
}
