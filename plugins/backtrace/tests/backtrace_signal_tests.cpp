// Capture inside real signal handlers, where it must never deadlock: on a thread busy in malloc,
// and at 1 kHz while other threads load and unload modules. A watchdog turns a hang into a
// failure within seconds instead of a stuck test.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <kairos/plugins/backtrace.hpp>

namespace {
using namespace std::chrono_literals;
constexpr int sampling_signal = SIGPROF;

struct sample_counts {
  std::atomic<long> by_libunwind{0};
  std::atomic<long> by_libgcc{0};
  std::atomic<long> empty{0};
  std::atomic<long> frames{0};
  long total() const { return by_libunwind + by_libgcc + empty; }
};
sample_counts counts;

void on_sampling_signal(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  kairos::backtrace<64> stack;
  stack.sample(static_cast<const ucontext_t*>(context));
  switch (stack.path()) {
    case kairos::backtrace_path::libunwind: ++counts.by_libunwind; break;
    case kairos::backtrace_path::libgcc: ++counts.by_libgcc; break;
    case kairos::backtrace_path::none: ++counts.empty; break;
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
      counts.by_libunwind = counts.by_libgcc = counts.empty = counts.frames = 0;
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
  within(40s, "signal-driven capture during dlopen/dlclose churn", [&] {
    long libunwind_samples = 0;
    long libgcc_samples = 0;
    for (int round = 0; round < 5; ++round) {
      counts.by_libunwind = counts.by_libgcc = counts.empty = counts.frames = 0;
      std::atomic<bool> stop{false};
      std::atomic<int> ready{0};
      std::atomic<long> loads{0};
      std::vector<std::thread> loaders;
      for (const char* module : modules) {
        loaders.emplace_back([&, module] {
          kairos::backtrace_prewarm();
          ++ready;
          while (!stop.load(std::memory_order_relaxed)) {
            if (void* handle = guarded_dlopen(module)) {
              ++loads;
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
    }
    // Both paths were exercised for real: the loaders' samples mostly land inside the loader.
    CHECK(libunwind_samples >= captures / 4);
    CHECK(libgcc_samples >= captures / 4);
  });
}
