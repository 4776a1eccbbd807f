#include "preload/sampling/sampler.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/backtrace.hpp>
#include <kairos/plugins/perf/open_event.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/causal/causal.hpp"
#include "preload/sampling/python_frames.hpp"
#include "preload/sampling/sample_writer.hpp"
#include "preload/sampling/thread_sampler.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/support/signal_name.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

// A sampler's own delay and duration (KAIROS_SAMPLING_*_DELAY/DURATION); `open` also needs a time
// window open when windows govern (window_state.hpp).
struct sampler_window {
  bool enabled = false;
  double frequency_hz = 0;
  std::int64_t period_ns = 0;
  std::int64_t start_ns = 0;      // steady clock
  std::int64_t end_ns = 0;        // 0: until exit
  std::atomic<bool> open{false};  // armed right now (written under the samplers' mutex)

  bool active_at(std::int64_t now_ns) const {
    return enabled && now_ns >= start_ns && (end_ns == 0 || now_ns < end_ns);
  }
};

enum class cpu_source { ring, perf, posix_timer };

constexpr std::int64_t delivery_interval_ns = 100'000'000;  // waiting samples, descriptor checks
constexpr std::int64_t perf_upgrade_age_ns = 20'000'000;

struct sampler_globals {
  std::mutex mutex;  // samplers and arming
  std::vector<thread_sampler*> samplers;
  sampler_window cpu, real;
  // A perf ring (or the perf signal, on request) until the kernel first refuses an event that
  // counts the kernel (paranoid level, seccomp), then the POSIX CPU timer for good: each charges
  // a system call's CPU time to the call (docs/runtime.md). Not probed at start: every thread
  // starts on the timer anyway, and a process that ends before its first thread is 20 ms old
  // never calls perf_event_open (whose first call in a process the kernel sometimes holds for
  // tens of milliseconds).
  std::atomic<cpu_source> source{cpu_source::ring};
  // The real-time sampler's user-mode task-clock events, until the kernel refuses even those.
  std::atomic<bool> user_mode_perf{true};
  const char* source_wanted_explicitly = nullptr;  // KAIROS_SAMPLING_CPUTIME_SOURCE=perf|ring: say so if refused
  int signal_number = 0;
  python_frames_status python;
  // A CPython whose frames can be read is loaded, its interpreter not started yet, and the source
  // is `auto`: the ring until the interpreter exists (read_python_frames_from_now; control thread).
  bool python_pending = false;
  sample_delivery deliver = nullptr;
  std::atomic<bool> stopping{false};
  // The control thread sleeps on it between ticks; stop_sampling posts it so finalize does not
  // wait out the rest of a tick.
  sem_t control_wake;
  std::atomic<bool> control_done{false};
  bool control_running = false;
  // Threads already gone.
  std::uint64_t delivered_by_ended = 0, unwound_by_tables_by_ended = 0, dropped_by_ended = 0;
  std::int64_t lost_by_ended_ns = 0;
  cpu_coverage coverage_by_ended;  // under the mutex; their rings' part once their writer freed them:
  std::atomic<std::int64_t> ring_weights_by_ended_ns{0}, ring_tail_by_ended_ns{0};
  std::atomic<std::uint64_t> threads_by_ring{0};  // threads sampled through a perf ring
  bool rings_refused = false;                     // the kernel refused a ring once: not asked again (control thread)
  std::uint64_t waiting_taken = 0;                // under the mutex
  sample_batch waiting;                           // control thread only

  sampler_globals() { sem_init(&control_wake, 0, 0); }
};
sampler_globals* globals = nullptr;
std::atomic<bool> handler_active{false};
std::atomic<bool> enabled{false};

[[gnu::tls_model("initial-exec")]] thread_local thread_sampler* this_thread_sampler = nullptr;

// The CPU clock of any thread of this process (the kernel's encoding: CPUCLOCK_PERTHREAD |
// CPUCLOCK_SCHED), so the control thread can arm other threads.
clockid_t thread_cpu_clock(pid_t tid) { return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6); }

std::int64_t thread_cpu_ns(pid_t tid) {
  timespec now{};
  if (clock_gettime(thread_cpu_clock(tid), &now) != 0) return 0;
  return to_ns(now);
}

std::int64_t own_cpu_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return to_ns(now);
}

// --- the signal handler ----------------------------------------------------------------------

sample_buffer* buffer_to_fill(thread_sampler& sampler) noexcept {
  auto* buffer = sampler.buffers[sampler.current];
  if (buffer->state.load(std::memory_order_acquire) == sample_buffer::filling_state) return buffer;
  // The current buffer was handed over: take the spare if the writer gave it back.
  auto* spare = sampler.buffers[sampler.current ^ 1];
  if (spare && spare->state.load(std::memory_order_acquire) == sample_buffer::free_state) {
    spare->state.store(sample_buffer::filling_state, std::memory_order_relaxed);
    sampler.current ^= 1;
    return spare;
  }
  if (buffer->state.load(std::memory_order_acquire) == sample_buffer::free_state) {
    buffer->state.store(sample_buffer::filling_state, std::memory_order_relaxed);
    return buffer;
  }
  return nullptr;  // both buffers wait for the writer: this sample is dropped (and counted)
}

// The causal experiments see every CPU-time sample, recorded or dropped (causal.hpp). A delay's
// spun tail is CPU time of the thread's but not of the program's: it is the handler's, which no
// weight stands for (a perf signal's period is held while it spins).
void run_causal_experiments(const kairos::backtrace<sample_stack_depth>& stack, std::int64_t weight_ns,
                            std::int64_t running_cpu_ns) noexcept {
  std::uint64_t addresses[sample_stack_depth];
  for (std::size_t i = 0; i < stack.size(); ++i) addresses[i] = stack.lookup_address(i);
  causal_on_sample(addresses, stack.size(), weight_ns, running_cpu_ns);
}

