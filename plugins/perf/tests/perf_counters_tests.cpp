// perf_counters on this machine, for real: software events count; hardware events either count
// something sensible (a machine with a PMU) or are reported unavailable with the kernel's reason.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/plugins/perf.hpp>

#include "kairos_test_skip.hpp"

namespace {

std::int64_t thread_cpu_time_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// Spins until this thread has used `cpu_ms` of CPU time; returns the wall time it took (ms). On a
// loaded machine the wall time grows and the CPU time does not. In a VM, task-clock also counts
// the time the hypervisor gave the vCPU to another guest while the thread was on it ("steal"),
// which the thread's CPU clock leaves out (150 ms of task-clock for a 100 ms spin, once, in CI):
// task-clock lies between the spin's CPU time and its wall time.
double spin_for_cpu_ms(std::int64_t cpu_ms) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t until = thread_cpu_time_ns() + cpu_ms * 1'000'000;
  volatile std::uint64_t sink = 0;
  while (thread_cpu_time_ns() < until)
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string rejection_message(std::initializer_list<std::string_view> names) {
  try {
    kairos::perf_counters counters(names);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return {};
}

// Where perf_event_open refuses even software events (non-root at perf_event_paranoid 3, a
// seccomp profile), the tests that count say so and are skipped; the runtime takes its timer then.
// Use: if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
std::optional<std::string> perf_refused() {
  if (kairos::perf_counters::available()) return std::nullopt;
  return "perf_event_open refuses software events here: " + kairos::perf_counters::unavailable_reason();
}

bool has_pmu() { return kairos::perf_counters::available("instructions"); }

}  // namespace

TEST_CASE("where perf_event_open is refused, perf_counters is unavailable with the kernel's reason") {
  if (kairos::perf_counters::available()) return kairos_test::skip("perf_event_open opens software events here");
  CHECK(kairos::perf_counters::unavailable_reason().find("(E") != std::string::npos);
  kairos::perf_counters counters{"task-clock"};
  counters.start();
  counters.stop();
  CHECK_FALSE(counters.value_of("task-clock").has_value());
}

TEST_CASE("perf_counters is available where software events open") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  CHECK(kairos::perf_counters::available());
  CHECK(kairos::perf_counters::unavailable_reason().empty());
  CHECK(kairos::perf_counters::available("task-clock"));
  CHECK(kairos::perf_counters::available("page-faults"));
}

TEST_CASE("task-clock over a 100 ms CPU spin reads from 90 ms to its wall time") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::perf_counters counters{"task-clock"};
  counters.start();
  const auto wall_ms = spin_for_cpu_ms(100);
  counters.stop();
  const auto task_clock_ms = counters.value_of("task-clock");
  REQUIRE(task_clock_ms.has_value());
  CHECK(*task_clock_ms >= 90.0);
  CHECK(*task_clock_ms <= wall_ms * 1.1);
  CHECK(counters.units() == std::vector<std::string_view>{"ms"});
}

TEST_CASE("page-faults rise by at least half the pages when 64 MiB of fresh memory is touched") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  constexpr std::size_t bytes = 64u << 20;
  constexpr std::size_t page = 4096;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  madvise(memory, bytes, MADV_NOHUGEPAGE);  // one fault per 4 KiB page, not per 2 MiB
  kairos::perf_counters counters{"page-faults", "minor-faults", "major-faults"};
  counters.start();
  auto* bytes_of = static_cast<volatile char*>(memory);
  for (std::size_t offset = 0; offset < bytes; offset += page) bytes_of[offset] = 1;
  counters.stop();
  munmap(memory, bytes);
  const double pages = static_cast<double>(bytes / page);
  CHECK(*counters.value_of("page-faults") >= pages / 2);
  CHECK(*counters.value_of("page-faults") <= pages * 2);
  CHECK(*counters.value_of("minor-faults") >= pages / 2);
  CHECK(*counters.value_of("major-faults") <= pages / 100);
}

