// A program for the sampling tests (plugins/runtime/tests/sampling_tests.py), one mode per test:
//   split SECONDS      two threads burn CPU 75/25 in two known functions (exact by thread CPU time)
//   busy-until-signal  prints "ready", burns CPU until killed
//   abort-after SECONDS  burns CPU, then abort()
//   sleeps COUNT MS    sleeps COUNT times MS milliseconds; prints how many were cut short
//   own-sigprof SECONDS  its own SIGPROF handler and ITIMER_PROF; prints how many it received
//   stress SECONDS     threads loop dlopen/dlclose, malloc/free, fork, while one burns CPU
//   alloc-hook SECONDS malloc hooked: counts allocations made inside any signal handler
//   churn COUNT ALIVE  COUNT short threads (each a few microseconds of work), ALIVE at a time
//   syscalls SECONDS   alternates read(/dev/urandom, 64 KiB) x4 and a multiply loop for SECONDS of
//                      CPU time; prints the thread CPU time (user + kernel) each spent
//   blocked-worker SECONDS  a worker that blocks every signal burns 2/3 of the CPU, main 1/3
//   start-routines SECONDS  two threads made by pthread_create, whose start routines are
//                      signalled_routine and blocking_routine (it blocks every signal), burn CPU
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

std::int64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1'000'000'000ll + now.tv_nsec;
}
std::int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1'000'000'000ll + now.tv_nsec;
}

volatile double sink = 0;

// Each burns CPU until its thread has used `cpu_ns` of it, the arithmetic in the function itself
// (different constants, so the compiler cannot fold the two into one).
[[gnu::noinline]] void compute_three_quarters(std::int64_t cpu_ns) {
  const auto until = thread_cpu_ns() + cpu_ns;
  double value = 1.0;
  while (thread_cpu_ns() < until)
    for (int i = 0; i < 20000; ++i) value = value * 1.0000001 + 0.0000001;
  sink = value;
}
[[gnu::noinline]] void compute_one_quarter(std::int64_t cpu_ns) {
  const auto until = thread_cpu_ns() + cpu_ns;
  double value = 2.0;
  while (thread_cpu_ns() < until)
    for (int i = 0; i < 20000; ++i) value = value * 1.0000003 - 0.0000002;
  sink = value;
}

std::atomic<bool> stop{false};

void split(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds * 1e9);
  std::int64_t cpu_a = 0, cpu_b = 0;
  std::thread a([&] {
    compute_three_quarters(total * 3 / 4);
    cpu_a = thread_cpu_ns();
  });
  std::thread b([&] {
    compute_one_quarter(total / 4);
    cpu_b = thread_cpu_ns();
  });
  a.join();
  b.join();
  std::printf("cpu_ns three_quarters=%lld one_quarter=%lld\n", static_cast<long long>(cpu_a),
              static_cast<long long>(cpu_b));
}

// Most of its CPU time is the kernel's (urandom's generator), charged to this function's call.
[[gnu::noinline]] void read_random(int descriptor) {
  static char bytes[64 * 1024];
  for (int i = 0; i < 4; ++i)
    if (read(descriptor, bytes, sizeof bytes) < 0 && errno != EINTR) std::abort();
}
[[gnu::noinline]] void multiply_loop() {
  double value = 1.0;
  for (int i = 0; i < 200'000; ++i) value = value * 1.0000001 + 0.0000001;
  sink = value;
}

void syscalls(double seconds) {
  const int descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) std::abort();
  std::int64_t in_read = 0, in_loop = 0;
  const auto until = thread_cpu_ns() + static_cast<std::int64_t>(seconds * 1e9);
  while (thread_cpu_ns() < until) {
    auto before = thread_cpu_ns();
    read_random(descriptor);
    const auto middle = thread_cpu_ns();
    multiply_loop();
    in_read += middle - before;
    in_loop += thread_cpu_ns() - middle;
  }
  close(descriptor);
  std::printf("cpu_ns read_random=%lld multiply_loop=%lld\n", static_cast<long long>(in_read),
              static_cast<long long>(in_loop));
}

// liblzma's workers do this: every signal blocked for the thread's whole life.
[[gnu::noinline]] void blocked_worker_burn(std::int64_t cpu_ns) { compute_three_quarters(cpu_ns); }
[[gnu::noinline]] void main_thread_burn(std::int64_t cpu_ns) { compute_one_quarter(cpu_ns); }