// The perf signal overflows after a random amount of CPU time, exponential with the mean period
// (shifted to start at its shortest, below): a fixed period phase-locks with a program whose loop
// lasts about as long, because the signal itself moves the loop (a read of
// /dev/urandom returns early when a signal is pending), and one call took 78-94% of the samples
// for 68% of the CPU time. Memoryless periods make the samples see the program as it is on
// average, whatever the signal does to it (Poisson arrivals see time averages), so each sample
// weighs the mean period: a weight measured since the previous sample would again favour where
// long intervals end (1-4 points high on that program). The ioctl restarts the count from here,
// so the handler's own time never reaches the next sample. Returns the thread's CPU time then.
std::int64_t restart_perf_period(thread_sampler& sampler, int fd) noexcept {
  // At least an eighth of the mean and 50 us: a period shorter than the signal's delivery only
  // makes repeats (repeated_overflow) and costs (at 10 kHz the shortest periods nearly doubled
  // the program's time).
  const double mean_ns = static_cast<double>(globals->cpu.period_ns);
  const double shortest = std::min(std::max(1.0 / 8, 50'000.0 / mean_ns), 1.0);
  auto& state = sampler.period_state;
  if (state == 0) state = static_cast<std::uint64_t>(sampler.thread->tid) * 0x9E3779B97F4A7C15ULL | 1;
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;                     // xorshift64
  const double uniform = static_cast<double>((state >> 11) + 1) * 0x1p-53;             // (0, 1]
  const double draw = shortest + (1 - shortest) * std::min(-std::log(uniform), 16.0);  // mean 1
  auto period = static_cast<std::uint64_t>(draw * mean_ns);
  ioctl(fd, PERF_EVENT_IOC_PERIOD, &period);
  sampler.period_started_cpu_ns = own_cpu_ns();
  sampler.period_ns = static_cast<std::int64_t>(period);
  return sampler.period_started_cpu_ns;
}

// An overflow the current period cannot have made: the kernel re-arms a short period at each
// overflow, so while an overflow's signal waits to be delivered the same period can fire again and
// queue more signals (at 10 kHz, with periods down to 12 us, twice the samples). The restart as the
// handler returns starts the one period that counts; an overflow before half of it ran is a repeat.
bool repeated_overflow(const thread_sampler& sampler, std::int64_t cpu_ns) noexcept {
  return sampler.period_ns > 0 && cpu_ns - sampler.period_started_cpu_ns < sampler.period_ns / 2;
}

// The handler's own CPU time, from `cpu_ns` as it began to now: no weight stands for it, so a
// CPU-time sample's successor weighs from here (coverage: handler_ns).
void leave_handler(thread_sampler& sampler, sample_source source, int perf_fd, std::int64_t cpu_ns) noexcept {
  const auto end_ns = perf_fd >= 0 ? restart_perf_period(sampler, perf_fd) : own_cpu_ns();
  sampler.handler_ns.fetch_add(end_ns - cpu_ns, std::memory_order_relaxed);
  sampler.last_cpu_ns = source == sample_source::cpu_time ? end_ns : sampler.last_cpu_ns + (end_ns - cpu_ns);
}

// `perf_fd`: the CPU-time perf event whose overflow this is, or -1 (the timer, or real time);
// `cpu_ns`: the thread's CPU time as the handler began.
void take_sample(thread_sampler& sampler, sample_source source, const ucontext_t* context, int perf_fd,
                 std::int64_t cpu_ns) noexcept {
  // No overflow while the handler runs (its unwinding, a causal delay's spin).
  if (perf_fd >= 0) {
    std::uint64_t never = std::uint64_t{1} << 62;
    ioctl(perf_fd, PERF_EVENT_IOC_PERIOD, &never);
  }
  const auto now_ns = steady_now_ns();
  std::int64_t weight_ns = globals->real.period_ns;
  if (source == sample_source::cpu_time) {
    // A thread's first perf sample also carries its CPU time since its last timer sample.
    weight_ns = perf_fd >= 0 && sampler.perf_weighted ? globals->cpu.period_ns
                                                      : std::max<std::int64_t>(cpu_ns - sampler.last_cpu_ns, 0);
    sampler.weights_ns.fetch_add(weight_ns, std::memory_order_relaxed);  // coverage: lost ones included
    sampler.perf_weighted = perf_fd >= 0;
  }
  auto* buffer = buffer_to_fill(sampler);
  if (!buffer) {
    // Counted, and so is the CPU time it stood for: lost, never charged to another sample's stack.
    sampler.dropped.fetch_add(1, std::memory_order_relaxed);
    if (source == sample_source::cpu_time) sampler.lost_cpu_ns.fetch_add(weight_ns, std::memory_order_relaxed);
    if (source == sample_source::cpu_time && causal_running()) {
      kairos::backtrace<sample_stack_depth> stack;
      stack.sample(context);
      run_causal_experiments(stack, weight_ns, cpu_ns - sampler.last_cpu_ns);
    }
    leave_handler(sampler, source, perf_fd, cpu_ns);
    return;
  }
  const auto index = buffer->committed.load(std::memory_order_relaxed);
  auto& record = buffer->record(index);
  record.time_ns = now_ns;
  record.weight_ns = weight_ns;
  record.thread_cpu_ns = cpu_ns;
  record.source = source;
  record.window = current_window();
  record.stack.sample(context);
  if (python_frames_active()) capture_python_frames(buffer->python(index));
  buffer->committed.store(index + 1, std::memory_order_release);
  sampler.delivered.fetch_add(1, std::memory_order_relaxed);
  if (record.stack.path() == kairos::backtrace_path::tables)
    sampler.unwound_by_tables.fetch_add(1, std::memory_order_relaxed);
  if (index + 1 == sample_buffer::capacity) {
    buffer->state.store(sample_buffer::full_state, std::memory_order_release);
    hand_over_full_buffer(sampler.writer, buffer);
  }
  // Last: its delays may sleep this thread, and the sample is already in the buffer.
  if (source == sample_source::cpu_time && causal_running())
    run_causal_experiments(record.stack, weight_ns, cpu_ns - sampler.last_cpu_ns);
  leave_handler(sampler, source, perf_fd, cpu_ns);
}

void on_sampling_signal(int, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  auto* sampler = this_thread_sampler;
  if (sampler && handler_active.load(std::memory_order_relaxed)) {
    // The real-time sampler's own perf event (si_fd names it), else CPU time (perf or SI_TIMER).
    const int realtime_fd = sampler->realtime_perf_fd.load(std::memory_order_relaxed);
    const bool real_time = info->si_code > 0 && realtime_fd >= 0 && info->si_fd == realtime_fd;
    const int cpu_fd = sampler->perf_fd.load(std::memory_order_relaxed);
    const bool perf = info->si_code > 0 && cpu_fd >= 0 && info->si_fd == cpu_fd;
    // One read of the thread's CPU clock (a system call) serves the repeat check and the weight.
    const auto cpu_ns = own_cpu_ns();
    if (perf && repeated_overflow(*sampler, cpu_ns)) {
      errno = saved_errno;
      return;
    }
    take_sample(*sampler, real_time ? sample_source::real_time : sample_source::cpu_time,
                static_cast<const ucontext_t*>(context), perf ? cpu_fd : -1, cpu_ns);
  }
  errno = saved_errno;
}

// --- coverage --------------------------------------------------------------------------------
// Each thread's CPU clock is split at the edges of what was sampled (cpu_coverage): sampling on
// (armed) or off, the signal blocked, a ring counting. The edges are taken under the thread's
// `arming` lock, except its own mask changes (sampling_signal_mask_changed), which race with
// them: a blocked stretch is counted by whichever side ends it, through an exchange of its start.

// A blocked stretch that began at `since_ns` ends at `cpu_ns`: its part while sampling was on.
void add_blocked(thread_sampler& sampler, std::int64_t since_ns, std::int64_t cpu_ns) noexcept {
  const auto armed_ns = sampler.armed_since_cpu_ns.load();
  if (armed_ns >= 0)
    sampler.blocked_ns.fetch_add(std::max<std::int64_t>(cpu_ns - std::max(since_ns, armed_ns), 0),
                                 std::memory_order_relaxed);
}

// Under `arming`: sampling begins for the thread at its clock `cpu_ns`.
void coverage_armed(thread_sampler& sampler, std::int64_t cpu_ns) {
  const auto off_ns = std::max<std::int64_t>(cpu_ns - sampler.unarmed_since_cpu_ns, 0);
  (sampler.ever_armed ? sampler.paused_ns : sampler.before_sampling_ns) += off_ns;
  sampler.ever_armed = true;
  sampler.last_cpu_ns = cpu_ns;
  if (sampler.sampled_by_ring.load()) sampler.ring_since_cpu_ns = cpu_ns;
  sampler.armed_since_cpu_ns.store(cpu_ns);
}

// Under `arming`, while armed: the stretch sampled one way ends at `cpu_ns` (sampling goes off,
// or the ring takes over from the signal: `blocked_ends`). Not sampled: what ran since its last
// sample, or since the signal was blocked.
void coverage_stretch_ended(thread_sampler& sampler, std::int64_t cpu_ns, bool blocked_ends) {
  if (sampler.ring_since_cpu_ns >= 0) {
    sampler.ring_clock_ns += cpu_ns - sampler.ring_since_cpu_ns;
    sampler.ring_since_cpu_ns = -1;
    return;
  }
  auto since_ns = sampler.blocked_since_cpu_ns.load();
  if (since_ns >= 0 && sampler.blocked_since_cpu_ns.compare_exchange_strong(since_ns, blocked_ends ? -1 : cpu_ns)) {
    add_blocked(sampler, since_ns, cpu_ns);
    return;
  }
  sampler.after_last_sample_ns.fetch_add(std::max<std::int64_t>(cpu_ns - sampler.last_cpu_ns, 0),
                                         std::memory_order_relaxed);
}

// Under `arming`: sampling ends for the thread at its clock `cpu_ns`, for now.
void coverage_disarmed(thread_sampler& sampler, std::int64_t cpu_ns) {
  if (sampler.armed_since_cpu_ns.load() < 0) return;
  coverage_stretch_ended(sampler, cpu_ns, false);
  sampler.armed_since_cpu_ns.store(-1);
  sampler.unarmed_since_cpu_ns = cpu_ns;
}

// Under `arming`, once sampling ended for the thread (its end, or stop_sampling).
cpu_coverage coverage_of(const thread_sampler& sampler) {
  cpu_coverage coverage;
  const auto end_ns = sampler.end_cpu_ns >= 0 ? sampler.end_cpu_ns : thread_cpu_ns(sampler.thread->tid);
  coverage.program_cpu_ns = end_ns;
  coverage.before_sampling_ns = sampler.before_sampling_ns;
  coverage.paused_ns = sampler.paused_ns;
  (sampler.ever_armed ? coverage.paused_ns : coverage.before_sampling_ns) +=
      std::max<std::int64_t>(end_ns - sampler.unarmed_since_cpu_ns, 0);
  coverage.blocked_ns = sampler.blocked_ns.load();
  coverage.blocked_threads = coverage.blocked_ns > 0 ? 1 : 0;
  coverage.after_last_sample_ns = sampler.after_last_sample_ns.load();
  coverage.handler_ns = sampler.handler_ns.load();
  coverage.weights_ns = sampler.weights_ns.load();
  coverage.ring_excess_ns = -sampler.ring_clock_ns;  // its count is added once drained (ring_coverage)
  return coverage;
}

// The writers drained the ring for good: its weights, what it counted after its last sample, and
// that count beside the thread's clock.
void add_ring_coverage(cpu_coverage& coverage, std::int64_t weights_ns, std::int64_t tail_ns) {
  coverage.weights_ns += weights_ns;
  coverage.after_last_sample_ns += tail_ns;
  coverage.ring_excess_ns += weights_ns + tail_ns;
}

// --- arming ----------------------------------------------------------------------------------

// Pauses or resumes a thread's signalling clocks (async-signal-safe: ioctl, timer_settime).
void set_clocks_running(thread_sampler& sampler, bool running) noexcept {
  const auto request = running ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;
  for (auto* fd : {&sampler.perf_fd, &sampler.realtime_perf_fd})
    if (const int number = fd->load(); number >= 0) ioctl(number, request, 0);
  if (sampler.has_timer) {
    itimerspec every{};
    if (running) {
      every.it_interval.tv_sec = globals->cpu.period_ns / 1'000'000'000;
      every.it_interval.tv_nsec = globals->cpu.period_ns % 1'000'000'000;
      every.it_value = every.it_interval;
    }
    timer_settime(sampler.timer, 0, &every, nullptr);
  }
}

// The kernel refused a CPU-time task-clock event for a reason that will not go away: the timer
// from now on. A user-mode-only event is never used for CPU time: its overflows in the kernel are
// skipped, so a system call's time would weigh on the next sample, in user code.
void fall_back_to_timer(int error) {
  if (globals->source.exchange(cpu_source::posix_timer) == cpu_source::posix_timer) return;
  if (globals->source_wanted_explicitly)
    report(
        fmt::format("KAIROS_SAMPLING_CPUTIME_SOURCE={} but perf_event_open refuses a task-clock "
                    "event that counts kernel time ({}; perf_event_paranoid={} allows it to root, "
                    "CAP_PERFMON or a level <= 1); using the POSIX CPU timer, which also charges "
                    "system calls to their callers",
                    globals->source_wanted_explicitly, std::strerror(error), perf::perf_event_paranoid()));
}

// A task-clock sampling event on `tid`, its overflow signal routed to that thread. CPU time
// counts the kernel (`include_kernel`): the overflow's signal is delivered as the system call
// returns, so its stack is the call's. The real-time sampler's does not: its samples are not CPU
// time, and it must never leave a signal pending in a thread entering a sleep.
owned_descriptor open_task_clock(pid_t tid, std::int64_t period_ns, bool include_kernel) {
  owned_descriptor event{perf::open_sampling_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, tid,
                                                   static_cast<std::uint64_t>(period_ns), include_kernel)};
  if (!event) {
    const int error = errno;
    const bool lasting = error == EACCES || error == EPERM || error == ENOENT || error == ENOSYS || error == EINVAL;
    if (lasting && include_kernel) fall_back_to_timer(error);
    if (lasting && (!include_kernel || (error != EACCES && error != EPERM))) globals->user_mode_perf = false;
    return event;
  }
  const int fd = event.get();
  f_owner_ex owner{F_OWNER_TID, tid};
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC | O_NONBLOCK) != 0 ||
      fcntl(fd, F_SETSIG, globals->signal_number) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
      ioctl(fd, PERF_EVENT_IOC_RESET, 0) != 0)
    event.close_if_ours();
  return event;
}

