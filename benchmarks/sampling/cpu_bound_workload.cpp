// The program the profilers are compared on: two threads doing a fixed amount of CPU-bound work,
// split 75/25 between two functions, so slower runs mean profiler overhead. Prints its process
// CPU time, which with a frequency gives the samples a profiler should deliver.
//
//   cpu_bound_workload [work units, default 400] [--empty-handler HZ]
//
// --empty-handler HZ: the floor any sampler pays. Each thread gets a perf task-clock event that
// signals it every 1/HZ s of its CPU time, into a handler that only counts.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

std::atomic<long> handled_signals{0};
long empty_handler_hz = 0;

void count_signal(int, siginfo_t*, void*) { handled_signals.fetch_add(1, std::memory_order_relaxed); }

// Signals the calling thread every 1/hz seconds of its CPU time (perf task-clock overflow).
int sample_this_thread(long hz) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = static_cast<__u64>(1'000'000'000 / hz);
  attr.exclude_kernel = 1;
  attr.disabled = 1;
  attr.wakeup_events = 1;
  const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    std::perror("perf_event_open");
    std::exit(2);
  }
  f_owner_ex owner{F_OWNER_TID, static_cast<pid_t>(syscall(SYS_gettid))};
  fcntl(fd, F_SETOWN_EX, &owner);
  fcntl(fd, F_SETSIG, SIGPROF);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
  ioctl(fd, PERF_EVENT_IOC_REFRESH, 0);
  ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  return fd;
}

[[gnu::noinline]] double heavy_function(long units) {
  double sum = 0;
  for (long i = 0; i < units * 200'000; ++i) sum += std::sqrt(static_cast<double>(i) + sum * 1e-9);
  return sum;
}

[[gnu::noinline]] double light_function(long units) {
  double sum = 0;
  for (long i = 0; i < units * 200'000; ++i) sum += std::cbrt(static_cast<double>(i) + sum * 1e-9);
  return sum;
}

double worker(long units) {
  const int fd = empty_handler_hz > 0 ? sample_this_thread(empty_handler_hz) : -1;
  // 75% of this thread's work in heavy_function, 25% in light_function, interleaved.
  double sum = 0;
  for (long round = 0; round < units; ++round) sum += heavy_function(3) + light_function(1);
  if (fd >= 0) close(fd);
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  long units = 400;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--empty-handler") == 0 && i + 1 < argc)
      empty_handler_hz = std::atol(argv[++i]);
    else
      units = std::atol(argv[i]);
  }
  if (empty_handler_hz > 0) {
    struct sigaction action {};
    action.sa_sigaction = count_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &action, nullptr);
  }
  double results[2] = {};
  std::thread second{[&] { results[1] = worker(units / 2); }};
  results[0] = worker(units - units / 2);
  second.join();

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu_seconds = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                             usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
  std::printf("cpu_seconds %.4f signals %ld checksum %.6g\n", cpu_seconds, handled_signals.load(),
              results[0] + results[1]);
}