void blocked_worker(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds * 1e9);
  std::int64_t worker_cpu = 0;
  std::thread worker([&] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    blocked_worker_burn(total * 2 / 3);
    worker_cpu = thread_cpu_ns();
  });
  main_thread_burn(total / 3);
  worker.join();
  std::printf("cpu_ns worker=%lld main=%lld\n", static_cast<long long>(worker_cpu),
              static_cast<long long>(thread_cpu_ns()));
}

// A thread's start routine is the root of its stacks, as without a profiler (under libc's
// start_thread): whatever kairos runs to start the thread is not seen.
extern "C" [[gnu::noinline]] void* signalled_routine(void* cpu_ns) {
  compute_three_quarters(*static_cast<std::int64_t*>(cpu_ns));
  return nullptr;
}
extern "C" [[gnu::noinline]] void* blocking_routine(void* cpu_ns) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  compute_one_quarter(*static_cast<std::int64_t*>(cpu_ns));
  return nullptr;
}

void start_routines(double seconds) {
  std::int64_t cpu_ns = static_cast<std::int64_t>(seconds * 1e9);
  pthread_t signalled, blocking;
  if (pthread_create(&signalled, nullptr, &signalled_routine, &cpu_ns) != 0 ||
      pthread_create(&blocking, nullptr, &blocking_routine, &cpu_ns) != 0) {
    std::perror("pthread_create");
    std::exit(1);
  }
  pthread_join(signalled, nullptr);
  pthread_join(blocking, nullptr);
}

[[gnu::noinline]] void spin_until_stopped() {
  double value = 1.0;
  while (!stop.load(std::memory_order_relaxed))
    for (int i = 0; i < 20000; ++i) value = value * 1.0000001 + 0.0000001;
  sink = value;
}

int sleeps(int count, int milliseconds) {
  int short_sleeps = 0, interrupted = 0;
  std::thread other([&] {  // a second sleeping thread, so the sampler has several to look at
    for (int i = 0; i < count; ++i) {
      timespec pause{0, milliseconds * 1'000'000l};
      const auto start = monotonic_ns();
      if (nanosleep(&pause, nullptr) != 0) ++interrupted;
      if (monotonic_ns() - start < milliseconds * 1'000'000ll) ++short_sleeps;
    }
  });
  for (int i = 0; i < count; ++i) {
    const auto start = monotonic_ns();
    const unsigned left = usleep(static_cast<useconds_t>(milliseconds) * 1000);
    if (left != 0) ++interrupted;
    if (monotonic_ns() - start < milliseconds * 1'000'000ll) ++short_sleeps;
  }
  other.join();
  std::printf("sleeps=%d short=%d interrupted=%d\n", 2 * count, short_sleeps, interrupted);
  return short_sleeps + interrupted == 0 ? 0 : 1;
}

std::atomic<int> sigprof_received{0};
void on_sigprof(int) { sigprof_received.fetch_add(1, std::memory_order_relaxed); }

void own_sigprof(double seconds) {
  struct sigaction action {};
  action.sa_handler = &on_sigprof;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &action, nullptr);
  itimerval every{{0, 10'000}, {0, 10'000}};  // 100 Hz of process CPU time
  setitimer(ITIMER_PROF, &every, nullptr);
  compute_three_quarters(static_cast<std::int64_t>(seconds * 1e9));
  itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  std::printf("sigprof received=%d\n", sigprof_received.load());
}

void stress(double seconds) {
  const auto until = monotonic_ns() + static_cast<std::int64_t>(seconds * 1e9);
  std::atomic<long> loads{0}, allocations{0}, forks{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      while (monotonic_ns() < until) {
        void* library = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);  // not otherwise loaded
        void* other = dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
        if (other) dlclose(other);
        if (library) dlclose(library);
        ++loads;
      }
    });
  workers.emplace_back([&] {
    while (monotonic_ns() < until) {
      std::vector<void*> blocks;
      for (int i = 0; i < 256; ++i) blocks.push_back(std::malloc(16 + i * 8));
      for (auto* block : blocks) std::free(block);
      ++allocations;
    }
  });
  workers.emplace_back([&] {
    while (monotonic_ns() < until) {
      const pid_t child = fork();
      if (child == 0) _exit(0);
      if (child > 0) waitpid(child, nullptr, 0);
      ++forks;
    }
  });
  workers.emplace_back([&] { compute_one_quarter(static_cast<std::int64_t>(seconds * 0.5e9)); });
  for (auto& worker : workers) worker.join();
  std::printf("stress done loads=%ld allocations=%ld forks=%ld\n", loads.load(), allocations.load(), forks.load());
}

}  // namespace