bool open_posix_timer(thread_sampler& sampler) {
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = globals->signal_number;
  event._sigev_un._tid = sampler.thread->tid;
  if (timer_create(thread_cpu_clock(sampler.thread->tid), &event, &sampler.timer) != 0) return false;
  sampler.has_timer = true;
  return true;
}

// Under the sampler's arming mutex. The clocks start only if the thread does not block the signal; the
// thread's own wrapper may block it at the same moment, so the flag is checked again after the
// descriptor is published (the two sides are seq_cst: one of them pauses the clock).
void start_clocks_unless_blocked(thread_sampler& sampler) {
  if (!sampler.signal_blocked.load()) set_clocks_running(sampler, true);
  if (sampler.signal_blocked.load()) set_clocks_running(sampler, false);
}

// A new thread starts on the POSIX CPU timer (no descriptor, a few microseconds to set up); the
// control thread moves it to its ring or perf event once it has lived perf_upgrade_age_ns. A perf event
// costs as much to open as the thread itself costs to create, so a program that churns short
// threads pays for it only on the threads that live long enough to need its precision (the
// timer is tick-limited: at most CONFIG_HZ samples a second). Weights are CPU-time deltas
// either way, so a short thread's samples still count its CPU time right.
// A thread gets its writer when it is first armed: a program that ends before the sampling
// delay never starts a writer thread.
bool has_writer(thread_sampler& sampler) {
  if (!sampler.writer) sampler.writer = assign_writer(&sampler);
  return sampler.writer != nullptr;
}

