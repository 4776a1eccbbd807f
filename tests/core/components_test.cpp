// The built-in components against real effects. Bounds are wide: these run on loaded machines.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>

namespace {

// Burns at least `cpu_ms` of this thread's CPU time, however loaded the machine is.
void spin_for_cpu(double cpu_ms) {
  const auto begin = kairos::thread_cpu_clock::record();
  volatile double sink = 0;
  while ((kairos::thread_cpu_clock::record() - begin) * 1e-6 < cpu_ms)
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

TEST_CASE("a 50 ms sleep shows in wall_clock and not in cpu_clock") {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::thread_cpu_clock> bundle{
      "sleep"};
  bundle.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bundle.stop();
  CHECK(bundle.get<kairos::wall_clock>() >= 50.0);
  CHECK(bundle.get<kairos::cpu_clock>() < 25.0);
  CHECK(bundle.get<kairos::thread_cpu_clock>() < 25.0);
}

TEST_CASE("a busy loop shows in wall_clock, cpu_clock, thread_cpu_clock and user_clock") {
  kairos::component_tuple<kairos::wall_clock, kairos::cpu_clock, kairos::thread_cpu_clock,
                          kairos::user_clock>
      bundle{"spin"};
  bundle.start();
  spin_for_cpu(60);
  bundle.stop();
  CHECK(bundle.get<kairos::wall_clock>() >= 60.0);
  CHECK(bundle.get<kairos::cpu_clock>() >= 60.0);
  CHECK(bundle.get<kairos::thread_cpu_clock>() >= 60.0);
  CHECK(bundle.get<kairos::user_clock>() >= 30.0);  // the rest may be accounted as system time
}

TEST_CASE("system calls show in system_clock") {
  kairos::component_tuple<kairos::system_clock> bundle{"syscalls"};
  bundle.start();
  const auto begin = kairos::wall_clock::record();
  // mmap/munmap of a touched page is kernel work; repeat until 50 ms of wall time has passed.
  while ((kairos::wall_clock::record() - begin) < 50'000'000) {
    void* page = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static_cast<char*>(page)[0] = 1;
    munmap(page, 1 << 16);
  }
  bundle.stop();
  CHECK(bundle.get<kairos::system_clock>() > 0.0);
}

TEST_CASE("touching 64 MiB raises peak_rss and page_rss by at least 60 MiB and faults its pages") {
  kairos::component_tuple<kairos::peak_rss, kairos::page_rss, kairos::page_faults> bundle{"memory"};
  bundle.start();
  char* memory = touch_memory(64 * mib);
  bundle.stop();
  CHECK(bundle.get<kairos::peak_rss>() >= 60.0);
  CHECK(bundle.get<kairos::page_rss>() >= 60.0);
  const auto page_size = static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
  CHECK(bundle.component<kairos::page_faults>().minor() >= (60 * static_cast<std::int64_t>(mib)) / page_size);
  munmap(memory, 64 * mib);
}

TEST_CASE("releasing memory lowers page_rss but not peak_rss") {
  char* memory = touch_memory(32 * mib);
  kairos::component_tuple<kairos::peak_rss, kairos::page_rss> bundle{"release"};
  bundle.start();
  munmap(memory, 32 * mib);
  bundle.stop();
  CHECK(bundle.get<kairos::page_rss>() <= -30.0);
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
  CHECK(involuntary >= 0);
}

TEST_CASE("components accumulate over laps") {
  kairos::component_tuple<kairos::wall_clock> bundle{"laps"};
  for (int lap = 0; lap < 3; ++lap) {
    bundle.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bundle.stop();
  }
  CHECK(bundle.laps() == 3);
  CHECK(bundle.get<kairos::wall_clock>() >= 30.0);
}

TEST_CASE("every built-in states its label, description and unit") {
  CHECK(kairos::label_of<kairos::wall_clock>() == "wall_clock");
  CHECK(kairos::unit_of<kairos::wall_clock>() == "ms");
  CHECK(kairos::unit_of<kairos::peak_rss>() == "MiB");
  CHECK_FALSE(kairos::description_of<kairos::context_switches>().empty());
  CHECK(kairos::page_faults::value_labels()[1] == "major");
}
