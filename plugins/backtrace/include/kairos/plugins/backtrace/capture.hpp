#pragma once
// Call-stack capture: the async-signal-safe part of the backtrace plugin (no allocation, no lock
// of kairos's own, errno preserved). Symbolization lives in symbolizer.hpp and never runs here.
//
// Which unwinder, and why (measured on Debian 12, libunwind 1.6.2, glibc 2.36, GCC 12; the
// figures: docs/performance-log.md, "Measured reasons in the code"):
//
// * First, kairos's own unwind tables (unwind_tables.hpp): rows compiled per function off the
//   sampling path, once something builds them (the runtime does), walked from a signal
//   handler's context or from the capture's own registers, on threads that registered their
//   stack. A walk they cannot finish falls through to the paths below.
// * Default path: libunwind's unw_backtrace(). It walks frames with its per-thread "trace cache"
//   of frame layouts (tdep_trace); the unw_step() loop (unw_getcontext + unw_init_local + unw_step
//   + unw_get_reg) costs tens of times more for the same stack because every step re-parses
//   DWARF, so it is not used.
// * unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE), once per process in prewarm():
//   with the global (default) or per-thread policy, libunwind holds its own mutex while it calls
//   dl_iterate_phdr, which takes the loader's write lock. A thread interrupted inside dlclose (it
//   holds the loader lock) whose handler then waits for libunwind's mutex, held by another
//   thread's handler that waits for the loader lock, deadlocks both (seen with gdb here, with
//   UNW_CACHE_PER_THREAD too). With UNW_CACHE_NONE libunwind takes no lock of its own on this path;
//   it costs about twice as much, because the register-state cache is not used.
// * Per-thread guard (dl_guard.hpp): even with no libunwind lock, a handler that interrupts a
//   thread inside the loader's lock/unlock self-deadlocks on the loader's recursive lock. So a
//   capture on a thread inside dlopen/dlclose/dl_iterate_phdr, or nested in another capture on the
//   same thread (a signal during record()), takes the fallback path instead.
// * Fallback path: libgcc's _Unwind_Backtrace (about ten times slower). libgcc 12 finds unwind tables through
//   glibc's _dl_find_object, which reads the loader's data without a lock (a version counter and
//   two copies), so it is safe while this same thread is half-way through dlopen. It is looked up
//   with dlsym in libgcc_s.so.1 itself: libunwind.so also exports _Unwind_Backtrace and
//   _Unwind_GetIP, and whichever comes first in the lookup scope would otherwise win.
// * prewarm(): per process, sets the caching policy, resolves the libgcc functions and runs
//   libgcc's one-time register-table setup; per thread, runs one unw_backtrace so that libunwind
//   allocates that thread's trace cache (costly the first time) before any signal arrives.
//
// Built without libunwind (KAIROS_BACKTRACE_HAVE_LIBUNWIND=0, as libkairos.so is, whose handler
// never uses it), every capture takes the libgcc path; without <unwind.h> either, the plugin is
// a stub that reports itself unavailable.
//
// Frames of kairos itself are dropped by address, not by a fixed count (which inlining would
// break): the capture keeps frames from the first one equal to the interrupted instruction
// (signal context) or to the capture function's own return address (its caller).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <kairos/plugins/backtrace/dl_guard.hpp>
#include <kairos/plugins/backtrace/unwind_tables.hpp>

#ifndef KAIROS_BACKTRACE_HAVE_LIBUNWIND
#if __has_include(<libunwind.h>)
#define KAIROS_BACKTRACE_HAVE_LIBUNWIND 1
#else
#define KAIROS_BACKTRACE_HAVE_LIBUNWIND 0
#endif
#endif

#ifndef KAIROS_BACKTRACE_HAVE_LIBGCC_UNWIND
#if __has_include(<unwind.h>)
#define KAIROS_BACKTRACE_HAVE_LIBGCC_UNWIND 1
#else
#define KAIROS_BACKTRACE_HAVE_LIBGCC_UNWIND 0
#endif
#endif

#if KAIROS_BACKTRACE_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif
#if KAIROS_BACKTRACE_HAVE_LIBUNWIND || KAIROS_BACKTRACE_HAVE_LIBGCC_UNWIND
#include <dlfcn.h>
#include <unwind.h>

#include <atomic>
#include <mutex>
#endif