// --- allocation hook (alloc-hook mode) -------------------------------------------------------
// malloc & co. defined here take precedence over libc's for every library of the process,
// libkairos.so included. When armed, each call asks libgcc's unwinder whether a signal frame is
// on the stack (_Unwind_GetIPInfo sets ip_before_insn for signal frames): an allocation inside
// any signal handler is counted.
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* __libc_memalign(std::size_t, std::size_t);
extern "C" void __libc_free(void*);

namespace {
std::atomic<bool> hook_armed{false};
std::atomic<long> allocations_in_handlers{0};
std::atomic<long> allocations_checked{0};
thread_local bool inside_hook = false;

_Unwind_Reason_Code find_signal_frame(_Unwind_Context* context, void* found) {
  int before_instruction = 0;
  _Unwind_GetIPInfo(context, &before_instruction);
  if (before_instruction) {
    *static_cast<bool*>(found) = true;
    return _URC_END_OF_STACK;
  }
  return _URC_NO_REASON;
}

void check_allocation() {
  if (!hook_armed.load(std::memory_order_relaxed) || inside_hook) return;
  inside_hook = true;
  bool in_handler = false;
  _Unwind_Backtrace(&find_signal_frame, &in_handler);
  allocations_checked.fetch_add(1, std::memory_order_relaxed);
  if (in_handler) allocations_in_handlers.fetch_add(1, std::memory_order_relaxed);
  inside_hook = false;
}

void allocating_handler(int) { std::free(std::malloc(32)); }  // the positive control
}  // namespace

extern "C" {
void* malloc(std::size_t size) {
  check_allocation();
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  check_allocation();
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, std::size_t size) {
  check_allocation();
  return __libc_realloc(pointer, size);
}
void* memalign(std::size_t alignment, std::size_t size) {
  check_allocation();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(std::size_t alignment, std::size_t size) { return memalign(alignment, size); }
int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
  *out = memalign(alignment, size);
  return *out ? 0 : ENOMEM;
}
void free(void* pointer) { __libc_free(pointer); }
}

// A thread-per-task program: at most `alive` threads at once, each joined before its slot's
// next one starts.
void churn(long count, int alive) {
  std::vector<std::thread> slots(static_cast<std::size_t>(alive));
  std::atomic<long> work{0};
  for (long i = 0; i < count; ++i) {
    auto& slot = slots[static_cast<std::size_t>(i % alive)];
    if (slot.joinable()) slot.join();
    slot = std::thread([&work] {
      long local = 0;
      for (int k = 0; k < 2000; ++k) local += k ^ (local >> 3);
      work.fetch_add(local & 1, std::memory_order_relaxed);
    });
  }
  for (auto& slot : slots)
    if (slot.joinable()) slot.join();
  std::printf("churn done: %ld threads\n", count);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  if (mode == "split") {
    split(seconds);
  } else if (mode == "busy-until-signal") {
    std::printf("ready\n");
    std::fflush(stdout);
    std::thread helper([] { spin_until_stopped(); });
    spin_until_stopped();
    helper.join();
  } else if (mode == "abort-after") {
    std::thread helper([seconds] { compute_one_quarter(static_cast<std::int64_t>(seconds * 2e9)); });
    compute_three_quarters(static_cast<std::int64_t>(seconds * 1e9));
    std::abort();
  } else if (mode == "sleeps") {
    return sleeps(static_cast<int>(seconds), argc > 3 ? std::atoi(argv[3]) : 50);
  } else if (mode == "own-sigprof") {
    own_sigprof(seconds);
  } else if (mode == "stress") {
    stress(seconds);
  } else if (mode == "churn") {
    churn(static_cast<long>(seconds), argc > 3 ? std::atoi(argv[3]) : 8);
  } else if (mode == "syscalls") {
    syscalls(seconds);
  } else if (mode == "blocked-worker") {
    blocked_worker(seconds);
  } else if (mode == "start-routines") {
    start_routines(seconds);
  } else if (mode == "alloc-hook") {
    hook_armed.store(true);
    signal(SIGUSR1, &allocating_handler);
    raise(SIGUSR1);  // one allocation in a handler, to prove the hook sees them
    std::thread helper([seconds] { compute_one_quarter(static_cast<std::int64_t>(seconds * 1e9)); });
    compute_three_quarters(static_cast<std::int64_t>(seconds * 1e9));
    helper.join();
    hook_armed.store(false);
    std::printf("allocations checked=%ld in_handlers=%ld\n", allocations_checked.load(),
                allocations_in_handlers.load());
  } else {
    std::fprintf(
        stderr,
        "usage: sampled_program "
        "split|busy-until-signal|abort-after|sleeps|own-sigprof|stress|alloc-hook|churn|syscalls|blocked-worker|"
        "start-routines [N]\n");
    return 2;
  }
  return 0;
}
