#include "preload/windows/windows.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include <kairos/plugins/perf/open_event.hpp>

#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/support/signal_name.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

constexpr std::size_t history_size = 4096;  // windows a region can be clipped to
constexpr std::int64_t stop_check_ns = 100'000'000;
// Instruction counts are read at least this often, and at most: the overflow signal covers only
// the main thread's count, so a multi-threaded program's total is polled, each wait aimed at the
// predicted crossing.
constexpr std::int64_t instruction_poll_min_ns = 50'000;
constexpr std::int64_t instruction_poll_max_ns = 10'000'000;
constexpr std::int64_t cpu_poll_min_ns = 200'000;

struct clock_source {
  bool available = false;
  clockid_t id = CLOCK_MONOTONIC;
  std::int64_t origin = 0;  // subtracted from readings: wall clocks count from kairos's start
  timer_t timer{};
  bool has_timer = false;
  owned_descriptor instructions;  // the instructions clock's counting event
};

struct windows_globals {
  window_plan plan;
  window_edge_callback on_edge = nullptr;
  std::array<clock_source, window_clock_count> clocks;
  int signal_number = 0;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  std::atomic<pid_t> thread_tid{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> done{false};

  std::mutex mutex;  // what follows
  std::vector<window_record> changes;
  std::deque<window_span> history;
  windows_summary totals;
  // Instruction-rate estimate for the polling waits.
  std::int64_t last_count = 0, last_count_ns = 0;
  double instructions_per_ns = 0;
};
windows_globals* globals = nullptr;

clock_source& source_of(window_clock clock) { return globals->clocks[static_cast<std::size_t>(clock)]; }

std::int64_t read_posix_clock(clockid_t id) {
  timespec now{};
  return clock_gettime(id, &now) == 0 ? to_ns(now) : -1;
}

// The clock's reading in its units since the process's start; -1 when it cannot be read.
std::int64_t read_clock(window_clock clock) {
  auto& source = source_of(clock);
  if (!counts_instructions(clock)) {
    const auto value = read_posix_clock(source.id);
    return value < 0 ? -1 : value - source.origin;
  }
  std::uint64_t count = 0;
  if (!source.instructions.still_ours() || read(source.instructions.get(), &count, sizeof count) != sizeof count)
    return -1;
  return static_cast<std::int64_t>(count);
}

// User-space instructions of every thread of the process (inherited by the threads created
// later), on the calling thread, which must be the main one. A sampling event so that its period
// can be set to "the instructions left" and its overflow signals the windows thread.
owned_descriptor open_instruction_counter(int& error) {
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_HARDWARE;
  attributes.config = PERF_COUNT_HW_INSTRUCTIONS;
  attributes.sample_period = 1ULL << 62;
  attributes.inherit = 1;
  attributes.inherit_thread = 1;  // threads, not forked children
  attributes.exclude_kernel = 1;
  attributes.exclude_hv = 1;
  attributes.wakeup_events = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attributes, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0 && errno == EINVAL) {  // kernels before 5.13 know no inherit_thread
    attributes.inherit_thread = 0;
    fd = static_cast<int>(syscall(SYS_perf_event_open, &attributes, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  }
  error = fd < 0 ? errno : 0;
  return owned_descriptor{fd};
}

// Prepares every clock the plan uses; a clock that cannot run is a note, and its windows are
// dropped from the plan.
std::vector<problem> prepare_clocks(const window_plan& plan) {
  std::vector<problem> notes;
  const std::int64_t realtime_now = read_posix_clock(CLOCK_REALTIME), monotonic_now = steady_now_ns();
  globals->clocks[0].id = CLOCK_REALTIME;
  globals->clocks[0].origin = realtime_now;
  globals->clocks[1].id = CLOCK_MONOTONIC;
  globals->clocks[1].origin = monotonic_now;
  globals->clocks[2].id = CLOCK_PROCESS_CPUTIME_ID;  // counts from the process's start already
  pthread_getcpuclockid(pthread_self(), &globals->clocks[3].id);
  for (std::size_t i = 0; i < window_clock_count; ++i) {
    const auto clock = static_cast<window_clock>(i);
    if (!plan.uses(clock)) continue;
    auto& source = globals->clocks[i];
    if (!counts_instructions(clock)) {
      source.available = true;
      continue;
    }
    int error = 0;
    source.instructions = open_instruction_counter(error);
    source.available = static_cast<bool>(source.instructions);
    if (!source.available)
      notes.emplace_back(
          fmt::format("instruction windows are skipped: perf_event_open refuses to count instructions here ({}); "
                      "the other windows run",
                      perf::explain_open_error(perf::event_catalog[perf::find_event("instructions")], error)));
  }
  return notes;
}

// The alarm that wakes the windows thread when `clock` reaches `target`: a POSIX timer at an
// absolute time (wall and CPU clocks), or the counter's overflow period.
void set_alarm(window_clock clock, std::int64_t target) {
  auto& source = source_of(clock);
  if (counts_instructions(clock)) {
    const auto left = std::max<std::int64_t>(target - read_clock(clock), 1);
    ioctl(source.instructions.get(), PERF_EVENT_IOC_PERIOD, &left);
    return;
  }
  if (!source.has_timer) {
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = globals->signal_number;
    event._sigev_un._tid = globals->thread_tid.load();
    source.has_timer = timer_create(source.id, &event, &source.timer) == 0;
    if (!source.has_timer) return;  // the waits below poll
  }
  const auto when = target + source.origin;
  itimerspec at{};
  at.it_value = {static_cast<time_t>(when / 1'000'000'000), static_cast<long>(when % 1'000'000'000)};
  timer_settime(source.timer, TIMER_ABSTIME, &at, nullptr);
}

std::int64_t poll_interval(window_clock clock, std::int64_t now_value, std::int64_t target) {
  if (clock == window_clock::realtime || clock == window_clock::monotonic) return stop_check_ns;
  if (!counts_instructions(clock)) {
    // CPU timers fire at the scheduler's tick (4 ms at CONFIG_HZ=250): the thread also wakes when
    // the process, running on every CPU, could have reached the edge, and reads the clock.
    const auto left = (target - now_value) / std::max(globals->cpus, 1L);
    return std::clamp<std::int64_t>(left, cpu_poll_min_ns, stop_check_ns);
  }
  const auto now_ns = steady_now_ns();
  if (globals->last_count_ns != 0 && now_ns > globals->last_count_ns && now_value >= globals->last_count)
    globals->instructions_per_ns =
        static_cast<double>(now_value - globals->last_count) / static_cast<double>(now_ns - globals->last_count_ns);
  globals->last_count = now_value;
  globals->last_count_ns = now_ns;
  if (globals->instructions_per_ns <= 0) return instruction_poll_min_ns;
  // Aim short of the crossing: the rate changes, and an early wake costs one read.
  const auto predicted =
      static_cast<std::int64_t>(static_cast<double>(target - now_value) / globals->instructions_per_ns * 0.8);
  return std::clamp(predicted, instruction_poll_min_ns, instruction_poll_max_ns);
}

// Waits until `clock` reads at least `target`; returns the reading, or -1 when stopping (or the
// clock can no longer be read).
std::int64_t wait_for(window_clock clock, std::int64_t target) {
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, globals->signal_number);
  for (;;) {
    const auto value = read_clock(clock);
    if (value < 0 || value >= target) return value;
    if (globals->stopping.load(std::memory_order_acquire)) return -1;
    set_alarm(clock, target);
    const auto interval = poll_interval(clock, value, target);
    const timespec timeout{static_cast<time_t>(interval / 1'000'000'000), static_cast<long>(interval % 1'000'000'000)};
    sigtimedwait(&wake, nullptr, &timeout);
  }
}

void publish(window_record record) {
  std::lock_guard lock{globals->mutex};
  globals->changes.push_back(std::move(record));
}

// The producers' side of an edge (the sampler arms or disarms every thread), timed.
void run_edge() {
  const auto start = steady_now_ns();
  globals->on_edge();
  const auto spent = steady_now_ns() - start;
  std::lock_guard lock{globals->mutex};
  globals->totals.edge_ns += spent;
}

void open_window(window_record& record, std::int64_t reading) {
  record.opened = true;
  record.actual_start = reading;
  record.start_ns = steady_now_ns();
  {
    std::lock_guard lock{globals->mutex};
    globals->history.push_back({static_cast<std::int32_t>(record.ordinal), record.start_ns});
    if (globals->history.size() > history_size) globals->history.pop_front();
    ++globals->totals.opened;
  }
  window_state_detail::ordinal.store(static_cast<std::int32_t>(record.ordinal), std::memory_order_relaxed);
  window_state_detail::open.store(true, std::memory_order_release);
  window_state_detail::edges.fetch_add(1, std::memory_order_acq_rel);
  run_edge();
  publish(record);
}

void close_window(window_record& record, std::int64_t reading) {
  window_state_detail::open.store(false, std::memory_order_release);
  record.closed = true;
  record.end_ns = steady_now_ns();
  record.actual_end = reading >= 0 ? reading : read_clock(record.clock);
  {
    std::lock_guard lock{globals->mutex};
    if (!globals->history.empty()) globals->history.back().close_ns = record.end_ns;
  }
  window_state_detail::edges.fetch_add(1, std::memory_order_acq_rel);
  run_edge();
  publish(record);
}

void skip_window(window_record& record) {
  {
    std::lock_guard lock{globals->mutex};
    ++globals->totals.skipped;
  }
  publish(record);
}

// The plan, one window after another. A relative window's delay counts from the previous
// window's end, read on its own clock then (from the process's start, for the first one).
void run_plan() {
  bool first = true;
  while (auto planned = globals->plan.next()) {
    window_record record;
    record.ordinal = planned->ordinal;
    record.spec = *planned->text;
    record.clock = planned->clock;
    const auto base = planned->relative && !first ? read_clock(planned->clock) : 0;
    first = false;
    record.planned_start = base + planned->offset;
    record.planned_end = record.planned_start + planned->length;
    if (read_clock(planned->clock) >= record.planned_end) {  // a file's window whose time has passed
      skip_window(record);
      continue;
    }
    // -1: stopping, or the clock can no longer be read (the main thread of thread_cputime ended,
    // the program closed the instruction counter): the plan ends there.
    const auto opened_at = wait_for(planned->clock, record.planned_start);
    if (opened_at < 0) {
      if (!globals->stopping.load()) skip_window(record);
      return;
    }
    open_window(record, opened_at);
    const auto closed_at = wait_for(planned->clock, record.planned_end);
    close_window(record, closed_at);
    if (closed_at < 0) return;
  }
}

void* windows_main(void*) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-windows");
  prctl(PR_SET_TIMERSLACK, 1UL);  // its timed waits end on time, not up to 50 us later
  globals->thread_tid.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
  for (auto& source : globals->clocks)  // the overflow signal comes here, and only here
    if (source.instructions) {
      const int fd = source.instructions.get();
      f_owner_ex owner{F_OWNER_TID, globals->thread_tid.load()};
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
      fcntl(fd, F_SETSIG, globals->signal_number);
      fcntl(fd, F_SETOWN_EX, &owner);
    }
  run_plan();
  for (auto& source : globals->clocks)
    if (source.has_timer) timer_delete(source.timer);
  globals->done.store(true, std::memory_order_release);
  return nullptr;
}

}  // namespace

