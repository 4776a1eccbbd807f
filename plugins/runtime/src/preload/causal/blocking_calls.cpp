#include "preload/causal/blocking_calls.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>

#include <cerrno>

#include <array>
#include <string_view>
#include <type_traits>

#include <kairos/plugins/gotcha.hpp>

#include "preload/causal/causal.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

enum class blocking_call {
  mutex_lock,
  mutex_unlock,
  cond_wait,
  cond_timedwait,
  cond_signal,
  cond_broadcast,
  join,
  barrier_wait,
  sem_wait,
  sem_timedwait,
  sem_post,
  syscall,
};

// What each call means for the delays (Coz's rules): a call that may wake another thread pays
// what its thread owes first; a call that may block credits its thread, on return, with the
// delays added meanwhile when another thread ended the wait (a timeout is no such wake-up).
// A futex operation's part in the delays, from its command (futex(2)). std::barrier, std::latch,
// std::counting_semaphore and std::atomic::wait (libstdc++'s atomic wait, inline in the program)
// call syscall(SYS_futex, ...) themselves, as do programs with their own futexes.
enum class futex_role { none, waits, wakes };
futex_role role_of(long futex_op) noexcept {
  switch (futex_op & FUTEX_CMD_MASK) {
    case FUTEX_WAIT:
    case FUTEX_WAIT_BITSET:
    case FUTEX_LOCK_PI:
    case FUTEX_WAIT_REQUEUE_PI:
      return futex_role::waits;
    case FUTEX_WAKE:
    case FUTEX_WAKE_BITSET:
    case FUTEX_WAKE_OP:
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE:
    case FUTEX_CMP_REQUEUE_PI:
    case FUTEX_UNLOCK_PI:
      return futex_role::wakes;
    default:
      return futex_role::none;
  }
}

template <blocking_call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data&, R (*original)(Args...), Args... arguments) {
    using enum blocking_call;
    if constexpr (C == syscall) {
      // syscall(number, ...): only futexes matter. A wait that returns 0 was woken (a timeout, a
      // signal or a value that had changed already return -1: no wake-up by another thread).
      const std::array<long, sizeof...(Args)> values{arguments...};  // number, uaddr, futex_op, ...
      const auto role = values[0] == SYS_futex ? role_of(values[2]) : futex_role::none;
      if (role == futex_role::none) return original(arguments...);
      if (role == futex_role::wakes) {
        causal_catch_up();
        return original(arguments...);
      }
      causal_before_blocking();
      const R result = original(arguments...);
      const int saved_errno = errno;
      causal_after_blocking(result == 0);
      errno = saved_errno;
      return result;
    } else if constexpr (C == mutex_unlock || C == cond_signal || C == cond_broadcast || C == sem_post) {
      causal_catch_up();
      return original(arguments...);
    } else {
      if constexpr (C == barrier_wait) causal_catch_up();  // it may be the one that releases the rest
      causal_before_blocking();
      const R result = original(arguments...);
      // A timed wait that timed out was not woken by another thread.
      constexpr bool may_time_out = C == cond_timedwait || C == sem_timedwait;
      causal_after_blocking(!may_time_out || result == 0);
      return result;
    }
  }
};

template <blocking_call C>
using wrapper = kairos::gotcha<1, interceptor<C>, std::integral_constant<blocking_call, C>>;

struct wrapped_function {
  const char* symbol;
  gotcha_patcher::wrap_status (*wrap)(std::string_view);
};
template <blocking_call C, class Function>
constexpr wrapped_function entry(const char* symbol) {
  return {symbol, &wrapper<C>::template wrap<0, Function>};
}

using enum blocking_call;
// The condition variable functions name their current version: glibc keeps an older ABI under
// the same names.
const std::array wrapped_functions{
    entry<mutex_lock, int(pthread_mutex_t*)>("pthread_mutex_lock"),
    entry<mutex_unlock, int(pthread_mutex_t*)>("pthread_mutex_unlock"),
    entry<cond_wait, int(pthread_cond_t*, pthread_mutex_t*)>("pthread_cond_wait@GLIBC_2.3.2"),
    entry<cond_timedwait, int(pthread_cond_t*, pthread_mutex_t*, const timespec*)>(
        "pthread_cond_timedwait@GLIBC_2.3.2"),
    entry<cond_signal, int(pthread_cond_t*)>("pthread_cond_signal@GLIBC_2.3.2"),
    entry<cond_broadcast, int(pthread_cond_t*)>("pthread_cond_broadcast@GLIBC_2.3.2"),
    entry<join, int(pthread_t, void**)>("pthread_join"),
    entry<barrier_wait, int(pthread_barrier_t*)>("pthread_barrier_wait"),
    entry<sem_wait, int(sem_t*)>("sem_wait"),
    entry<sem_timedwait, int(sem_t*, const timespec*)>("sem_timedwait"),
    entry<sem_post, int(sem_t*)>("sem_post"),
    // Variadic: declared with its six arguments after the number, which x86-64 passes alike.
    entry<syscall, long(long, long, long, long, long, long, long)>("syscall"),
};

}  // namespace

std::optional<std::string> wrap_blocking_calls() {
  reentry_guard guard;  // the patcher runs kairos's code
  std::string unwrapped;
  for (const auto& function : wrapped_functions) {
    const auto status = function.wrap(function.symbol);
    if (!status.installed) unwrapped += std::string{unwrapped.empty() ? "" : ", "} + function.symbol;
  }
  if (unwrapped.empty()) return std::nullopt;
  return "causal profiling: could not wrap " + unwrapped +
         "; a thread woken through them pays delays it does not owe, which biases predictions down";
}

}  // namespace kairos::runtime
