// Capture inside real signal handlers, where it must never deadlock: on a thread busy in malloc,
// and at 1 kHz while other threads load and unload modules. A watchdog turns a hang into a
// failure within seconds instead of a stuck test.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <kairos/plugins/backtrace.hpp>

namespace {
using namespace std::chrono_literals;
constexpr int sampling_signal = SIGPROF;

struct sample_counts {
  std::atomic<long> by_libunwind{0};
  std::atomic<long> by_libgcc{0};
  std::atomic<long> by_tables{0};
  std::atomic<long> empty{0};
  std::atomic<long> frames{0};
  long total() const { return by_libunwind + by_libgcc + by_tables + empty; }
  void reset() { by_libunwind = by_libgcc = by_tables = empty = frames = 0; }
};
sample_counts counts;

void on_sampling_signal(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  kairos::backtrace<64> stack;
  stack.sample(static_cast<const ucontext_t*>(context));
  switch (stack.path()) {
    case kairos::backtrace_path::libunwind:
      ++counts.by_libunwind;
      break;
    case kairos::backtrace_path::libgcc:
      ++counts.by_libgcc;
      break;
    case kairos::backtrace_path::tables:
      ++counts.by_tables;
      break;
    case kairos::backtrace_path::none:
      ++counts.empty;
      break;
  }
  counts.frames += static_cast<long>(stack.size());
  errno = saved_errno;
}

// Fails the whole program if `scenario` has not returned within `limit`: a deadlocked thread
// cannot be unblocked, so the process ends with a message naming what hung.
template <class Scenario>
void within(std::chrono::seconds limit, const char* what, Scenario scenario) {
  std::mutex mutex;
  std::condition_variable finished_changed;
  bool finished = false;
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, sampling_signal);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);  // the watchdog itself is never sampled
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!finished_changed.wait_for(lock, limit, [&] { return finished; })) {
      std::fprintf(stderr, "[kairos] backtrace test: %s did not finish within %lld s: deadlock\n", what,
                   static_cast<long long>(limit.count()));
      std::_Exit(1);
    }
  });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  scenario();
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  finished_changed.notify_one();
  watchdog.join();
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sampling_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(sampling_signal, &action, nullptr);
}

// Sends the sampling signal to every target thread once a millisecond for `duration`, and on
// until `captures` handlers have run (a loaded machine runs the targets less, and a signal
// still pending when the next is sent is merged into it), but no longer than 4 s: the checks then
// count captures that happened, whatever the machine's load.
constexpr long captures = 200;
void sample_at_1khz(const std::vector<pthread_t>& targets, std::chrono::milliseconds duration) {
  const auto begin = std::chrono::steady_clock::now();
  auto next = begin;
  while (std::chrono::steady_clock::now() < begin + duration ||
         (counts.total() < captures && std::chrono::steady_clock::now() < begin + 4s)) {
    for (const pthread_t target : targets) pthread_kill(target, sampling_signal);
    next += 1ms;
    std::this_thread::sleep_until(next);
  }
}

// A call chain `depth` deep that spins at the bottom: a stack worth unwinding.
[[gnu::noinline]] double busy_work(int depth) {
  if (depth == 0) {
    double sum = 0;
    for (int i = 1; i < 20000; ++i) sum += 1.0 / i;
    return sum;
  }
  const double result = busy_work(depth - 1) * 0.5;
  asm volatile("" ::: "memory");
  return result;
}

// What the runtime's dlopen/dlclose wrappers do: the real call inside a dl_guard.
void* guarded_dlopen(const char* path) {
  kairos::dl_guard inside_loader;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
void guarded_dlclose(void* module) {
  kairos::dl_guard inside_loader;
  dlclose(module);
}
}  // namespace

TEST_CASE("capture in a signal handler on a thread busy in malloc never deadlocks (5 rounds of 1 s at 1 kHz)") {
  install_handler();
  within(30s, "signal-driven capture on a thread busy in malloc", [] {
    for (int round = 0; round < 5; ++round) {
      counts.reset();
      std::atomic<bool> stop{false};
      std::atomic<bool> ready{false};
      std::thread allocator([&] {
        kairos::backtrace_prewarm();
        ready = true;
        std::vector<void*> blocks(256, nullptr);
        for (std::size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          void*& block = blocks[i % blocks.size()];
          std::free(block);
          block = std::malloc(16 + (i * 97) % 8192);
        }
        for (void* block : blocks) std::free(block);
      });
      while (!ready) std::this_thread::yield();
      sample_at_1khz({allocator.native_handle()}, 1000ms);
      stop = true;
      allocator.join();
      INFO("round " << round);
      CHECK(counts.by_libunwind >= captures);
      CHECK(counts.empty == 0);
      CHECK(counts.frames >= 3 * counts.total());  // malloc or the loop, the thread entry, clone
    }
  });
}

