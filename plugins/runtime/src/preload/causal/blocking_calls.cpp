#include "preload/causal/blocking_calls.hpp"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>

#include <array>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <kairos/plugins/gotcha.hpp>

#include "preload/causal/causal.hpp"
#include "preload/causal/descriptor_set.hpp"
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
  // Pipes and socket pairs between the process's threads: the calls that make, copy and close
  // descriptors keep `intra_process` right; the transfers on its descriptors are credited.
  pipe,
  pipe2,
  socketpair,
  dup,
  dup2,
  dup3,
  close,
  fclose,
  read,
  readv,
  recv,
  recvfrom,
  recvmsg,
  write,
  writev,
  send,
  sendto,
  sendmsg,
  // Waits for any of several descriptors: credited when one of the process's own is ready.
  poll,
  ppoll,
  select,
  pselect,
  epoll_ctl,
  epoll_wait,
  epoll_pwait,
};

// Descriptors both of whose ends this process made: a thread that waits on one waits for another
// thread of the process (or for itself), never for the outside world. Emptied at a fork, whose
// child holds the ends too: a pipe made before a fork may connect two processes.
descriptor_set intra_process;
// epoll instances that watch one of those descriptors (epoll_ctl added it).
descriptor_set watches_intra_process;
std::atomic<std::uint64_t> pipe_wakeups{0};

constexpr bool transfers(blocking_call call) noexcept {
  using enum blocking_call;
  return call == read || call == readv || call == recv || call == recvfrom || call == recvmsg || call == write ||
         call == writev || call == send || call == sendto || call == sendmsg;
}

// Whether a poll set holds one of the process's own descriptors, and (after the call) whether one
// of those is ready.
bool polls_intra_process(const pollfd* fds, nfds_t count, bool ready_only) noexcept {
  for (nfds_t i = 0; i < count; ++i)
    if (intra_process.contains(fds[i].fd) && (!ready_only || (fds[i].revents & (POLLIN | POLLOUT)) != 0)) return true;
  return false;
}

// The same for select's sets (after the call they hold the ready descriptors only).
bool selects_intra_process(int count, const fd_set* reading, const fd_set* writing) noexcept {
  count = std::min(count, FD_SETSIZE);
  for (int fd = 0; fd < count; ++fd)
    if (intra_process.contains(fd) && ((reading && FD_ISSET(fd, reading)) || (writing && FD_ISSET(fd, writing))))
      return true;
  return false;
}

// Around a call that waits until one of the process's own descriptors is ready (before it, the
// thread pays what it owes): a wait that ended with one ready was ended by another thread.
template <class Call, class Ready>
auto credited_wait(Call call, Ready ready) {
  causal_before_blocking();
  const auto result = call();
  const int saved_errno = errno;
  if (causal_after_blocking(result > 0 && ready())) pipe_wakeups.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
  return result;
}

// What each call means for the delays (Coz's rules): a call that may wake another thread pays
// what its thread owes first; a call that may block pays first too (causal_before_blocking), and
// credits its thread, on return, with the delays released meanwhile when another thread ended
// the wait (a timeout is no such wake-up).
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

template <std::size_t I, class... Args>
auto nth(Args... arguments) noexcept {
  return std::get<I>(std::tuple<Args...>{arguments...});
}

