#include "preload/sampling/sampler.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/backtrace.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/profile_database.hpp"
#include "preload/reentry_guard.hpp"
#include "preload/sampling/sample_writer.hpp"
#include "preload/thread_registry.hpp"

namespace kairos::runtime {
namespace {

struct sampler_window {
  bool enabled = false;
  double frequency_hz = 0;
  std::int64_t period_ns = 0;
  std::int64_t start_ns = 0;  // steady clock
  std::int64_t end_ns = 0;    // 0: until exit
  bool open = false;          // armed right now (under the samplers' mutex)

  bool active_at(std::int64_t now_ns) const {
    return enabled && now_ns >= start_ns && (end_ns == 0 || now_ns < end_ns);
  }
};

enum class cpu_source { perf, posix_timer };

struct sampler_globals {
  std::mutex mutex;  // samplers and arming
  std::vector<thread_sampler*> samplers;
  sampler_window cpu, real;
  cpu_source source = cpu_source::perf;
  int signal_number = 0;
  std::atomic<bool> stopping{false};
  // The control thread sleeps on it between ticks; stop_sampling posts it so finalize does not
  // wait out the rest of a tick (up to 20 ms at every process exit).
  sem_t control_wake;
  std::atomic<bool> control_done{false};
  bool control_running = false;
  std::uint64_t delivered_by_ended = 0, dropped_by_ended = 0;  // threads already gone
  std::vector<pending_sample> waiting;  // control thread only