void arm_cpu(thread_sampler& sampler, bool started_now) {
  if (sampler.cpu_armed || sampler.finished.load() || !has_writer(sampler)) return;
  if (sampler.sampled_by_ring.load()) {
    coverage_armed(sampler, thread_cpu_ns(sampler.thread->tid));
    set_perf_ring_running(sampler.ring, true);
    sampler.cpu_armed = true;
    return;
  }
  const auto cpu_ns = thread_cpu_ns(sampler.thread->tid);
  if (globals->source == cpu_source::perf && !started_now) {
    sampler.perf_event = open_task_clock(sampler.thread->tid, globals->cpu.period_ns, true);
    sampler.perf_fd.store(sampler.perf_event.get());
    sampler.cpu_armed = static_cast<bool>(sampler.perf_event);
  }
  if (sampler.signal_blocked.load() || globals->source == cpu_source::ring)
    sem_post(&globals->control_wake);  // its ring is due at 20 ms of age
  if (!sampler.cpu_armed) {
    sampler.cpu_armed = open_posix_timer(sampler);
    sampler.perf_upgrade_due_ns = globals->source == cpu_source::perf ? steady_now_ns() + perf_upgrade_age_ns : 0;
    if (sampler.perf_upgrade_due_ns != 0) sem_post(&globals->control_wake);  // it sleeps until a due time
  }
  if (!sampler.cpu_armed) return;
  coverage_armed(sampler, cpu_ns);
  start_clocks_unless_blocked(sampler);
}

// Control thread, under the thread's arming lock: the thread is sampled through a perf ring from
// now on, and its signal clocks are closed (its mask no longer matters). If it blocks the signal,
// its CPU time until now stays unsampled (coverage: blocked_ns).
void move_to_ring(thread_sampler& sampler) {
  if (!open_perf_ring(sampler.ring, sampler.thread->tid, globals->cpu.period_ns)) {
    const int error = errno;
    globals->rings_refused = true;
    if (globals->source == cpu_source::ring) fall_back_to_timer(error);
    return;
  }
  // A ring that cannot count the kernel is for threads no signal reaches: the others keep the
  // timer, which charges system calls to their callers.
  if (!sampler.ring.counts_kernel && globals->source == cpu_source::ring) fall_back_to_timer(EACCES);
  if (!sampler.ring.counts_kernel && !sampler.signal_blocked.load()) {
    close_perf_ring(sampler.ring);
    return;
  }
  sampler.ring.cpu_at_open_ns = thread_cpu_ns(sampler.thread->tid);
  coverage_stretch_ended(sampler, sampler.ring.cpu_at_open_ns, true);
  sampler.ring_since_cpu_ns = sampler.ring.cpu_at_open_ns;
  sampler.sampled_by_ring.store(true);
  globals->threads_by_ring.fetch_add(1, std::memory_order_relaxed);
  set_perf_ring_running(sampler.ring, true);
  sampler.perf_upgrade_due_ns = 0;
  sampler.perf_fd.store(-1);
  sampler.perf_event.close_if_ours();
  if (sampler.has_timer) {
    timer_delete(sampler.timer);
    sampler.has_timer = false;
  }
}

// Whether thread `tid` blocks `signal` now, as the kernel has it (SigBlk in its status file).
bool blocks_signal(pid_t tid, int signal) {
  const int file = open(fmt::format("/proc/self/task/{}/status", tid).c_str(), O_RDONLY | O_CLOEXEC);
  char text[4096];
  const auto n = file >= 0 ? pread(file, text, sizeof text - 1, 0) : -1;
  if (file >= 0) close(file);
  if (n <= 0) return true;  // unknown: keep the thread where no signal is needed
  text[n] = '\0';
  const char* line = std::strstr(text, "\nSigBlk:");
  if (!line) return true;
  const auto mask = std::strtoull(line + 8, nullptr, 16);
  return (mask >> (signal - 1)) & 1;
}

// Control thread, under the thread's arming lock: a thread on its ring goes to the perf signal,
// since an interpreter started. Its mask was not followed while on the ring
// (sampling_signal_mask_changed), so it is read from the kernel: a thread that blocks the signal
// keeps its ring. After the ring is gone the thread's own wrapper follows its mask; a block made
// just before is caught by the second read (at worst the thread is flagged blocked and gets a
// ring again, never a signal it blocks).
void move_off_ring(thread_sampler& sampler) {
  const auto tid = sampler.thread->tid;
  if (blocks_signal(tid, globals->signal_number)) return;
  const bool armed = sampler.cpu_armed;
  // The ring's stretch ends here (its count beside the thread's clock, coverage); what it counted
  // after its last sample is that stretch's tail (ring_drained_for_good, in take_back_ring).
  if (armed) coverage_disarmed(sampler, thread_cpu_ns(tid));
  take_back_ring(sampler.writer, &sampler, globals->waiting);
  bool unblocked = false;
  if (blocks_signal(tid, globals->signal_number) && sampler.signal_blocked.compare_exchange_strong(unblocked, true))
    sampler.blocked_since_cpu_ns.store(thread_cpu_ns(tid));
  sampler.cpu_armed = false;
  if (armed) arm_cpu(sampler, false);
}

