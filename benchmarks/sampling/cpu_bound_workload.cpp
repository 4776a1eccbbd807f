// The program the profilers are compared on (benchmarks/sampling/overhead.py): a fixed amount
// of CPU-bound work shared evenly by N threads (default 2), each thread's share split 75/25
// between two functions whatever N is, so slower runs mean profiler overhead. A work unit is
// ≈11 ms of CPU on the project's VMs. Prints its workers' CPU time (the sum of their thread CPU clocks, without any
// profiler thread's), which with a frequency gives the samples a profiler should deliver.
//
//   cpu_bound_workload [work units, default 400] [--threads N] [--empty-handler HZ]
//
// Prints "cpu_seconds S signals N checksum C end_monotonic_ns T", T when it was done.
//
// --empty-handler HZ: the floor any sampler pays. Each thread gets a perf task-clock event that
// signals it every 1/HZ s of its CPU time, into a handler that only counts.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

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

struct worker_result {
  double checksum = 0;
  double cpu_seconds = 0;
};

worker_result worker(long units) {
  const int fd = empty_handler_hz > 0 ? sample_this_thread(empty_handler_hz) : -1;
  // 75% of this thread's work in heavy_function, 25% in light_function, interleaved.
  worker_result result;
  for (long round = 0; round < units; ++round) result.checksum += heavy_function(3) + light_function(1);
  if (fd >= 0) close(fd);
  timespec cpu_time{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_time);
  result.cpu_seconds = cpu_time.tv_sec + cpu_time.tv_nsec * 1e-9;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  long units = 400;
  long threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--empty-handler") == 0 && i + 1 < argc)
      empty_handler_hz = std::atol(argv[++i]);
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::atol(argv[++i]);
    else
      units = std::atol(argv[i]);
  }
  if (threads < 1 || units < threads) {
    std::fprintf(stderr,
                 "cpu_bound_workload: %ld work units cannot be shared by %ld threads; give each "
                 "thread at least one unit\n",
                 units, threads);
    return 2;
  }
  if (empty_handler_hz > 0) {
    struct sigaction action {};
    action.sa_sigaction = count_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &action, nullptr);
  }
  // Thread 0 (main) takes the remainder, the others units / threads each.
  std::vector<worker_result> results(static_cast<std::size_t>(threads));
  std::vector<std::thread> others;
  for (long index = 1; index < threads; ++index)
    others.emplace_back(
        [&results, index, units, threads] { results[static_cast<std::size_t>(index)] = worker(units / threads); });
  results[0] = worker(units - (threads - 1) * (units / threads));
  for (auto& other : others) other.join();

  double cpu_seconds = 0, checksum = 0;
  for (const auto& result : results) {
    cpu_seconds += result.cpu_seconds;
    checksum += result.checksum;
  }
  // The program's last instruction, on the clock a benchmark reads when the profiler has exited
  // (benchmarks/sampling/exit_time.py).
  timespec end{};
  clock_gettime(CLOCK_MONOTONIC, &end);
  std::printf("cpu_seconds %.4f signals %ld checksum %.6g end_monotonic_ns %lld\n", cpu_seconds, handled_signals.load(),
              checksum, static_cast<long long>(end.tv_sec) * 1'000'000'000 + end.tv_nsec);
}