TEST_CASE("context-switches rise across sleeps") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::perf_counters counters{"context-switches"};
  counters.start();
  for (int sleep = 0; sleep < 20; ++sleep) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  counters.stop();
  const auto statuses = counters.events();
  REQUIRE(statuses.size() == 1);
  REQUIRE(statuses[0].counting);
  if (statuses[0].user_space_only) {
    // perf_event_paranoid forced exclude_kernel=1, and a switch happens in the kernel: nothing
    // to count. What can be checked is that the reason is given.
    CHECK(statuses[0].note.find("perf_event_paranoid=") != std::string::npos);
    return kairos_test::skip("context-switches counted user-space only here: " + statuses[0].note);
  }
  CHECK(*counters.value_of("context-switches") >= 20.0);
  CHECK(*counters.value_of("context-switches") <= 2000.0);
}

TEST_CASE("start and stop accumulate over phases and leave out what happens between them") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::perf_counters counters{"task-clock"};
  counters.start();
  auto phases_wall_ms = spin_for_cpu_ms(30);
  counters.stop();
  const auto between_wall_ms = spin_for_cpu_ms(100);  // between phases: not counted
  counters.start();
  phases_wall_ms += spin_for_cpu_ms(30);
  counters.stop();
  CHECK(*counters.value_of("task-clock") >= 54.0);
  // At most the phases' wall time: the 100 ms between them would have taken it past.
  CHECK(*counters.value_of("task-clock") <= phases_wall_ms * 1.1);
  CHECK(between_wall_ms >= 100.0);
}

TEST_CASE("on a machine with a PMU, hardware events count a known loop") {
  if (!has_pmu())
    return kairos_test::skip("no hardware PMU here: " + kairos::perf_counters::unavailable_reason("instructions"));
  kairos::perf_counters counters{"instructions", "cycles", "branch-instructions", "branch-misses"};
  counters.start();
  volatile std::uint64_t sink = 0;
  for (std::uint64_t i = 0; i < 10'000'000; ++i) sink = sink + i;  // >= 4 instructions, 1 branch each
  counters.stop();
  for (const auto& status : counters.events()) CHECK_MESSAGE(status.counting, status.name);
  const double instructions = *counters.value_of("instructions");
  const double branches = *counters.value_of("branch-instructions");
  CHECK(instructions >= 4e7);
  CHECK(instructions <= 4e8);
  CHECK(*counters.value_of("cycles") >= 1e6);
  CHECK(branches >= 1e7);
  CHECK(branches <= instructions);
  CHECK(*counters.value_of("branch-misses") <= branches / 10);  // one loop branch, predicted
}

TEST_CASE("without a PMU, hardware events are unavailable with the kernel's reason") {
  if (has_pmu()) return kairos_test::skip("this machine has a hardware PMU: its events count");
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  for (std::string_view name : {"instructions", "cycles", "branch-misses", "cache-misses"}) {
    CAPTURE(name);
    kairos::perf_counters counters{name};
    counters.start();
    spin_for_cpu_ms(5);
    counters.stop();
    CHECK_FALSE(kairos::perf_counters::available(name));
    const std::string reason = kairos::perf_counters::unavailable_reason(name);
    CHECK(reason.find(std::string{name} + ": ") == 0);
    CHECK(reason.find('(') != std::string::npos);  // the errno's name, e.g. (ENOENT)
    CHECK_FALSE(counters.value_of(name).has_value());
    REQUIRE(counters.events().size() == 1);
    CHECK_FALSE(counters.events()[0].counting);
    CHECK(counters.events()[0].unavailable_reason == reason);
  }
}

TEST_CASE("an event that cannot count does not take the rest of the group down") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  // The unavailable event (if any here) comes first: it would have been the group leader.
  kairos::perf_counters counters{"instructions", "task-clock", "page-faults", "cycles"};
  counters.start();
  spin_for_cpu_ms(50);
  counters.stop();
  REQUIRE(counters.value_of("task-clock").has_value());
  CHECK(*counters.value_of("task-clock") >= 45.0);
  CHECK(*counters.value_of("task-clock") <= 60.0);
  CHECK(counters.value_of("page-faults").has_value());
  const auto labels = counters.value_labels();
  CHECK(labels.size() == counters.get().size());
  for (const auto& status : counters.events()) CHECK(status.counting == kairos::perf_counters::available(status.name));
}