// Each wrapped call, by its family: the descriptors of the process's own pipes and sockets
// followed, data moved through them, waits on them, futexes, and the synchronisation calls.
template <blocking_call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data&, R (*original)(Args...), Args... arguments) {
    using enum blocking_call;
    if constexpr (C == pipe || C == pipe2 || C == socketpair || C == close || C == fclose || C == dup || C == dup2 ||
                  C == dup3 || C == epoll_ctl) {
      return follow_descriptors(original, arguments...);
    } else if constexpr (transfers(C)) {
      // Either end may wake the other (data for a reader, room for a writer): it pays first; and
      // either may wait for the other, so a call that moved data is credited as a wake-up.
      if (!intra_process.contains(nth<0>(arguments...))) return original(arguments...);
      causal_catch_up();
      causal_before_blocking();
      const R result = original(arguments...);
      const int saved_errno = errno;
      if (causal_after_blocking(result > 0)) pipe_wakeups.fetch_add(1, std::memory_order_relaxed);
      errno = saved_errno;
      return result;
    } else if constexpr (C == poll || C == ppoll || C == select || C == pselect || C == epoll_wait ||
                         C == epoll_pwait) {
      return wait_on_descriptors(original, arguments...);
    } else if constexpr (C == syscall) {
      return futex(original, arguments...);
    } else if constexpr (C == mutex_unlock || C == cond_signal || C == cond_broadcast || C == sem_post) {
      causal_catch_up();
      return original(arguments...);
    } else {
      causal_before_blocking();
      const R result = original(arguments...);
      // A timed wait that timed out was not woken by another thread.
      constexpr bool may_time_out = C == cond_timedwait || C == sem_timedwait;
      causal_after_blocking(!may_time_out || result == 0);
      return result;
    }
  }

  // Which descriptors are the process's own pipes and sockets, and which epoll instances watch one.
  template <class R, class... Args>
  static R follow_descriptors(R (*original)(Args...), Args... arguments) {
    using enum blocking_call;
    if constexpr (C == pipe || C == pipe2 || C == socketpair) {
      const R result = original(arguments...);
      if (result == 0) {
        constexpr std::size_t ends_at = C == socketpair ? 3 : 0;  // the int[2] argument
        int* ends = nth<ends_at>(arguments...);
        intra_process.insert(ends[0]);
        intra_process.insert(ends[1]);
      }
      return result;
    } else if constexpr (C == close || C == fclose) {
      // Forgotten before it closes: once closed, another thread may get the number back.
      int fd = -1;
      if constexpr (C == close) {
        fd = nth<0>(arguments...);
      } else if (FILE* stream = nth<0>(arguments...)) {
        fd = fileno(stream);
      }
      intra_process.erase(fd);
      watches_intra_process.erase(fd);
      return original(arguments...);
    } else if constexpr (C == dup || C == dup2 || C == dup3) {
      const int old_fd = nth<0>(arguments...);
      const R result = original(arguments...);
      if (result >= 0 && result != old_fd) {
        intra_process.assign(result, intra_process.contains(old_fd));
        watches_intra_process.assign(result, watches_intra_process.contains(old_fd));
      }
      return result;
    } else {  // epoll_ctl
      const int instance = nth<0>(arguments...), operation = nth<1>(arguments...), fd = nth<2>(arguments...);
      const R result = original(arguments...);
      // An instance stays marked until it closes, even after the descriptor is removed from it.
      if (result == 0 && operation == EPOLL_CTL_ADD && intra_process.contains(fd))
        watches_intra_process.insert(instance);
      return result;
    }
  }

  // A wait on descriptors, credited when one of the process's own was ready.
  template <class R, class... Args>
  static R wait_on_descriptors(R (*original)(Args...), Args... arguments) {
    using enum blocking_call;
    if constexpr (C == poll || C == ppoll) {
      pollfd* fds = nth<0>(arguments...);
      const nfds_t count = nth<1>(arguments...);
      if (!polls_intra_process(fds, count, false)) return original(arguments...);
      return credited_wait([&] { return original(arguments...); },
                           [&] { return polls_intra_process(fds, count, true); });
    } else if constexpr (C == select || C == pselect) {
      const int count = nth<0>(arguments...);
      fd_set* reading = nth<1>(arguments...);
      fd_set* writing = nth<2>(arguments...);
      if (!selects_intra_process(count, reading, writing)) return original(arguments...);
      return credited_wait([&] { return original(arguments...); },
                           [&] { return selects_intra_process(count, reading, writing); });
    } else {  // epoll_wait, epoll_pwait
      // The ready events do not say which descriptor they are for (their data is the program's),
      // so a wait on an instance that watches one of the process's own descriptors is credited
      // whenever something was ready.
      if (!watches_intra_process.contains(nth<0>(arguments...))) return original(arguments...);
      return credited_wait([&] { return original(arguments...); }, [] { return true; });
    }
  }

  // syscall(number, ...): only futexes matter. A wait that returns 0 was woken (a timeout, a
  // signal or a value that had changed already return -1: no wake-up by another thread).
  template <class R, class... Args>
  static R futex(R (*original)(Args...), Args... arguments) {
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
  }
};

template <blocking_call C>
using wrapper = kairos::gotcha<1, interceptor<C>, std::integral_constant<blocking_call, C>>;

template <blocking_call C, class Function>
constexpr wrapped_symbol entry(const char* symbol) {
  return wrapped_symbol::of<wrapper<C>, Function>(symbol);
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
    entry<pipe, int(int*)>("pipe"),
    entry<pipe2, int(int*, int)>("pipe2"),
    entry<socketpair, int(int, int, int, int*)>("socketpair"),
    entry<dup, int(int)>("dup"),
    entry<dup2, int(int, int)>("dup2"),
    entry<dup3, int(int, int, int)>("dup3"),
    entry<close, int(int)>("close"),
    entry<fclose, int(FILE*)>("fclose"),
    entry<read, ssize_t(int, void*, size_t)>("read"),
    entry<readv, ssize_t(int, const iovec*, int)>("readv"),
    entry<recv, ssize_t(int, void*, size_t, int)>("recv"),
    entry<recvfrom, ssize_t(int, void*, size_t, int, sockaddr*, socklen_t*)>("recvfrom"),
    entry<recvmsg, ssize_t(int, msghdr*, int)>("recvmsg"),
    entry<write, ssize_t(int, const void*, size_t)>("write"),
    entry<writev, ssize_t(int, const iovec*, int)>("writev"),
    entry<send, ssize_t(int, const void*, size_t, int)>("send"),
    entry<sendto, ssize_t(int, const void*, size_t, int, const sockaddr*, socklen_t)>("sendto"),
    entry<sendmsg, ssize_t(int, const msghdr*, int)>("sendmsg"),
    entry<poll, int(pollfd*, nfds_t, int)>("poll"),
    entry<ppoll, int(pollfd*, nfds_t, const timespec*, const sigset_t*)>("ppoll"),
    entry<select, int(int, fd_set*, fd_set*, fd_set*, timeval*)>("select"),
    entry<pselect, int(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*)>("pselect"),
    entry<epoll_ctl, int(int, int, int, epoll_event*)>("epoll_ctl"),
    entry<epoll_wait, int(int, epoll_event*, int, int)>("epoll_wait"),
    entry<epoll_pwait, int(int, epoll_event*, int, int, const sigset_t*)>("epoll_pwait"),
};

void forget_intra_process_descriptors() {
  intra_process.clear();
  watches_intra_process.clear();
}

}  // namespace

std::optional<std::string> wrap_blocking_calls() {
  reentry_guard guard;  // the patcher runs kairos's code
  pthread_atfork(nullptr, &forget_intra_process_descriptors, &forget_intra_process_descriptors);
  const auto unwrapped = wrap_each(wrapped_functions);
  if (unwrapped.empty()) return std::nullopt;
  return "causal profiling: could not wrap " + unwrapped +
         "; a thread woken through them pays delays it does not owe, which biases predictions down";
}

std::uint64_t pipe_wakeups_credited() noexcept { return pipe_wakeups.load(std::memory_order_relaxed); }

}  // namespace kairos::runtime