TEST_CASE("capture at 1 kHz while threads loop dlopen/dlclose always finishes (5 rounds of 1 s)") {
  install_handler();
  const char* modules[] = {KAIROS_TEST_MODULE, KAIROS_TEST_MODULE_STRIPPED, "libz.so.1"};
  // The unwind tables too, on the loading threads, built while the modules they run come and go
  // (as the runtime's control thread builds them).
  kairos::use_unwind_tables();
  std::atomic<bool> churn_done{false};
  std::thread builder([&] {
    while (!churn_done) {
      kairos::build_unwind_tables();
      std::this_thread::sleep_for(5ms);
    }
  });
  within(40s, "signal-driven capture during dlopen/dlclose churn", [&] {
    long libunwind_samples = 0;
    long libgcc_samples = 0;
    long tables_samples = 0;
    for (int round = 0; round < 5; ++round) {
      counts.reset();
      std::atomic<bool> stop{false};
      std::atomic<int> ready{0};
      std::atomic<long> loads{0};
      std::vector<std::thread> loaders;
      for (const char* module : modules) {
        loaders.emplace_back([&, module] {
          kairos::backtrace_prewarm();
          if (module != modules[2]) kairos::unwind_tables_register_thread();  // libz's loader: libgcc
          ++ready;
          volatile int sink = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            if (void* handle = guarded_dlopen(module)) {
              ++loads;
              // Time inside the module, so that its tables are wanted, built and then unloaded.
              if (auto work = reinterpret_cast<int (*)(int)>(dlsym(handle, "kairos_test_module_work")))
                for (int i = 0; i < 20000; ++i) sink = sink + work(i);
              guarded_dlclose(handle);
            }
          }
        });
      }
      // A thread outside the loader: its samples take libunwind's path (and dl_iterate_phdr)
      // while the loaders hold and release the loader's locks.
      std::thread computer([&] {
        kairos::backtrace_prewarm();
        ++ready;
        volatile double sink = 0;
        while (!stop.load(std::memory_order_relaxed)) sink = sink + busy_work(12);
      });
      while (ready < static_cast<int>(loaders.size()) + 1) std::this_thread::yield();
      std::vector<pthread_t> targets{computer.native_handle()};
      for (auto& loader : loaders) targets.push_back(loader.native_handle());
      sample_at_1khz(targets, 1000ms);
      stop = true;
      for (auto& loader : loaders) loader.join();
      computer.join();
      INFO("round " << round);
      CHECK(loads > 10);
      CHECK(counts.total() >= captures);
      CHECK(counts.empty == 0);
      libunwind_samples += counts.by_libunwind;
      libgcc_samples += counts.by_libgcc;
      tables_samples += counts.by_tables;
    }
    // Every path was exercised for real: the computing thread's samples take libunwind, the test
    // modules' loaders the tables, libz's loader libgcc (its samples mostly land in the loader).
    CHECK(libunwind_samples >= captures / 4);
    CHECK(libgcc_samples >= captures / 4);
    CHECK(tables_samples >= captures / 4);
    MESSAGE("samples: " << libunwind_samples << " by libunwind, " << libgcc_samples << " by libgcc, " << tables_samples
                        << " by the tables (" << kairos::unwind_table_counts().modules << " modules compiled)");
  });
  churn_done = true;
  builder.join();
}

// --- kairos's unwind tables against libgcc, in the same handler ----------------------------------

