// The built-in components against real effects, each read against a truth it does not share
// code with (the clock read directly, getrusage, a known allocation), with bounds on both sides so
// that a unit error (x1000 in a clock, x1024 in a memory size) fails. Bounds are wide: these run on
// loaded machines.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>

namespace {

// The truths: clocks read here with clock_gettime and getrusage, not through any component.
double clock_ms(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}
double rusage_system_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_stime.tv_sec) * 1e3 + static_cast<double>(usage.ru_stime.tv_usec) * 1e-3;
}

// Burns at least `cpu_ms` of this thread's CPU time, however loaded the machine is.
void spin_for_cpu(double cpu_ms) {
  const double begin = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  volatile double sink = 0;
  while (clock_ms(CLOCK_THREAD_CPUTIME_ID) - begin < cpu_ms)
    for (int i = 0; i < 1000; ++i) sink = sink + i * 0.5;
}

// Maps and touches `bytes` in small pages (so each page faults once), returns the mapping.
char* touch_memory(std::size_t bytes) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  madvise(memory, bytes, MADV_NOHUGEPAGE);
  std::memset(memory, 1, bytes);
  return static_cast<char*>(memory);
}

constexpr std::size_t mib = 1024 * 1024;

}  // namespace

TEST_CASE("a 50 ms sleep shows in wall_clock, in ms, within the span the monotonic clock saw, and not in cpu_clock") {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::thread_cpu_clock> bundle{"sleep"};
  const double outer_begin = clock_ms(CLOCK_MONOTONIC);
  bundle.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bundle.stop();
  const double outer_ms = clock_ms(CLOCK_MONOTONIC) - outer_begin;
  CHECK(bundle.get<kairos::wall_clock>() >= 50.0);
  CHECK(bundle.get<kairos::wall_clock>() <= outer_ms);
  CHECK(bundle.get<kairos::cpu_clock>() < 25.0);
  CHECK(bundle.get<kairos::thread_cpu_clock>() < 25.0);
}

TEST_CASE("a 60 ms CPU spin shows in cpu_clock, thread_cpu_clock and user_clock, in ms, within what the clocks saw") {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::thread_cpu_clock, kairos::user_clock> bundle{
      "spin"};
  const double wall_begin = clock_ms(CLOCK_MONOTONIC);
  const double process_cpu_begin = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  bundle.start();
  spin_for_cpu(60);
  bundle.stop();
  const double wall_ms = clock_ms(CLOCK_MONOTONIC) - wall_begin;
  const double process_cpu_ms = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_begin;
  CHECK(bundle.get<kairos::wall_clock>() >= 60.0);
  CHECK(bundle.get<kairos::wall_clock>() <= wall_ms);
  CHECK(bundle.get<kairos::cpu_clock>() >= 60.0);
  CHECK(bundle.get<kairos::cpu_clock>() <= process_cpu_ms);
  CHECK(bundle.get<kairos::thread_cpu_clock>() >= 60.0);
  CHECK(bundle.get<kairos::thread_cpu_clock>() <= process_cpu_ms);
  // getrusage ticks in microseconds but may lag the scheduler by a tick (4 ms at 250 Hz).
  CHECK(bundle.get<kairos::user_clock>() >= 30.0);  // the rest may be accounted as system time
  CHECK(bundle.get<kairos::user_clock>() <= process_cpu_ms + 10.0);
}

TEST_CASE("system calls show in system_clock") {
  kairos::component_tuple<kairos::system_clock> bundle{"syscalls"};
  const double system_begin_ms = rusage_system_ms();
  const double wall_begin_ms = clock_ms(CLOCK_MONOTONIC);
  bundle.start();
  const auto begin = kairos::wall_clock::record();
  // mmap/munmap of a touched page is kernel work; repeat until 50 ms of wall time has passed.
  while ((kairos::wall_clock::record() - begin) < 50'000'000) {
    void* page = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static_cast<char*>(page)[0] = 1;
    munmap(page, 1 << 16);
  }
  bundle.stop();
  const double system_ms = rusage_system_ms() - system_begin_ms;
  CHECK(bundle.get<kairos::system_clock>() > 0.0);
  CHECK(bundle.get<kairos::system_clock>() <= system_ms + 0.01);
  CHECK(bundle.get<kairos::system_clock>() <= clock_ms(CLOCK_MONOTONIC) - wall_begin_ms);
}

