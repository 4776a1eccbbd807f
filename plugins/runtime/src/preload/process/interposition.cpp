// The wrapped functions, by symbol interposition (see interception.hpp): pthread_create (thread
// registry, sampling), pthread_sigmask/sigprocmask (a thread that blocks the sampling signal is
// not signalled meanwhile), the exec family (kairos follows the launched process through exec,
// keeps what it collected, and leaves children alone unless asked), _exit/_Exit, and close,
// close_range and closefrom (which leave kairos's own descriptors open), and the wait family (the
// CPU time of the children kairos does not profile, children.hpp). exit() needs
// no wrapper: the atexit handler registered at init runs on whichever thread calls exit(); fork
// is handled by pthread_atfork.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <new>
#include <vector>

#include <kairos/plugins/gotcha/call_through.hpp>

#include "preload/process/children.hpp"
#include "preload/process/interception.hpp"
#include "preload/process/lifecycle.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"

extern char** environ;

using kairos::call_through;

namespace kairos::runtime::interception {

const originals& original_functions() noexcept {
  static const originals resolved = [] {
    originals found;
    found.pthread_create = reinterpret_cast<pthread_create_function>(dlsym(RTLD_NEXT, "pthread_create"));
    found.execve = reinterpret_cast<execve_function>(dlsym(RTLD_NEXT, "execve"));
    found.execvpe = reinterpret_cast<execve_function>(dlsym(RTLD_NEXT, "execvpe"));
    found.fexecve = reinterpret_cast<fexecve_function>(dlsym(RTLD_NEXT, "fexecve"));
    found.pthread_sigmask = reinterpret_cast<sigmask_function>(dlsym(RTLD_NEXT, "pthread_sigmask"));
    found.sigprocmask = reinterpret_cast<sigmask_function>(dlsym(RTLD_NEXT, "sigprocmask"));
    found.exit_now = reinterpret_cast<exit_function>(dlsym(RTLD_NEXT, "_exit"));
    found.close = reinterpret_cast<close_function>(dlsym(RTLD_NEXT, "close"));
    found.close_range = reinterpret_cast<close_range_function>(dlsym(RTLD_NEXT, "close_range"));
    found.closefrom = reinterpret_cast<closefrom_function>(dlsym(RTLD_NEXT, "closefrom"));
    found.wait4 = reinterpret_cast<wait4_function>(dlsym(RTLD_NEXT, "wait4"));
    return found;
  }();
  return resolved;
}

}  // namespace kairos::runtime::interception