namespace tables {
constexpr int depth = 64;
std::atomic<long> finished{0}, unfinished{0}, equal{0}, different{0}, libgcc_empty{0};
std::atomic<bool> reported_difference{false};

void compare_in_handler(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  const auto& interrupted = *static_cast<const ucontext_t*>(context);
  std::uintptr_t by_tables[depth];
  const auto walk = kairos::backtrace_detail::walk_with_tables(interrupted, by_tables, depth);
  std::uintptr_t by_libgcc[depth];
  bool truncated = false;
  const auto libgcc = kairos::backtrace_detail::capture_frames(
      by_libgcc, static_cast<std::uintptr_t>(interrupted.uc_mcontext.gregs[REG_RIP]), false, truncated);
  if (!walk.finished()) {
    ++unfinished;
  } else if (libgcc.count == 0) {
    ++libgcc_empty;
  } else {
    ++finished;
    bool same = walk.count == libgcc.count;
    for (int i = 0; same && i < walk.count; ++i) same = by_tables[i] == by_libgcc[i];
    ++(same ? equal : different);
    if (!same && !reported_difference.exchange(true)) {
      std::fprintf(stderr, "first difference: tables %d frames, libgcc %d\n", walk.count, libgcc.count);
      for (int i = 0; i < std::max(walk.count, libgcc.count) && i < depth; ++i)
        std::fprintf(stderr, "  %2d  %#16lx  %#16lx\n", i, i < walk.count ? by_tables[i] : 0UL,
                     i < libgcc.count ? by_libgcc[i] : 0UL);
    }
  }
  errno = saved_errno;
}

int by_value(const void* left, const void* right) {
  const double a = *static_cast<const double*>(left), b = *static_cast<const double*>(right);
  volatile double spin = a;  // a little work inside libc's qsort, called back from it
  for (int i = 0; i < 20; ++i) spin = spin * 1.0000001;
  return (a > b) - (a < b);
}

// Stacks through the test executable, libc (qsort calling back, malloc), libstdc++ (std::sort,
// strings) and a dlopen'd -O0 module, until `stop`.
void mixed_work(const std::atomic<bool>& stop, int (*module_work)(int)) {
  std::vector<double> values(2000);
  volatile double sink = 0;
  for (unsigned round = 0; !stop.load(std::memory_order_relaxed); ++round) {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 7919 + round) % 1000);
    std::qsort(values.data(), values.size(), sizeof(double), by_value);
    std::sort(values.begin(), values.end(), std::greater<>());
    sink = sink + busy_work(10);
    std::string text;
    for (int i = 0; i < 200; ++i) text += std::to_string(i * round);
    std::vector<void*> blocks;
    for (int i = 0; i < 200; ++i) blocks.push_back(std::malloc(16 + (i * 97) % 4096));
    for (void* block : blocks) std::free(block);
    for (int i = 0; i < 2000; ++i) sink = sink + module_work(i);
  }
}
}  // namespace tables

TEST_CASE("unwind tables give libgcc's frames for stacks through the program, libc, libstdc++ and a module") {
  if (!kairos::backtrace_detail::unwind_tables_at_build) {
    MESSAGE("skipped: unwind tables need x86-64 and glibc 2.35 or later");
    return;
  }
  struct sigaction action {};
  action.sa_sigaction = tables::compare_in_handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(sampling_signal, &action, nullptr);
  void* module = dlopen(KAIROS_TEST_MODULE, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(module != nullptr);
  auto module_work = reinterpret_cast<int (*)(int)>(dlsym(module, "kairos_test_module_work"));
  REQUIRE(reinterpret_cast<void*>(module_work) != nullptr);
  kairos::backtrace_detail::prewarm_process();  // resolves libgcc's unwinder
  // Built lazily, as the runtime does: the first samples of each module go to libgcc.
  kairos::use_unwind_tables();
  within(30s, "unwind tables against libgcc", [&] {
    std::atomic<bool> stop{false};
    std::atomic<bool> ready{false};
    std::thread worker([&] {
      kairos::unwind_tables_register_thread();
      ready = true;
      tables::mixed_work(stop, module_work);
    });
    while (!ready) std::this_thread::yield();
    std::atomic<bool> sampling_done{false};
    std::thread builder([&] {
      while (!sampling_done) {
        kairos::build_unwind_tables();
        std::this_thread::sleep_for(10ms);
      }
    });
    // Until the modules the work passes through are compiled (or 4 s), then 1 s more, counted.
    auto sample_for = [&](std::chrono::milliseconds duration, auto until) {
      const auto begin = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() < begin + duration && !until()) {
        pthread_kill(worker.native_handle(), sampling_signal);
        std::this_thread::sleep_for(1ms);
      }
    };
    long warm_up_equal = 0, warm_up_unfinished = 0;
    for (int quarter = 0; quarter < 16; ++quarter) {
      sample_for(250ms, [] { return false; });
      const long equal = tables::equal.exchange(0), unfinished = tables::unfinished.exchange(0);
      warm_up_equal += equal;
      warm_up_unfinished += unfinished;
      if (unfinished < equal / 20) break;
    }
    MESSAGE("warming up: " << warm_up_equal << " equal, " << warm_up_unfinished << " left to libgcc");
    sample_for(1000ms, [] { return false; });
    sampling_done = true;
    stop = true;
    builder.join();
    worker.join();
  });
  const auto built = kairos::unwind_table_counts();
  MESSAGE("tables: " << built.modules << " modules, " << built.functions << " functions, " << built.rows
                     << " rows; samples: " << tables::equal.load() << " equal, " << tables::different.load()
                     << " different, " << tables::unfinished.load() << " left to libgcc, "
                     << tables::libgcc_empty.load() << " empty by libgcc");
  CHECK(tables::different.load() == 0);
  CHECK(tables::equal.load() >= 200);
  CHECK(tables::equal.load() >= 9 * tables::unfinished.load());  // once the modules are compiled
  CHECK(built.modules >= 4);  // the program, libc, libstdc++, the module (and the vdso, libm...)
  dlclose(module);
}
