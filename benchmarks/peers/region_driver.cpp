// The peers benchmark's program (benchmarks/peers/regions_vs_peers.py): COUNT regions, one push and
// one pop of a named region per iteration, built once per peer by the script. Which API the loop
// calls is chosen when it is compiled:
//   (nothing)          --floor: the empty loop; --clock-pairs: two steady_clock::now() reads
//   KAIROS_USER_API    kairos_push_region / kairos_pop_region (libkairos-user.so; kairos-run or not)
//   PEER_TRACY         Tracy's ZoneScopedN (TracyClient.cpp built in, TRACY_ENABLE)
//   PEER_CALIPER       Caliper's CALI_MARK_BEGIN / CALI_MARK_END (CALI_CONFIG chooses the recipe)
// Prints "regions COUNT thread_ns X wall_ns Y": the calling thread's CPU time and the wall time of
// the loop, per region. The whole process's CPU (the peer's own threads and its flush at exit
// included) is the script's to measure, from wait4.
// Usage: region_driver --floor|--clock-pairs|--regions COUNT
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(KAIROS_USER_API)
#include <kairos/user.h>
#elif defined(PEER_TRACY)
#include <tracy/Tracy.hpp>
#elif defined(PEER_CALIPER)
#include <caliper/cali.h>
#endif

namespace {

long long thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<long long>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// One region: the API under test, or the baselines when no peer is compiled in.
__attribute__((always_inline)) inline void one_region(bool clock_pair, long long& sum) {
#if defined(KAIROS_USER_API)
  (void)clock_pair;
  (void)sum;
  kairos_push_region("region");
  kairos_pop_region("region");
#elif defined(PEER_TRACY)
  (void)clock_pair;
  (void)sum;
  ZoneScopedN("region");
  asm volatile("" ::: "memory");
#elif defined(PEER_CALIPER)
  (void)clock_pair;
  (void)sum;
  CALI_MARK_BEGIN("region");
  CALI_MARK_END("region");
#else
  if (clock_pair) {
    const auto start = std::chrono::steady_clock::now();
    const auto stop = std::chrono::steady_clock::now();
    sum += (stop - start).count();
  }
  asm volatile("" ::: "memory");  // the floor: a loop the compiler keeps
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s --floor|--clock-pairs|--regions COUNT\n", argv[0]);
    return 2;
  }
  const bool clock_pair = std::strcmp(argv[1], "--clock-pairs") == 0;
  const long count = std::atol(argv[2]);
  long long sum = 0;
  const long long thread_start = thread_cpu_ns();
  const auto wall_start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) one_region(clock_pair, sum);
  const auto wall_stop = std::chrono::steady_clock::now();
  const long long thread_stop = thread_cpu_ns();
  const double wall_ns = std::chrono::duration<double, std::nano>(wall_stop - wall_start).count();
  std::printf("regions %ld thread_ns %.2f wall_ns %.2f sum %lld\n", count,
              static_cast<double>(thread_stop - thread_start) / static_cast<double>(count),
              wall_ns / static_cast<double>(count), sum);
  return 0;
}