namespace {

using namespace kairos::runtime;

struct thread_start {
  void* (*routine)(void*);
  void* argument;
  bool kairos_owned;
};

// Marks the thread ended however it leaves: return, pthread_exit or cancellation (both unwind).
struct thread_end_marker {
  ~thread_end_marker() { on_thread_end(); }
};

void* start_registered_thread(void* start_pointer) {
  const thread_start start = *static_cast<thread_start*>(start_pointer);
  delete static_cast<thread_start*>(start_pointer);
  on_thread_start(start.kairos_owned);
  thread_end_marker end_marker;
  return call_through(start.routine, start.argument);  // the thread's own root (call_through.hpp)
}

enum class exec_kind { path, search, descriptor };

int exec_through(exec_kind kind, const char* path, int descriptor, char* const argv[], char* const envp[]) {
  const auto& originals = interception::original_functions();
  exec_environment environment;
  {
    reentry_guard guard;
    if (!guard.reentered()) {
      environment = environment_for_exec(envp);
      before_exec();
    }
  }
  char* const* chosen = environment.pointers.empty() ? envp : environment.pointers.data();
  int result = -1;
  switch (kind) {
    case exec_kind::path:
      result = originals.execve ? call_through(originals.execve, path, argv, chosen) : (errno = ENOSYS, -1);
      break;
    case exec_kind::search:
      result = originals.execvpe ? call_through(originals.execvpe, path, argv, chosen) : (errno = ENOSYS, -1);
      break;
    case exec_kind::descriptor:
      result = originals.fexecve ? call_through(originals.fexecve, descriptor, argv, chosen) : (errno = ENOSYS, -1);
      break;
  }
  const int saved_errno = errno;
  {
    reentry_guard guard;
    if (!guard.reentered()) after_failed_exec(saved_errno);
  }
  errno = saved_errno;
  return result;
}

// execl, execle, execlp: the variadic argument list as an argv array.
std::vector<char*> collect_arguments(const char* first, va_list& arguments) {
  std::vector<char*> argv{const_cast<char*>(first)};
  while (argv.back() != nullptr) argv.push_back(va_arg(arguments, char*));
  return argv;
}

// wait, waitpid, wait3, wait4: one real wait4, with the rusage the kernel has of a reaped child
// (the caller's, when it asked for it). Async-signal-safe, as the functions are.
pid_t wait_through(pid_t pid, int* status, int options, rusage* usage) {
  const auto real = interception::original_functions().wait4;
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  if (current_state() != runtime_state::active || inside_kairos) return call_through(real, pid, status, options, usage);
  char name[16];
  const auto which = pid < -1 ? P_PGID : pid == -1 ? P_ALL : pid == 0 ? P_PGID : P_PID;
  const auto peeked = peek_reapable_child(which, static_cast<id_t>(pid < -1 ? -pid : pid > 0 ? pid : 0), options, name);
  if (peeked < 0) return -1;  // interrupted by a signal: errno is EINTR, as the real call gives
  int own_status = 0;
  rusage own_usage{};
  rusage* used = usage ? usage : &own_usage;
  int* status_used = status ? status : &own_status;
  const auto reaped = call_through(real, pid, status_used, options, used);  // the program's wait
  if (reaped > 0 && (WIFEXITED(*status_used) || WIFSIGNALED(*status_used))) {
    const int saved_errno = errno;
    child_reaped(reaped, *used, reaped == peeked ? name : nullptr);
    errno = saved_errno;
  }
  return reaped;
}

// The mask after a successful change, for the sampler (async-signal-safe: both functions may be
// called from the program's signal handlers).
int change_mask(interception::sigmask_function real, int how, const sigset_t* set, sigset_t* old) {
  if (!real) return ENOSYS;
  sigset_t previous;
  const int result = call_through(real, how, set, old ? old : &previous);
  if (result == 0 && set) {
    sigset_t now;
    if (real(SIG_BLOCK, nullptr, &now) == 0) on_signal_mask_changed(now);
  }
  return result;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int pthread_create(pthread_t* thread, const pthread_attr_t* attributes,
                                                          void* (*routine)(void*), void* argument) noexcept {
  const auto real = interception::original_functions().pthread_create;
  if (!real) return EAGAIN;
  if (current_state() == runtime_state::off) return call_through(real, thread, attributes, routine, argument);
  auto* start = new (std::nothrow) thread_start{routine, argument, inside_kairos};
  if (!start) return call_through(real, thread, attributes, routine, argument);
  const int result = call_through(real, thread, attributes, &start_registered_thread, start);
  if (result != 0) delete start;
  return result;
}

__attribute__((visibility("default"))) int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return change_mask(interception::original_functions().pthread_sigmask, how, set, old);
}
__attribute__((visibility("default"))) int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  const int result = change_mask(interception::original_functions().sigprocmask, how, set, old);
  if (result == ENOSYS) {
    errno = ENOSYS;
    return -1;
  }
  return result;  // sigprocmask's own convention: -1 and errno, which the real one set
}

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return exec_through(exec_kind::path, path, -1, argv, envp);
}
__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) noexcept {
  return exec_through(exec_kind::path, path, -1, argv, environ);
}
__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return exec_through(exec_kind::search, file, -1, argv, envp);
}
__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) noexcept {
  return exec_through(exec_kind::search, file, -1, argv, environ);
}
__attribute__((visibility("default"))) int fexecve(int descriptor, char* const argv[], char* const envp[]) noexcept {
  return exec_through(exec_kind::descriptor, nullptr, descriptor, argv, envp);
}
__attribute__((visibility("default"))) int execl(const char* path, const char* first, ...) noexcept {
  va_list arguments;
  va_start(arguments, first);
  auto argv = collect_arguments(first, arguments);
  va_end(arguments);
  return exec_through(exec_kind::path, path, -1, argv.data(), environ);
}
__attribute__((visibility("default"))) int execlp(const char* file, const char* first, ...) noexcept {
  va_list arguments;
  va_start(arguments, first);
  auto argv = collect_arguments(first, arguments);
  va_end(arguments);
  return exec_through(exec_kind::search, file, -1, argv.data(), environ);
}
__attribute__((visibility("default"))) int execle(const char* path, const char* first, ...) noexcept {
  va_list arguments;
  va_start(arguments, first);
  auto argv = collect_arguments(first, arguments);
  auto* const* envp = va_arg(arguments, char* const*);
  va_end(arguments);
  return exec_through(exec_kind::path, path, -1, argv.data(), envp);
}

__attribute__((visibility("default"))) pid_t wait(int* status) { return wait_through(-1, status, 0, nullptr); }
__attribute__((visibility("default"))) pid_t waitpid(pid_t pid, int* status, int options) {
  return wait_through(pid, status, options, nullptr);
}
__attribute__((visibility("default"))) pid_t wait3(int* status, int options, rusage* usage) noexcept {
  return wait_through(-1, status, options, usage);
}
__attribute__((visibility("default"))) pid_t wait4(pid_t pid, int* status, int options, rusage* usage) noexcept {
  return wait_through(pid, status, options, usage);
}

// _exit and _Exit end the process without atexit handlers (dash's `exit` builtin does this).
__attribute__((visibility("default"))) void _exit(int status) {
  {
    reentry_guard guard;
    if (!guard.reentered()) before_exit_without_handlers();
  }
  if (const auto real = interception::original_functions().exit_now) call_through(real, status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
__attribute__((visibility("default"))) void _Exit(int status) noexcept { _exit(status); }

// Daemons, shells and Python's os.closerange close every descriptor, by close_range, closefrom or
// a close() of each number: kairos's stay open (its perf events would be reopened, but a spill
// file's samples and the open database would be lost). To the program they are not open: close()
// says EBADF. kairos's own calls go straight through (its threads, and the program's threads
// inside kairos). Raw system calls are not seen; the sampler then reopens its events.
__attribute__((visibility("default"))) int close(int fd) {
  if (fd >= private_descriptor_floor() && !inside_kairos && kept_by_kairos(fd)) {
    errno = EBADF;
    return -1;
  }
  if (const auto real = interception::original_functions().close) return call_through(real, fd);
  return static_cast<int>(syscall(SYS_close, fd));
}
__attribute__((visibility("default"))) int close_range(unsigned first, unsigned last, int flags) noexcept {
  return close_range_keeping_ours(first, last, flags, interception::original_functions().close_range);
}
__attribute__((visibility("default"))) void closefrom(int lowest) noexcept {
  const auto& originals = interception::original_functions();
  if (lowest >= 0 && close_range_keeping_ours(static_cast<unsigned>(lowest), ~0U, 0, originals.close_range) == 0)
    return;
  if (originals.closefrom) call_through(originals.closefrom, lowest);  // its own fallback (/proc/self/fd)
}

}  // extern "C"