  sampler_globals() { sem_init(&control_wake, 0, 0); }
};
sampler_globals* globals = nullptr;
std::atomic<bool> handler_active{false};
std::atomic<bool> enabled{false};

[[gnu::tls_model("initial-exec")]] thread_local thread_sampler* this_thread_sampler = nullptr;

std::int64_t to_ns(const timespec& time) { return time.tv_sec * 1'000'000'000ll + time.tv_nsec; }

// The CPU clock of any thread of this process (the kernel's encoding: CPUCLOCK_PERTHREAD |
// CPUCLOCK_SCHED), so the control thread can arm other threads.
clockid_t thread_cpu_clock(pid_t tid) { return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6); }

std::int64_t thread_cpu_ns(pid_t tid) {
  timespec now{};
  if (clock_gettime(thread_cpu_clock(tid), &now) != 0) return 0;
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

void take_sample(thread_sampler& sampler, sample_source source, const ucontext_t* context) noexcept {
  timespec now{}, cpu{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  const auto cpu_ns = to_ns(cpu);
  std::int64_t weight_ns = globals->real.period_ns;
  if (source == sample_source::cpu_time) {
    weight_ns = std::max<std::int64_t>(cpu_ns - sampler.last_cpu_ns, 0);
    sampler.last_cpu_ns = cpu_ns;
  }
  auto* buffer = buffer_to_fill(sampler);
  if (!buffer) {
    sampler.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto index = buffer->committed.load(std::memory_order_relaxed);
  auto& record = buffer->records[index];
  record.time_ns = to_ns(now);
  record.weight_ns = weight_ns;
  record.thread_cpu_ns = cpu_ns;
  record.source = source;
  record.stack.sample(context);
  buffer->committed.store(index + 1, std::memory_order_release);
  sampler.delivered.fetch_add(1, std::memory_order_relaxed);
  if (index + 1 == sample_buffer::capacity) {
    buffer->state.store(sample_buffer::full_state, std::memory_order_release);
    hand_over_full_buffer(sampler.writer, buffer);
  }
}

void on_sampling_signal(int, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  auto* sampler = this_thread_sampler;
  if (sampler && handler_active.load(std::memory_order_relaxed)) {
    // The real-time sampler's own perf event (si_fd names it), else CPU time (perf or SI_TIMER).
    const bool real_time = info->si_code > 0 && sampler->realtime_perf_fd >= 0 && info->si_fd == sampler->realtime_perf_fd;
    const auto source = real_time ? sample_source::real_time : sample_source::cpu_time;
    take_sample(*sampler, source, static_cast<const ucontext_t*>(context));
  }
  errno = saved_errno;
}

// --- arming ----------------------------------------------------------------------------------

int open_task_clock(pid_t tid, std::int64_t period_ns) {
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_TASK_CLOCK;
  attributes.sample_period = static_cast<std::uint64_t>(period_ns);
  attributes.disabled = 1;
  attributes.exclude_hv = 1;
  attributes.wakeup_events = 1;
  // User mode only: an overflow while the thread is in the kernel (say, entering nanosleep) would
  // leave a signal pending that cuts the sleep short. Kernel time is not lost: weights are CPU-time
  // deltas, so it counts towards the next sample.
  attributes.exclude_kernel = 1;
  auto open = [&] {
    return static_cast<int>(syscall(SYS_perf_event_open, &attributes, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  };
  const int fd = open();
  if (fd < 0) return -1;
  f_owner_ex owner{F_OWNER_TID, tid};
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC | O_NONBLOCK) != 0 ||
      fcntl(fd, F_SETSIG, globals->signal_number) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
      ioctl(fd, PERF_EVENT_IOC_RESET, 0) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool open_posix_timer(thread_sampler& sampler, std::int64_t period_ns) {
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = globals->signal_number;
  event._sigev_un._tid = sampler.thread->tid;
  if (timer_create(thread_cpu_clock(sampler.thread->tid), &event, &sampler.timer) != 0) return false;
  itimerspec every{};
  every.it_interval.tv_sec = period_ns / 1'000'000'000;
  every.it_interval.tv_nsec = period_ns % 1'000'000'000;
  every.it_value = every.it_interval;
  if (timer_settime(sampler.timer, 0, &every, nullptr) != 0) {
    timer_delete(sampler.timer);
    return false;
  }
  sampler.has_timer = true;
  return true;
}

// Under globals->mutex.
void arm_cpu(thread_sampler& sampler) {
  if (sampler.cpu_armed || sampler.finished.load()) return;
  sampler.last_cpu_ns = thread_cpu_ns(sampler.thread->tid);
  if (globals->source == cpu_source::perf) {
    sampler.perf_fd = open_task_clock(sampler.thread->tid, globals->cpu.period_ns);
    sampler.cpu_armed = sampler.perf_fd >= 0;
  } else {
    sampler.cpu_armed = open_posix_timer(sampler, globals->cpu.period_ns);
  }
}

void disarm_cpu(thread_sampler& sampler) {
  if (sampler.perf_fd >= 0) {
    ioctl(sampler.perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    close(sampler.perf_fd);
    sampler.perf_fd = -1;
  }
  if (sampler.has_timer) {
    timer_delete(sampler.timer);
    sampler.has_timer = false;
  }
  sampler.cpu_armed = false;
}

void arm_realtime(thread_sampler& sampler) {
  if (sampler.realtime_armed || sampler.finished.load()) return;
  const auto directory = fmt::format("/proc/self/task/{}/", sampler.thread->tid);
  sampler.stat_fd = open((directory + "stat").c_str(), O_RDONLY | O_CLOEXEC);
  sampler.syscall_fd = open((directory + "syscall").c_str(), O_RDONLY | O_CLOEXEC);
  if (globals->source == cpu_source::perf)
    sampler.realtime_perf_fd = open_task_clock(sampler.thread->tid, globals->real.period_ns);
  sampler.realtime_armed = sampler.stat_fd >= 0;
}

void disarm_realtime(thread_sampler& sampler) {
  if (sampler.realtime_perf_fd >= 0) {
    ioctl(sampler.realtime_perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    close(sampler.realtime_perf_fd);
    sampler.realtime_perf_fd = -1;
  }
  if (sampler.stat_fd >= 0) close(sampler.stat_fd);
  if (sampler.syscall_fd >= 0) close(sampler.syscall_fd);
  sampler.stat_fd = sampler.syscall_fd = -1;
  sampler.realtime_armed = false;
}

void apply_windows(thread_sampler& sampler) {
  if (globals->cpu.open) arm_cpu(sampler);
  if (globals->real.open) arm_realtime(sampler);
}

thread_sampler* create_sampler(thread_record& record) {
  auto* sampler = new thread_sampler;
  sampler->thread = &record;
  sampler->buffers[0] = map_sample_buffer(sampler);
  sampler->buffers[1] = map_sample_buffer(sampler);
  if (!sampler->buffers[0]) {
    unmap_sample_buffer(sampler->buffers[1]);
    delete sampler;
    return nullptr;
  }
  sampler->buffers[0]->state.store(sample_buffer::filling_state);
  sampler->writer = assign_writer(sampler);
  record.sampler.store(sampler, std::memory_order_release);
  globals->samplers.push_back(sampler);
  return sampler;
}

// --- the real-time sampler (control thread) --------------------------------------------------

// The state letter of /proc/self/task/<tid>/stat ("R" running, "S"/"D" waiting, ...).
char read_state(int fd) {
  char text[512];
  const auto n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return '?';
  text[n] = '\0';
  const char* close_paren = std::strrchr(text, ')');  // the name may hold spaces and parentheses
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

// The user-space address of a thread blocked in a system call: the last field of
// /proc/self/task/<tid>/syscall ("nr args... sp pc"); 0 when unknown.
std::uint64_t blocked_at(int fd) {
  if (fd < 0) return 0;
  char text[256];
  const auto n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* last = std::strrchr(text, ' ');
  return last ? std::strtoull(last + 1, nullptr, 16) : 0;
}

void realtime_tick() {
  const auto now = steady_now_ns();
  std::lock_guard lock{globals->mutex};
  for (auto* sampler : globals->samplers) {
    if (!sampler->realtime_armed) continue;
    const char state = read_state(sampler->stat_fd);
    // Running (or runnable): its own task-clock event samples it; never signalled from here.
    if (state == 'R' || state == '?' || state == 'Z' || state == 'X') continue;
    auto& sample = globals->waiting.emplace_back();
    sample.thread = sampler->thread;
    sample.time_ns = now;
    sample.weight_ns = globals->real.period_ns;
    sample.source = sample_source::waiting;
    if (const auto address = blocked_at(sampler->syscall_fd); address != 0) {
      sample.addresses[0] = address;
      sample.frame_count = 1;
    }
  }
}

void update_windows(std::int64_t now) {
  for (auto* window : {&globals->cpu, &globals->real}) {
    const bool active = window->active_at(now) && !globals->stopping.load();
    if (active == window->open) continue;
    std::lock_guard lock{globals->mutex};
    window->open = active;
    for (auto* sampler : globals->samplers) {
      if (window == &globals->cpu) active ? arm_cpu(*sampler) : disarm_cpu(*sampler);
      else active ? arm_realtime(*sampler) : disarm_realtime(*sampler);
    }
  }
}

void* control_main(void*) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-control");
  constexpr std::int64_t idle_tick_ns = 20'000'000;
  constexpr std::int64_t sync_every_ns = 100'000'000;
  std::int64_t next_realtime = globals->real.start_ns;
  std::int64_t last_sync = steady_now_ns();
  while (!globals->stopping.load(std::memory_order_acquire)) {
    auto now = steady_now_ns();
    update_windows(now);
    if (globals->real.open && now >= next_realtime) {
      realtime_tick();
      next_realtime += globals->real.period_ns;
      if (next_realtime < now) next_realtime = now + globals->real.period_ns;  // fell behind: skip
    }
    if (now - last_sync >= sync_every_ns) {
      try {
        database_add_samples(globals->waiting);
        globals->waiting.clear();
        database_sync(false);
      } catch (...) {
      }
      last_sync = now;
    }
    std::int64_t wake = now + idle_tick_ns;
    if (globals->real.open) wake = std::min(wake, next_realtime);
    for (auto* window : {&globals->cpu, &globals->real})
      if (window->enabled && !window->open && window->start_ns > now) wake = std::min(wake, window->start_ns);
    timespec until{static_cast<time_t>(wake / 1'000'000'000), static_cast<long>(wake % 1'000'000'000)};
    sem_clockwait(&globals->control_wake, CLOCK_MONOTONIC, &until);
  }
  globals->control_done.store(true, std::memory_order_release);
  return nullptr;
}

// --- the signal ------------------------------------------------------------------------------

// A real-time signal rather than SIGPROF: the program's own SIGPROF (setitimer, gperftools) keeps
// working untouched, and real-time signals queue instead of merging. The first one, from
// SIGRTMIN + 6 up, that the program left at its default action.
int choose_signal(std::string& note) {
  const int preferred = SIGRTMIN + 6;
  for (int candidate = preferred; candidate <= SIGRTMAX; ++candidate) {
    struct sigaction current {};
    if (sigaction(candidate, nullptr, &current) != 0) continue;
    const bool taken = (current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL;
    if (taken) continue;
    if (candidate != preferred)
      note = fmt::format("[kairos] the program handles signal SIGRTMIN+{}; sampling uses SIGRTMIN+{} instead",
                         preferred - SIGRTMIN, candidate - SIGRTMIN);
    return candidate;
  }
  return 0;
}

sampler_window window_of(const settings& values, bool enabled, std::string_view frequency,
                         std::string_view delay, std::string_view duration, std::int64_t origin_ns) {
  sampler_window window;
  window.enabled = enabled;
  window.frequency_hz = values.inherited_number(frequency, "KAIROS_SAMPLING_FREQ");
  window.period_ns = std::max<std::int64_t>(static_cast<std::int64_t>(std::llround(1e9 / window.frequency_hz)), 10'000);
  window.start_ns = origin_ns + static_cast<std::int64_t>(values.inherited_number(delay, "KAIROS_SAMPLING_DELAY") * 1e9);
  const double seconds = values.inherited_number(duration, "KAIROS_SAMPLING_DURATION");
  window.end_ns = seconds > 0 ? window.start_ns + static_cast<std::int64_t>(seconds * 1e9) : 0;
  return window;
}

bool perf_task_clock_works() {
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_TASK_CLOCK;
  attributes.sample_period = 1'000'000;
  attributes.disabled = 1;
  attributes.exclude_kernel = 1;
  const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attributes, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return false;
  close(fd);
  return true;
}

}  // namespace

bool start_sampling(const settings& values, std::string& problem, std::string& note) {
  globals = new sampler_globals;
  const auto origin = steady_now_ns();
  globals->cpu = window_of(values, values.boolean("KAIROS_SAMPLING_CPUTIME"), "KAIROS_SAMPLING_CPUTIME_FREQ",
                           "KAIROS_SAMPLING_CPUTIME_DELAY", "KAIROS_SAMPLING_CPUTIME_DURATION", origin);
  globals->real = window_of(values, values.boolean("KAIROS_SAMPLING_REALTIME"), "KAIROS_SAMPLING_REALTIME_FREQ",
                            "KAIROS_SAMPLING_REALTIME_DELAY", "KAIROS_SAMPLING_REALTIME_DURATION", origin);
  if (!globals->cpu.enabled && !globals->real.enabled) return false;
  globals->signal_number = choose_signal(note);
  if (globals->signal_number == 0) {
    problem = "[kairos] every real-time signal is handled by the program; sampling is disabled";
    return false;
  }
  const auto& wanted_source = values.text("KAIROS_SAMPLING_CPUTIME_SOURCE");
  const bool perf_works = wanted_source != "timer" && perf_task_clock_works();
  if (wanted_source == "perf" && !perf_works && globals->cpu.enabled)
    note = "[kairos] KAIROS_SAMPLING_CPUTIME_SOURCE=perf but perf_event_open refuses a task-clock "
           "event here (see /proc/sys/kernel/perf_event_paranoid); using the POSIX CPU timer";
  globals->source = perf_works ? cpu_source::perf : cpu_source::posix_timer;
  struct sigaction action {};
  action.sa_sigaction = &on_sampling_signal;
  sigfillset(&action.sa_mask);  // nothing nests inside the handler
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  if (sigaction(globals->signal_number, &action, nullptr) != 0) {
    problem = fmt::format("[kairos] cannot install the sampling signal handler: {}; sampling is disabled",
                          std::strerror(errno));
    return false;
  }
  configure_writers(static_cast<int>(values.integer("KAIROS_SAMPLING_ALLOCATOR_SIZE")),
                    values.boolean("KAIROS_USE_TEMPORARY_FILES"),
                    static_cast<std::int64_t>(values.number("KAIROS_FLUSH_INTERVAL") * 1e9));
  // Resolves libgcc's unwinder for the process. Threads are deliberately NOT prewarmed for
  // libunwind: a prewarmed thread's capture takes unw_backtrace, which calls dl_iterate_phdr, and
  // that deadlocks (seen here with gdb in the stress test) when the sample interrupts malloc on a
  // thread while another thread's dlclose holds the loader's lock and waits in free() for the
  // same arena lock; no per-thread guard can see that cycle. On a thread that was not prewarmed,
  // capture uses libgcc's _Unwind_Backtrace, which finds unwind tables with glibc's lock-free
  // _dl_find_object: ≈2 µs instead of ≈0.25 µs per sample, next to a ≈22 µs signal.
  kairos::backtrace_detail::prewarm_process();
  {
    std::lock_guard lock{globals->mutex};
    this_thread_sampler = create_sampler(current_thread());
  }
  handler_active.store(true);
  enabled.store(true);
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  {
    reentry_guard guard;
    globals->control_running = pthread_create(&thread, &attributes, &control_main, nullptr) == 0;
  }
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return true;
}

bool sampling_enabled() noexcept { return enabled.load(std::memory_order_acquire); }

void sampling_thread_started() noexcept {
  if (!enabled.load(std::memory_order_acquire) || globals->stopping.load()) return;
  reentry_guard guard;
  auto& record = current_thread();
  std::lock_guard lock{globals->mutex};
  auto* sampler = create_sampler(record);
  if (!sampler) return;
  this_thread_sampler = sampler;
  apply_windows(*sampler);
}

void sampling_thread_ending() noexcept {
  auto* sampler = this_thread_sampler;
  if (!sampler || !globals) return;
  this_thread_sampler = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // a handler from here on sees no sampler
  {
    std::lock_guard lock{globals->mutex};
    disarm_cpu(*sampler);
    disarm_realtime(*sampler);
    auto& list = globals->samplers;
    list.erase(std::remove(list.begin(), list.end(), sampler), list.end());
    globals->delivered_by_ended += sampler->delivered.load();
    globals->dropped_by_ended += sampler->dropped.load();
  }
  sampler->finished.store(true, std::memory_order_release);  // the writer drains and frees it
}

void stop_sampling() noexcept {
  if (!enabled.exchange(false)) return;
  globals->stopping.store(true);
  sem_post(&globals->control_wake);
  for (int waited = 0; globals->control_running && !globals->control_done.load() && waited < 2000; ++waited)
    usleep(1000);
  {
    std::lock_guard lock{globals->mutex};
    for (auto* sampler : globals->samplers) {
      disarm_cpu(*sampler);
      disarm_realtime(*sampler);
    }
    globals->cpu.open = globals->real.open = false;
  }
  handler_active.store(false);
  try {
    stop_writers_and_drain();
    database_add_samples(globals->waiting);
    globals->waiting.clear();
  } catch (...) {
  }
}

sampling_summary sampling_totals() noexcept {
  sampling_summary summary;
  if (!globals) return summary;
  summary.enabled = globals->cpu.enabled || globals->real.enabled;
  if (globals->cpu.enabled)
    summary.cpu_source = globals->source == cpu_source::perf ? "perf task-clock" : "POSIX CPU timer";
  summary.signal_number = globals->signal_number;
  std::lock_guard lock{globals->mutex};
  summary.delivered = globals->delivered_by_ended;
  summary.dropped = globals->dropped_by_ended;
  for (auto* sampler : globals->samplers) {
    summary.delivered += sampler->delivered.load();
    summary.dropped += sampler->dropped.load();
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

void sampling_after_fork_in_child(bool followed) noexcept {
  if (!globals) return;
  // The parent's events, timers and descriptors are the parent's: close this copy of them.
  for (auto* sampler : globals->samplers) {
    if (sampler->perf_fd >= 0) close(sampler->perf_fd);
    if (sampler->realtime_perf_fd >= 0) close(sampler->realtime_perf_fd);
    if (sampler->stat_fd >= 0) close(sampler->stat_fd);
    if (sampler->syscall_fd >= 0) close(sampler->syscall_fd);
  }
  this_thread_sampler = nullptr;
  forget_writers_after_fork();
  globals = nullptr;
  enabled.store(false);
  handler_active.store(false);
  (void)followed;  // a followed child is not sampled (see docs/runtime.md)
}

}  // namespace kairos::runtime