TEST_CASE("unknown event names are rejected with the list of valid ones") {
  const std::string message = rejection_message({"task-clock", "instrucshuns"});
  CHECK(message.find("[kairos] perf_counters: unknown event 'instrucshuns'") == 0);
  CHECK(message.find("valid events: task-clock, cpu-clock, page-faults") != std::string::npos);
  CHECK(message.find("instructions") != std::string::npos);
  CHECK_FALSE(kairos::perf_counters::available("instrucshuns"));
  CHECK(kairos::perf_counters::unavailable_reason("instrucshuns").find("valid events:") != std::string::npos);
}

TEST_CASE("perf's short aliases name the same events") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::perf_counters counters{"cs", "faults", "context-switches"};
  CHECK(counters.events().size() == 2);  // cs and context-switches are one event
  CHECK(counters.value_of("cs").has_value());
}

TEST_CASE("counters count only their own thread: another thread's spin is not counted") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::perf_counters this_thread_counters{"task-clock"};
  double other_thread_task_clock_ms = 0.0;
  this_thread_counters.start();
  std::thread spinner{[&] {
    kairos::perf_counters spinner_counters{"task-clock"};
    spinner_counters.start();
    spin_for_cpu_ms(150);
    spinner_counters.stop();
    other_thread_task_clock_ms = *spinner_counters.value_of("task-clock");
  }};
  spinner.join();
  this_thread_counters.stop();
  CHECK(other_thread_task_clock_ms >= 135.0);
  CHECK(other_thread_task_clock_ms <= 165.0);
  CHECK(*this_thread_counters.value_of("task-clock") < 50.0);
}

TEST_CASE("a bundle with perf_counters and a wall clock measures both") {
  if (const auto refused = perf_refused()) return kairos_test::skip(*refused);
  kairos::component_tuple<kairos::wall_clock, kairos::perf_counters> bundle{"spin"};
  bundle.start();
  spin_for_cpu_ms(20);
  bundle.stop();
  const auto& counters = bundle.component<kairos::perf_counters>();
  CHECK(*counters.value_of("task-clock") >= 18.0);
  CHECK(bundle.component<kairos::wall_clock>().get() >= 18.0);
  CHECK(counters.events().size() == kairos::perf_counters::default_event_names.size());
}

TEST_CASE("more hardware events than the PMU holds are multiplexed and scaled to the whole phase") {
  if (!has_pmu())
    return kairos_test::skip("no hardware PMU here: " + kairos::perf_counters::unavailable_reason("instructions"));
  auto fixed_work = [] {
    volatile std::uint64_t sink = 0;
    for (std::uint64_t i = 0; i < 50'000'000; ++i) sink = sink + i;
  };
  kairos::perf_counters alone{"instructions"};
  alone.start();
  fixed_work();
  alone.stop();
  kairos::perf_counters crowded{"instructions",     "cycles",           "branch-instructions",
                                "branch-misses",    "cache-references", "cache-misses",
                                "ref-cycles",       "L1-dcache-loads",  "L1-dcache-load-misses",
                                "dTLB-load-misses", "iTLB-load-misses", "stalled-cycles-frontend"};
  crowded.start();
  fixed_work();
  crowded.stop();
  const double ratio = *crowded.value_of("instructions") / *alone.value_of("instructions");
  CAPTURE(ratio);
  CHECK(ratio > 0.7);
  CHECK(ratio < 1.3);
  bool any_multiplexed = false;
  for (const auto& status : crowded.events())
    if (status.counting && status.running_fraction < 0.99) any_multiplexed = true;
  CHECK(any_multiplexed);  // 12 hardware events exceed every x86/Arm PMU's counters
}

TEST_CASE("an unprivileged thread is counted user-space only, or refused with the paranoid level") {
  // In a child that drops root (or here directly when not root), open task-clock the way
  // perf_counters does and report through the exit code.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
    const int paranoid = kairos::perf::perf_event_paranoid();
    const auto& task_clock = kairos::perf::event_catalog[kairos::perf::find_event("task-clock")];
    const kairos::perf::open_result opened = kairos::perf::open_event(task_clock, -1);
    if (paranoid >= 3) {
      const std::string reason = kairos::perf::explain_open_error(task_clock, opened.error);
      _exit(opened.fd < 0 && reason.find("perf_event_paranoid=") != std::string::npos ? 0 : 11);
    }
    if (opened.fd < 0) _exit(12);
    _exit(opened.user_space_only == (paranoid >= 2) ? 0 : 13);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