// Control thread: the CPython found at start now has an interpreter. Its frames are read from now
// on, which takes a signal (the ring's samples are read after the thread moved on): the threads
// on rings or waiting for one move to the perf signal, as a Python program's threads start.
void read_python_frames_from_now() {
  globals->python_pending = false;
  start_reading_python_frames();
  auto ring = cpu_source::ring;
  if (!globals->source.compare_exchange_strong(ring, cpu_source::perf)) return;  // a signal already
  const auto now_ns = steady_now_ns();
  std::lock_guard lock{globals->mutex};
  for (auto* sampler : globals->samplers) {
    std::lock_guard arming{sampler->arming};
    if (sampler->sampled_by_ring.load())
      move_off_ring(*sampler);
    else if (sampler->has_timer && sampler->perf_upgrade_due_ns == 0)
      sampler->perf_upgrade_due_ns = std::max(sampler->started_ns + perf_upgrade_age_ns, now_ns);
  }
}

// Control thread, under the mutex: threads on the timer that lived long enough get perf, and
// threads that block the signal a ring. Returns when the next one is due (0: none waits).
std::int64_t upgrade_to_perf(std::int64_t now_ns) {
  std::int64_t next_due = 0;
  for (auto* sampler : globals->samplers) {
    std::lock_guard arming{sampler->arming};
    const bool wants_ring = sampler->signal_blocked.load() || globals->source == cpu_source::ring;
    if (sampler->cpu_armed && wants_ring && !sampler->sampled_by_ring.load() && !globals->rings_refused) {
      // As for perf: a thread that ends young never costs an event.
      const auto ring_due = sampler->started_ns + perf_upgrade_age_ns;
      if (now_ns >= ring_due) {
        move_to_ring(*sampler);
        continue;
      }
      next_due = next_due == 0 ? ring_due : std::min(next_due, ring_due);
    }
    const auto due = sampler->perf_upgrade_due_ns;
    if (due == 0) continue;
    if (now_ns < due) {
      next_due = next_due == 0 ? due : std::min(next_due, due);
      continue;
    }
    sampler->perf_upgrade_due_ns = 0;
    auto event = open_task_clock(sampler->thread->tid, globals->cpu.period_ns, true);
    if (!event) continue;  // stays on the timer
    timer_delete(sampler->timer);
    sampler->has_timer = false;
    sampler->perf_event = event;
    sampler->perf_fd.store(event.get());
    start_clocks_unless_blocked(*sampler);
  }
  return next_due;
}

void disarm_cpu(thread_sampler& sampler) {
  if (sampler.cpu_armed) coverage_disarmed(sampler, thread_cpu_ns(sampler.thread->tid));
  if (sampler.sampled_by_ring.load()) set_perf_ring_running(sampler.ring, false);  // its writer drains it
  sampler.perf_upgrade_due_ns = 0;
  sampler.perf_fd.store(-1);
  if (sampler.perf_event.still_ours()) ioctl(sampler.perf_event.get(), PERF_EVENT_IOC_DISABLE, 0);
  sampler.perf_event.close_if_ours();
  if (sampler.has_timer) {
    timer_delete(sampler.timer);
    sampler.has_timer = false;
  }
  sampler.cpu_armed = false;
}

void arm_realtime(thread_sampler& sampler) {
  if (sampler.realtime_armed || sampler.finished.load() || !has_writer(sampler)) return;
  const auto directory = fmt::format("/proc/self/task/{}/", sampler.thread->tid);
  sampler.stat_file.adopt(open((directory + "stat").c_str(), O_RDONLY | O_CLOEXEC));
  sampler.syscall_file.adopt(open((directory + "syscall").c_str(), O_RDONLY | O_CLOEXEC));
  if (globals->user_mode_perf) {
    sampler.realtime_perf_event = open_task_clock(sampler.thread->tid, globals->real.period_ns, false);
    sampler.realtime_perf_fd.store(sampler.realtime_perf_event.get());
  }
  sampler.realtime_armed = static_cast<bool>(sampler.stat_file);
  start_clocks_unless_blocked(sampler);
}

void disarm_realtime(thread_sampler& sampler) {
  sampler.realtime_perf_fd.store(-1);
  if (sampler.realtime_perf_event.still_ours()) ioctl(sampler.realtime_perf_event.get(), PERF_EVENT_IOC_DISABLE, 0);
  sampler.realtime_perf_event.close_if_ours();
  sampler.stat_file.close_if_ours();
  sampler.syscall_file.close_if_ours();
  sampler.realtime_armed = false;
}

void apply_windows(thread_sampler& sampler, bool started_now) {
  if (globals->cpu.open) arm_cpu(sampler, started_now);
  if (globals->real.open) arm_realtime(sampler);
}

thread_sampler* create_sampler(thread_record& record) {
  auto* sampler = new thread_sampler;
  sampler->thread = &record;
  sampler->started_ns = steady_now_ns();
  sampler->buffers[0] = map_sample_buffer(sampler);
  sampler->buffers[1] = map_sample_buffer(sampler);
  if (!sampler->buffers[0]) {
    unmap_sample_buffer(sampler->buffers[0]);
    unmap_sample_buffer(sampler->buffers[1]);
    delete sampler;
    return nullptr;
  }
  sampler->buffers[0]->state.store(sample_buffer::filling_state);
  // A thread may start with the signal blocked (liblzma's workers inherit a full mask).
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  if (sigismember(&mask, globals->signal_number) == 1) {
    sampler->signal_blocked.store(true);
    sampler->blocked_since_cpu_ns.store(own_cpu_ns());
  }
  return sampler;
}

// --- the control thread ----------------------------------------------------------------------

