#include "preload/process/termination.hpp"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

constexpr int handled_signals[] = {SIGINT, SIGTERM};

service_hooks hooks;
bool handlers_installed[NSIG] = {};
std::atomic<int> pending_signal{0};
std::atomic<bool> service_running{false};
std::atomic<bool> early_tick{false};
sem_t service_request;

void on_termination_signal(int signal_number) {
  const int saved_errno = errno;
  // On the thread that is writing the outputs, waiting would wait for itself.
  if (service_running.load() && !hooks.finalizing_here()) {
    int expected = 0;
    if (pending_signal.compare_exchange_strong(expected, signal_number)) sem_post(&service_request);
    wait_until([] { return hooks.finished(); }, finalize_timeout);
  }
  // The default action, as if kairos had never handled the signal.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal_number);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(signal_number);
  errno = saved_errno;
}

void* service_thread_main(void*) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-service");
  auto next_tick = steady_now_ns();
  while (true) {
    next_tick += std::chrono::nanoseconds{tick_interval}.count();
    const timespec until{static_cast<time_t>(next_tick / 1'000'000'000), static_cast<long>(next_tick % 1'000'000'000)};
    const bool woken = sem_clockwait(&service_request, CLOCK_MONOTONIC, &until) == 0;
    if (const int signal_number = pending_signal.load(); woken && signal_number != 0) {
      hooks.on_signal(signal_number);
      continue;
    }
    if (early_tick.exchange(false) || steady_now_ns() >= next_tick) hooks.on_tick();
    if (steady_now_ns() < next_tick) next_tick -= std::chrono::nanoseconds{tick_interval}.count();  // same tick
  }
  return nullptr;
}

bool start_service_thread() {
  pending_signal.store(0);
  if (sem_init(&service_request, 0, 0) != 0) return false;
  service_running.store(start_internal_thread(&service_thread_main, nullptr, 256 * 1024) == 0);
  return service_running.load();
}

}  // namespace

bool request_early_tick() noexcept {
  if (!service_running.load()) return false;
  if (!early_tick.exchange(true)) sem_post(&service_request);
  return true;
}

bool start_termination_handling(const service_hooks& given) {
  hooks = given;
  for (int signal_number : handled_signals) {
    struct sigaction current {};
    if (sigaction(signal_number, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
    struct sigaction ours {};
    ours.sa_handler = &on_termination_signal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    handlers_installed[signal_number] = sigaction(signal_number, &ours, nullptr) == 0;
  }
  return start_service_thread();
}

void restore_default_termination_handlers() noexcept {
  service_running.store(false);
  for (int signal_number : handled_signals) {
    if (!handlers_installed[signal_number]) continue;
    struct sigaction current {};
    sigaction(signal_number, nullptr, &current);
    // Only if the program did not install its own since.
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == &on_termination_signal) {
      struct sigaction default_action {};
      default_action.sa_handler = SIG_DFL;
      sigemptyset(&default_action.sa_mask);
      sigaction(signal_number, &default_action, nullptr);
    }
    handlers_installed[signal_number] = false;
  }
}

bool restart_service_thread_in_child() { return start_service_thread(); }

}  // namespace kairos::runtime