TEST_CASE("touching 64 MiB raises peak_rss and page_rss by 60 to 68 MiB and faults its pages") {
  kairos::component_tuple<kairos::peak_rss, kairos::page_rss, kairos::page_faults> bundle{"memory"};
  bundle.start();
  char* memory = touch_memory(64 * mib);
  bundle.stop();
  CHECK(bundle.get<kairos::peak_rss>() >= 60.0);
  CHECK(bundle.get<kairos::peak_rss>() <= 68.0);
  CHECK(bundle.get<kairos::page_rss>() >= 60.0);
  CHECK(bundle.get<kairos::page_rss>() <= 68.0);
  const auto page_size = static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
  const auto pages = static_cast<std::int64_t>(64 * mib) / page_size;
  CHECK(bundle.component<kairos::page_faults>().minor() >= pages * 15 / 16);
  CHECK(bundle.component<kairos::page_faults>().minor() <= pages * 9 / 8);
  munmap(memory, 64 * mib);
}

TEST_CASE("releasing memory lowers page_rss but not peak_rss") {
  char* memory = touch_memory(32 * mib);
  kairos::component_tuple<kairos::peak_rss, kairos::page_rss> bundle{"release"};
  bundle.start();
  munmap(memory, 32 * mib);
  bundle.stop();
  CHECK(bundle.get<kairos::page_rss>() <= -30.0);
  CHECK(bundle.get<kairos::page_rss>() >= -34.0);
  CHECK(bundle.get<kairos::peak_rss>() == 0.0);
}

TEST_CASE("sleeping counts voluntary context switches") {
  kairos::component_tuple<kairos::context_switches> bundle{"waits"};
  bundle.start();
  for (int i = 0; i < 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bundle.stop();
  CHECK(bundle.component<kairos::context_switches>().voluntary() >= 10);
  const auto [voluntary, involuntary] = bundle.get<kairos::context_switches>();
  CHECK(voluntary >= 10);
  CHECK(voluntary <= 1000);  // ten sleeps, not a unit error
  (void)involuntary;
}

TEST_CASE("two threads spinning on one CPU count involuntary context switches") {
  // Both pinned to the first CPU this process may use: the scheduler must preempt one for the
  // other, whatever else the machine runs.
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &allowed)) ++first_cpu;
  cpu_set_t one_cpu;
  CPU_ZERO(&one_cpu);
  CPU_SET(first_cpu, &one_cpu);
  auto spin_pinned = [&] {
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one_cpu, &one_cpu) == 0);
    spin_for_cpu(40);
  };
  kairos::component_tuple<kairos::context_switches> bundle{"preempted"};
  bundle.start();
  std::thread first{spin_pinned}, second{spin_pinned};
  first.join();
  second.join();
  bundle.stop();
  const auto involuntary = bundle.component<kairos::context_switches>().involuntary();
  CHECK(involuntary >= 1);
  CHECK(involuntary <= 10'000);
}

TEST_CASE("components accumulate over laps") {
  kairos::component_tuple<kairos::wall_clock> bundle{"laps"};
  const double laps_begin_ms = clock_ms(CLOCK_MONOTONIC);
  for (int lap = 0; lap < 3; ++lap) {
    bundle.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bundle.stop();
  }
  CHECK(bundle.laps() == 3);
  CHECK(bundle.get<kairos::wall_clock>() >= 30.0);
  CHECK(bundle.get<kairos::wall_clock>() <= clock_ms(CLOCK_MONOTONIC) - laps_begin_ms);
}

TEST_CASE("every built-in states its label, description and unit") {
  CHECK(kairos::label_of<kairos::wall_clock>() == "wall_clock");
  CHECK(kairos::unit_of<kairos::wall_clock>() == "ms");
  CHECK(kairos::unit_of<kairos::peak_rss>() == "MiB");
  CHECK_FALSE(kairos::description_of<kairos::context_switches>().empty());
  CHECK(kairos::page_faults::value_labels()[1] == "major");
}