void for_each_window_between(std::int64_t from_ns, std::int64_t to_ns, void (*visit)(const window_span&, void*),
                             void* context) {
  if (!globals) return;
  std::lock_guard lock{globals->mutex};
  for (const auto& span : globals->history)
    if (span.open_ns <= to_ns && span.close_ns >= from_ns) visit(span, context);
}

windows_start start_windows(window_plan plan, window_edge_callback on_edge) {
  windows_start result;
  if (plan.empty()) return result;
  globals = new windows_globals;
  globals->on_edge = on_edge;
  window_state_detail::governed.store(true);  // from here on, nothing is collected outside windows
  result.notes = prepare_clocks(plan);
  for (std::size_t i = 0; i < window_clock_count; ++i)
    if (!globals->clocks[i].available) plan.drop(static_cast<window_clock>(i));
  globals->plan = std::move(plan);
  const auto signal = unused_realtime_signal(SIGRTMIN + 7);
  if (!signal.has_value()) {
    result.notes.emplace_back(signal.failure().text() +
                              "; the windows' timers have none, so no window opens and nothing is collected");
    return result;
  }
  globals->signal_number = signal.value();
  if (const int error = start_internal_thread(&windows_main, nullptr); error != 0) {
    result.notes.emplace_back(
        fmt::format("could not start kairos's windows thread ({}); no window opens "
                    "and nothing is collected",
                    std::strerror(error)));
    return result;
  }
  result.started = true;
  return result;
}

void stop_windows() noexcept {
  if (!globals || globals->stopping.exchange(true)) return;
  // The wait in progress ends at once; the open window, if any, closes now.
  if (const auto tid = globals->thread_tid.load(); tid != 0 && !globals->done.load())
    syscall(SYS_tgkill, getpid(), tid, globals->signal_number);
  wait_until([] { return globals->done.load(std::memory_order_acquire) || globals->thread_tid.load() == 0; },
             std::chrono::seconds{2});
  window_state_detail::open.store(false, std::memory_order_release);
}

std::vector<window_record> take_window_changes() {
  if (!globals) return {};
  std::lock_guard lock{globals->mutex};
  return std::exchange(globals->changes, {});
}

windows_summary windows_totals() noexcept {
  if (!globals) return {};
  std::lock_guard lock{globals->mutex};
  return globals->totals;
}

void windows_forget_after_fork_in_child() noexcept {
  window_state_detail::open.store(false, std::memory_order_relaxed);
  globals = nullptr;  // leaked, with its lock as the fork left it
}

}  // namespace kairos::runtime