namespace kairos {

// Which unwinder produced a capture.
enum class backtrace_path : std::uint8_t {
  none,       // nothing captured (plugin unavailable, or fallback needed but not prewarmed)
  libunwind,  // unw_backtrace, the default
  libgcc,     // _Unwind_Backtrace from libgcc_s: inside the loader, or a nested capture
  tables,     // kairos's unwind tables (unwind_tables.hpp)
};

constexpr std::string_view to_string(backtrace_path path) noexcept {
  switch (path) {
    case backtrace_path::libunwind:
      return "libunwind";
    case backtrace_path::libgcc:
      return "libgcc";
    case backtrace_path::tables:
      return "tables";
    case backtrace_path::none:
      break;
  }
  return "none";
}

namespace backtrace_detail {

// Room for the unwinder's own frames, the capture function, a signal handler and the signal
// trampoline, all above the first frame kept.
inline constexpr int internal_frame_slack = 8;

struct raw_capture {
  int count = 0;
  backtrace_path path = backtrace_path::none;
};

#if KAIROS_BACKTRACE_HAVE_LIBUNWIND || KAIROS_BACKTRACE_HAVE_LIBGCC_UNWIND
inline constexpr bool available_at_build = true;

using unwind_backtrace_function = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using unwind_get_ip_function = _Unwind_Ptr (*)(_Unwind_Context*);

struct libgcc_unwinder {
  std::atomic<unwind_backtrace_function> backtrace{nullptr};
  std::atomic<unwind_get_ip_function> get_ip{nullptr};
};
inline libgcc_unwinder libgcc;
inline std::atomic<bool> process_prewarmed{false};
[[gnu::tls_model("initial-exec")]] inline thread_local bool thread_prewarmed = false;
[[gnu::tls_model("initial-exec")]] inline thread_local unsigned captures_in_progress = 0;

inline int unwind_with_libgcc(void** buffer, int capacity) noexcept {
  const auto backtrace = libgcc.backtrace.load(std::memory_order_acquire);
  const auto get_ip = libgcc.get_ip.load(std::memory_order_acquire);
  if (backtrace == nullptr || get_ip == nullptr) return 0;
  struct walk {
    void** buffer;
    int count;
    int capacity;
    unwind_get_ip_function get_ip;
  } state{buffer, 0, capacity, get_ip};
  auto one_frame = [](_Unwind_Context* context, void* argument) -> _Unwind_Reason_Code {
    auto& walk_state = *static_cast<walk*>(argument);
    if (walk_state.count >= walk_state.capacity) return _URC_END_OF_STACK;
    const auto ip = walk_state.get_ip(context);
    if (ip == 0) return _URC_END_OF_STACK;
    walk_state.buffer[walk_state.count++] = reinterpret_cast<void*>(ip);
    return _URC_NO_REASON;
  };
  backtrace(one_frame, &state);
  return state.count;
}

// The one place that chooses the unwinder (see the header comment).
inline raw_capture unwind_into(void** buffer, int capacity, [[maybe_unused]] bool allow_libunwind) noexcept {
  const int saved_errno = errno;
  ++captures_in_progress;
  raw_capture result;
#if KAIROS_BACKTRACE_HAVE_LIBUNWIND
  if (allow_libunwind && captures_in_progress == 1 && inside_dynamic_loader == 0) {
    result = {unw_backtrace(buffer, capacity), backtrace_path::libunwind};
  } else
#endif
  {
    const int count = unwind_with_libgcc(buffer, capacity);
    result = {count, count > 0 ? backtrace_path::libgcc : backtrace_path::none};
  }
  --captures_in_progress;
  errno = saved_errno;
  return result;
}

inline void prewarm_process() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
#if KAIROS_BACKTRACE_HAVE_LIBUNWIND
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
#endif
    void* libgcc_handle = nullptr;
    {
      dl_guard inside_loader;  // a sample landing in this dlopen takes the fallback path
      libgcc_handle = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (libgcc_handle == nullptr) libgcc_handle = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    }
    if (libgcc_handle != nullptr) {  // kept open for the process's lifetime
      libgcc.get_ip.store(reinterpret_cast<unwind_get_ip_function>(dlsym(libgcc_handle, "_Unwind_GetIP")),
                          std::memory_order_release);
      libgcc.backtrace.store(reinterpret_cast<unwind_backtrace_function>(dlsym(libgcc_handle, "_Unwind_Backtrace")),
                             std::memory_order_release);
    }
    void* frames[internal_frame_slack];
    unwind_with_libgcc(frames, internal_frame_slack);  // libgcc's one-time register-size table
    process_prewarmed.store(true, std::memory_order_release);
  });
}