// The state letter of /proc/self/task/<tid>/stat ("R" running, "S"/"D" waiting, ...).
char read_state(const owned_descriptor& file) {
  char text[512];
  const auto n = pread(file.get(), text, sizeof text - 1, 0);
  if (n <= 0) return '?';
  text[n] = '\0';
  const char* close_paren = std::strrchr(text, ')');  // the name may hold spaces and parentheses
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

// The user-space address of a thread blocked in a system call: the last field of
// /proc/self/task/<tid>/syscall ("nr args... sp pc"); 0 when unknown.
std::uint64_t blocked_at(const owned_descriptor& file) {
  if (!file) return 0;
  char text[256];
  const auto n = pread(file.get(), text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* last = std::strrchr(text, ' ');
  return last ? std::strtoull(last + 1, nullptr, 16) : 0;
}

void realtime_tick() {
  const auto now = steady_now_ns();
  std::lock_guard lock{globals->mutex};
  for (auto* sampler : globals->samplers) {
    std::lock_guard arming{sampler->arming};
    if (!sampler->realtime_armed || !sampler->stat_file.still_ours()) continue;
    const char state = read_state(sampler->stat_file);
    // Running (or runnable): its own task-clock event samples it; never signalled from here.
    if (state == 'R' || state == '?' || state == 'Z' || state == 'X') continue;
    auto& sample = globals->waiting.emplace_back();
    ++globals->waiting_taken;
    sample.thread = sampler->thread;
    sample.time_ns = now;
    sample.weight_ns = globals->real.period_ns;
    sample.source = sample_source::waiting;
    sample.window = current_window();
    if (sampler->syscall_file.still_ours())
      if (const auto address = blocked_at(sampler->syscall_file); address != 0) {
        sample.addresses[0] = address;
        sample.frame_count = 1;
      }
  }
}

// A program that closes every descriptor (close_range, a shell) also closes kairos's perf
// events: those threads are armed again, on fresh descriptors.
void rearm_closed_descriptors() {
  std::lock_guard lock{globals->mutex};
  for (auto* sampler : globals->samplers) {
    std::lock_guard arming{sampler->arming};
    if (sampler->cpu_armed && sampler->perf_fd.load() >= 0 && !sampler->perf_event.still_ours()) {
      disarm_cpu(*sampler);
      arm_cpu(*sampler, false);
    }
    if (sampler->realtime_armed && !sampler->stat_file.still_ours()) {
      disarm_realtime(*sampler);
      arm_realtime(*sampler);
    }
  }
}

// The control thread at each tick, and the windows thread at each edge.
void update_windows(std::int64_t now) {
  std::lock_guard lock{globals->mutex};
  for (auto* window : {&globals->cpu, &globals->real}) {
    const bool active = window->active_at(now) && inside_window() && !globals->stopping.load();
    if (active == window->open) continue;
    window->open = active;
    for (auto* sampler : globals->samplers) {
      std::lock_guard arming{sampler->arming};
      if (window == &globals->cpu)
        active ? arm_cpu(*sampler, false) : disarm_cpu(*sampler);
      else
        active ? arm_realtime(*sampler) : disarm_realtime(*sampler);
    }
  }
}

void* control_main(void*) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-control");
  // Each wake-up of a kairos thread preempts a program thread where the program keeps every core
  // busy (more threads than cores: a steady tick meant several more preemptions of the program a
  // wake-up). So the thread sleeps until something is due: the delivery, a window's edge, a real-
  // time tick, a thread's move to perf; unwind tables are compiled every 20 ms only while samples
  // still want them (the first second of sampling, and a second after each build).
  constexpr std::int64_t tables_tick_ns = 20'000'000, tables_busy_ns = 1'000'000'000;
  std::int64_t next_realtime = globals->real.start_ns;
  std::int64_t last_delivery = steady_now_ns();
  std::int64_t tables_busy_until = 0;
  while (!globals->stopping.load(std::memory_order_acquire)) {
    auto now = steady_now_ns();
    // Checked at every wake: before a thread's move to its ring at 20 ms of age, every 20 ms in
    // the first second of sampling, every 100 ms after.
    if (globals->python_pending && python_interpreter_exists()) read_python_frames_from_now();
    update_windows(now);
    if (globals->real.open && now >= next_realtime) {
      realtime_tick();
      next_realtime += globals->real.period_ns;
      if (next_realtime < now) next_realtime = now + globals->real.period_ns;  // fell behind: skip
    }
    std::int64_t next_upgrade = 0;
    if (globals->cpu.open) {
      std::lock_guard lock{globals->mutex};
      next_upgrade = upgrade_to_perf(now);
    }
    if (globals->cpu.open && tables_busy_until == 0) tables_busy_until = now + tables_busy_ns;  // first samples
    if (kairos::unwind_tables_wanted()) {  // what the samples since the last tick missed
      own_cost_timer cost{own_cost::unwind_tables};
      kairos::build_unwind_tables();
      tables_busy_until = now + tables_busy_ns;
    }
    if (now - last_delivery >= delivery_interval_ns) {
      rearm_closed_descriptors();
      if (!globals->waiting.empty()) globals->deliver(globals->waiting);
      globals->waiting.clear();
      last_delivery = now;
    }
    std::int64_t wake = last_delivery + delivery_interval_ns;
    if (now < tables_busy_until) wake = std::min(wake, now + tables_tick_ns);
    if (globals->real.open) wake = std::min(wake, next_realtime);
    if (next_upgrade > 0) wake = std::min(wake, next_upgrade);
    for (auto* window : {&globals->cpu, &globals->real}) {
      if (window->enabled && !window->open && window->start_ns > now) wake = std::min(wake, window->start_ns);
      if (window->open && window->end_ns > now) wake = std::min(wake, window->end_ns);
    }
    timespec until{static_cast<time_t>(wake / 1'000'000'000), static_cast<long>(wake % 1'000'000'000)};
    sem_clockwait(&globals->control_wake, CLOCK_MONOTONIC, &until);
  }
  globals->control_done.store(true, std::memory_order_release);
  return nullptr;
}

// --- start and stop --------------------------------------------------------------------------

void set_window(sampler_window& window, const settings& values, bool on, setting frequency, setting delay,
                setting duration, std::int64_t origin_ns) {
  window.enabled = on;
  window.frequency_hz = values.inherited_number(frequency, setting::sampling_freq);
  window.period_ns = std::max<std::int64_t>(static_cast<std::int64_t>(std::llround(1e9 / window.frequency_hz)), 10'000);
  window.start_ns =
      origin_ns + static_cast<std::int64_t>(values.inherited_number(delay, setting::sampling_delay) * 1e9);
  const double seconds = values.inherited_number(duration, setting::sampling_duration);
  window.end_ns = seconds > 0 ? window.start_ns + static_cast<std::int64_t>(seconds * 1e9) : 0;
}

// Under the mutex, once the thread's sampling ended (end_cpu_ns).
void account_ended(thread_sampler& sampler) {
  globals->delivered_by_ended += sampler.delivered.load();
  globals->unwound_by_tables_by_ended += sampler.unwound_by_tables.load();
  globals->dropped_by_ended += sampler.dropped.load();
  globals->lost_by_ended_ns += sampler.lost_cpu_ns.load();
  globals->coverage_by_ended += coverage_of(sampler);
}

}  // namespace

cpu_coverage& cpu_coverage::operator+=(const cpu_coverage& other) {
  program_cpu_ns += other.program_cpu_ns;
  before_sampling_ns += other.before_sampling_ns;
  paused_ns += other.paused_ns;
  blocked_ns += other.blocked_ns;
  blocked_threads += other.blocked_threads;
  after_last_sample_ns += other.after_last_sample_ns;
  handler_ns += other.handler_ns;
  ring_excess_ns += other.ring_excess_ns;
  weights_ns += other.weights_ns;
  return *this;
}

void ring_drained_for_good(const thread_sampler& sampler) noexcept {
  if (!globals || !sampler.sampled_by_ring.load()) return;
  globals->ring_weights_by_ended_ns.fetch_add(sampler.ring.weights_ns);
  globals->ring_tail_by_ended_ns.fetch_add(perf_ring_tail_ns(sampler.ring));
}

bool sampling_wanted(const settings& values) {
  return values.boolean(setting::sampling_cputime) || values.boolean(setting::sampling_realtime);
}

sampling_start start_sampling(const settings& values, sample_delivery deliver, int max_writers) {
  sampling_start result;
  globals = new sampler_globals;
  globals->deliver = deliver;
  const auto origin = steady_now_ns();
  set_window(globals->cpu, values, values.boolean(setting::sampling_cputime), setting::sampling_cputime_freq,
             setting::sampling_cputime_delay, setting::sampling_cputime_duration, origin);
  set_window(globals->real, values, values.boolean(setting::sampling_realtime), setting::sampling_realtime_freq,
             setting::sampling_realtime_delay, setting::sampling_realtime_duration, origin);
  if (!sampling_wanted(values)) return result;
  const auto signal = unused_realtime_signal(SIGRTMIN + 6);
  if (!signal.has_value()) {
    result.failure = problem{signal.failure().text() + "; sampling is disabled"};
    return result;
  }
  globals->signal_number = signal.value();
  result.note = signal_choice_note(SIGRTMIN + 6, signal.value(), "sampling");
  const auto& wanted_source = values.text(setting::sampling_cputime_source);
  // The default is the ring: no signal at all. A perf event that counts the kernel signals a
  // thread inside its system calls, and a sleep entered then ends early with EINTR (some of a
  // program's short sleeps at 10 kHz; the timer, which expires only at a tick the thread runs in:
  // none).
  // Causal profiling's delays run in the sampled thread's own handler: a signal it must be.
  // Python frames are read by the handler, in the thread, at the sample: a ring's samples are read
  // by the writer after the thread has moved on to other Python code. Under `auto` that signal is
  // taken once an interpreter exists, not because libpython is linked: LAMMPS links it and may
  // never start it.
  const bool python_wanted = values.boolean(setting::sampling_python);
  globals->python = find_python(python_wanted && wanted_source != "ring");
  const bool python_now = globals->python.found && (wanted_source != "auto" || python_interpreter_exists());
  if (python_now) start_reading_python_frames();
  globals->python_pending = globals->python.found && !python_now;
  const bool signal_wanted = causal_running() || python_now;
  globals->source = wanted_source == "perf" || (wanted_source == "auto" && signal_wanted) ? cpu_source::perf
                    : wanted_source == "timer"                                            ? cpu_source::posix_timer
                                                                                          : cpu_source::ring;
  if (python_wanted && !globals->python.version.empty() && wanted_source == "ring")
    globals->python.note =
        "KAIROS_SAMPLING_CPUTIME_SOURCE=ring: Python frames are not read (a ring's samples "
        "are read after the thread moved on); auto, perf or timer read them";
  result.python = problem{globals->python.note};
  if (globals->cpu.enabled && (wanted_source == "perf" || wanted_source == "ring"))
    globals->source_wanted_explicitly = wanted_source == "perf" ? "perf" : "ring";
  struct sigaction action {};
  action.sa_sigaction = &on_sampling_signal;
  sigfillset(&action.sa_mask);  // nothing nests inside the handler
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  if (sigaction(globals->signal_number, &action, nullptr) != 0) {
    result.failure = problem{
        fmt::format("cannot install the sampling signal handler: {}; sampling is disabled", std::strerror(errno))};
    return result;
  }
  configure_writers(static_cast<int>(values.integer(setting::sampling_allocator_size)), max_writers,
                    values.boolean(setting::use_temporary_files),
                    static_cast<std::int64_t>(values.number(setting::flush_interval) * 1e9), deliver);
  // Resolves libgcc's unwinder for the process. Threads are deliberately NOT prewarmed for
  // libunwind: a prewarmed thread's capture takes unw_backtrace, which calls dl_iterate_phdr, and
  // that deadlocks (seen here with gdb in the stress test) when the sample interrupts malloc on a
  // thread while another thread's dlclose holds the loader's lock and waits in free() for the
  // same arena lock; no per-thread guard can see that cycle. Captures walk kairos's unwind tables
  // (the control thread compiles the functions samples queue) and, where those cannot finish,
  // libgcc's _Unwind_Backtrace, which finds unwind tables with glibc's lock-free _dl_find_object
  // (about ten times slower: docs/performance.md, "Backtrace capture").
  kairos::backtrace_detail::prewarm_process();
  kairos::use_unwind_tables();
  handler_active.store(true);
  enabled.store(true);
  sampling_thread_started();  // the main thread
  globals->control_running = start_internal_thread(&control_main, nullptr) == 0;
  if (!globals->control_running)
    result.note = problem{
        "could not start kairos's control thread; sampling starts only with the "
        "threads created after the sampling delay"};
  return result;
}

bool sampling_enabled() noexcept { return enabled.load(std::memory_order_acquire); }

void sampling_windows_changed() noexcept {
  if (!enabled.load(std::memory_order_acquire)) return;
  update_windows(steady_now_ns());
}

// The samplers' mutex is held only to add the thread to the list: its set-up (buffers, the
// mask, its clock's system calls) runs beside other threads' starts and ends, not after them.
void sampling_thread_started() noexcept {
  if (!enabled.load(std::memory_order_acquire) || globals->stopping.load()) return;
  reentry_guard guard;
  auto& record = current_thread();
  auto* sampler = create_sampler(record);
  if (!sampler) return;
  kairos::unwind_tables_register_thread();
  std::lock_guard arming{sampler->arming};
  {
    std::lock_guard lock{globals->mutex};
    globals->samplers.push_back(sampler);
  }
  this_thread_sampler = sampler;
  apply_windows(*sampler, true);
}

void sampling_thread_ending() noexcept {
  auto* sampler = this_thread_sampler;
  if (!sampler || !globals) return;
  this_thread_sampler = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // a handler from here on sees no sampler
  // Out of the list, nothing else arms it any more; accounted in the same hold, so that the
  // totals never miss a thread.
  sample_writer* writer = nullptr;
  {
    std::lock_guard lock{globals->mutex};
    auto& list = globals->samplers;
    list.erase(std::remove(list.begin(), list.end(), sampler), list.end());
    std::lock_guard arming{sampler->arming};
    sampler->end_cpu_ns = own_cpu_ns();
    coverage_disarmed(*sampler, sampler->end_cpu_ns);
    disarm_cpu(*sampler);
    disarm_realtime(*sampler);
    writer = sampler->writer;
    account_ended(*sampler);
  }
  if (!writer) {  // never armed: nothing was written
    for (auto* buffer : sampler->buffers) unmap_sample_buffer(buffer);
    delete sampler;
    return;
  }
  if (!release_if_never_sampled(writer, sampler))
    sampler->finished.store(true, std::memory_order_release);  // the writer delivers and frees it
  writer_thread_ended(writer);
}

void sampling_signal_mask_changed(const sigset_t& mask) noexcept {
  auto* sampler = this_thread_sampler;
  if (!sampler || !enabled.load(std::memory_order_relaxed) || sampler->sampled_by_ring.load()) return;
  const bool blocked = sigismember(&mask, globals->signal_number) == 1;
  if (blocked == sampler->signal_blocked.load(std::memory_order_relaxed)) return;
  const auto cpu_ns = own_cpu_ns();
  if (blocked) {
    // The stretch sampled by the signal ends here.
    if (sampler->armed_since_cpu_ns.load() >= 0)
      sampler->after_last_sample_ns.fetch_add(std::max<std::int64_t>(cpu_ns - sampler->last_cpu_ns, 0),
                                              std::memory_order_relaxed);
    sampler->blocked_since_cpu_ns.store(cpu_ns);
    sampler->signal_blocked.store(true);
    set_clocks_running(*sampler, false);
    sem_post(&globals->control_wake);  // the control thread gives it a ring
  } else {
    if (const auto since_ns = sampler->blocked_since_cpu_ns.exchange(-1); since_ns >= 0)
      add_blocked(*sampler, since_ns, cpu_ns);
    // The next sample weighs only what ran since now, not the blocked stretch.
    sampler->last_cpu_ns = cpu_ns;
    sampler->signal_blocked.store(false);
    set_clocks_running(*sampler, true);
    if (sampler->signal_blocked.load()) set_clocks_running(*sampler, false);
  }
}

void stop_sampling() noexcept {
  if (!enabled.exchange(false)) return;
  globals->stopping.store(true);
  sem_post(&globals->control_wake);
  if (globals->control_running) wait_until([] { return globals->control_done.load(); }, std::chrono::seconds{2});
  {
    std::lock_guard lock{globals->mutex};
    globals->cpu.open = false;
    globals->real.open = false;
    for (auto* sampler : globals->samplers) {
      std::lock_guard arming{sampler->arming};
      // The whole ends here: what runs after (kairos's own finalizing, on this thread) is not the program's.
      sampler->end_cpu_ns = thread_cpu_ns(sampler->thread->tid);
      coverage_disarmed(*sampler, sampler->end_cpu_ns);
      disarm_cpu(*sampler);
      disarm_realtime(*sampler);
    }
  }
  handler_active.store(false);
  stop_writers_and_drain();
  if (!globals->waiting.empty()) globals->deliver(globals->waiting);
  globals->waiting.clear();
}

sampling_summary sampling_totals() noexcept {
  sampling_summary summary;
  if (!globals) return summary;
  summary.enabled = globals->cpu.enabled || globals->real.enabled;
  if (globals->cpu.enabled)
    summary.cpu_source = globals->source == cpu_source::ring   ? "perf ring buffer"
                         : globals->source == cpu_source::perf ? "perf task-clock"
                                                               : "POSIX CPU timer";
  summary.signal_number = globals->signal_number;
  summary.python_version = globals->python.version;
  summary.python_note = globals->python.note;
  const auto tables = kairos::unwind_table_counts();
  summary.unwind_table_functions = tables.functions;
  summary.unwind_table_rows = tables.rows;
  std::lock_guard lock{globals->mutex};
  summary.delivered = globals->delivered_by_ended + globals->waiting_taken;
  summary.unwound_by_tables = globals->unwound_by_tables_by_ended;
  summary.dropped = globals->dropped_by_ended;
  summary.lost_cpu_ns = globals->lost_by_ended_ns;
  summary.coverage = globals->coverage_by_ended;
  add_ring_coverage(summary.coverage, globals->ring_weights_by_ended_ns.load(), globals->ring_tail_by_ended_ns.load());
  summary.threads_by_ring = globals->threads_by_ring.load();
  const auto writers = writers_counts();
  summary.delivered += writers.ring_samples;
  summary.unwound_by_tables += writers.ring_unwound_by_tables;
  summary.dropped += writers.ring_lost;
  summary.lost_cpu_ns += writers.ring_lost_ns;
  summary.cut_stacks = writers.cut_stacks;
  summary.chained_stacks = writers.chained_stacks;
  for (auto* sampler : globals->samplers) {
    summary.delivered += sampler->delivered.load();
    summary.unwound_by_tables += sampler->unwound_by_tables.load();
    summary.dropped += sampler->dropped.load();
    summary.lost_cpu_ns += sampler->lost_cpu_ns.load();
    std::lock_guard arming{sampler->arming};
    summary.coverage += coverage_of(*sampler);
    // Drained for good by now (stop_sampling).
    if (sampler->sampled_by_ring.load())
      add_ring_coverage(summary.coverage, sampler->ring.weights_ns, perf_ring_tail_ns(sampler->ring));
  }
  return summary;
}

void sampling_lock_for_fork() noexcept {
  if (globals) globals->mutex.lock();
  writers_lock_for_fork();
}
void sampling_unlock_after_fork_in_parent() noexcept {
  writers_unlock_after_fork_in_parent();
  if (globals) globals->mutex.unlock();
}

void sampling_forget_after_fork_in_child() noexcept {
  if (!globals) return;
  // The parent's events and files: the child's copies are closed where they are still kairos's
  // (the program may have reused a number since), never otherwise.
  for (auto* sampler : globals->samplers) {
    sampler->perf_event.close_if_ours();
    close_perf_ring(sampler->ring);
    sampler->realtime_perf_event.close_if_ours();
    sampler->stat_file.close_if_ours();
    sampler->syscall_file.close_if_ours();
  }
  this_thread_sampler = nullptr;
  writers_forget_after_fork_in_child();
  globals = nullptr;  // leaked with its locked mutex: a child is not sampled (docs/runtime.md)
  enabled.store(false);
  handler_active.store(false);
}

}  // namespace kairos::runtime