inline void prewarm_thread() noexcept {
  if (thread_prewarmed) return;
  prewarm_process();
  void* frames[internal_frame_slack];
  unwind_into(frames, internal_frame_slack, true);  // allocates this thread's trace cache
  thread_prewarmed = true;
}

#else
inline constexpr bool available_at_build = false;
inline raw_capture unwind_into(void**, int, bool) noexcept { return {}; }
inline void prewarm_process() noexcept {}
inline void prewarm_thread() noexcept {}
#endif

// Captures into `frames` (capacity N), dropping everything above the caller's frame, or above
// `interrupted_ip` when it is non-zero (a capture from a signal handler). Not inlined: its own
// return address is how the caller's frame is recognised. The caller's stack is walked with the
// unwind tables first, from this function's own registers, when they can finish the walk.
template <std::size_t N>
[[gnu::noinline]] inline raw_capture capture_frames(std::uintptr_t (&frames)[N], std::uintptr_t interrupted_ip,
                                                    bool allow_libunwind, bool& truncated) noexcept {
  const auto caller_ip = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  bool tables_missed = false;
  if (interrupted_ip == 0) {
    std::uintptr_t walked[N + 1];  // this function's frame, then the caller's on
    const auto walk = walk_from_here(walked, static_cast<int>(N) + 1);
    if (walk.finished() && walk.count >= 2 && walked[1] == caller_ip) {
      for (int i = 1; i < walk.count; ++i) frames[i - 1] = walked[i];
      truncated = walk.truncated;
      return {walk.count - 1, backtrace_path::tables};
    }
    tables_missed = walk.end == walk_end::missing;
  }
  constexpr int raw_capacity = static_cast<int>(N) + internal_frame_slack + 1;
  void* raw[raw_capacity];
  const raw_capture raw_result = unwind_into(raw, raw_capacity, allow_libunwind);

  int first_kept = -1;
  for (const std::uintptr_t wanted : {interrupted_ip, caller_ip}) {
    if (wanted == 0) continue;
    for (int i = 0; i < raw_result.count && first_kept < 0; ++i)
      if (reinterpret_cast<std::uintptr_t>(raw[i]) == wanted) first_kept = i;
    if (first_kept >= 0) break;
  }
  if (first_kept < 0) first_kept = 0;

  const int available = raw_result.count - first_kept;
  const int kept = available < static_cast<int>(N) ? available : static_cast<int>(N);
  for (int i = 0; i < kept; ++i) frames[i] = reinterpret_cast<std::uintptr_t>(raw[first_kept + i]);
  // The raw buffer holds one frame more than can be kept: if it filled up, the stack went deeper.
  truncated = available > static_cast<int>(N) || raw_result.count == raw_capacity;
  if (tables_missed) want_tables_for(frames, kept, false);  // all of it in one build
  return {kept, raw_result.path};
}

// Captures the stack interrupted by a signal, whose registers `interrupted` holds: with the unwind
// tables when they finish the walk, else as capture_frames does from the interrupted instruction.
template <std::size_t N>
[[gnu::noinline]] inline raw_capture capture_interrupted(std::uintptr_t (&frames)[N], const ucontext_t& interrupted,
                                                         bool allow_libunwind, bool& truncated) noexcept {
  const auto walk = walk_with_tables(interrupted, frames, static_cast<int>(N));
  if (walk.finished()) {
    truncated = walk.truncated;
    return {walk.count, backtrace_path::tables};
  }
  std::uintptr_t interrupted_ip = 0;
#if defined(__x86_64__)
  interrupted_ip = static_cast<std::uintptr_t>(interrupted.uc_mcontext.gregs[REG_RIP]);
#endif
  const auto captured = capture_frames(frames, interrupted_ip, allow_libunwind, truncated);
  if (walk.end == walk_end::missing) want_tables_for(frames, captured.count, true);  // all of it in one build
  return captured;
}

}  // namespace backtrace_detail

// Prepares capture on the calling thread (and, the first time, for the process): call it on every
// thread before a sampling signal can reach it. Not async-signal-safe; safe to call repeatedly.
inline void backtrace_prewarm() noexcept { backtrace_detail::prewarm_thread(); }

}  // namespace kairos
