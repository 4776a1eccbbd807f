#pragma once
// The per-thread "inside the dynamic loader" guard.
//
// A sampling signal that lands on a thread while it is inside dlopen/dlclose (or inside any
// dl_iterate_phdr call) must not unwind with libunwind: libunwind finds unwind tables through
// dl_iterate_phdr, which takes the loader's write lock, and glibc's recursive lock is not
// re-entrant from a signal handler that interrupted its own lock or unlock; with libunwind's
// shared cache lock the same lock also closes a cycle between two threads. Measured here: a
// 1 kHz signal-driven unw_backtrace while three threads loop dlopen/dlclose hangs within a few
// seconds in most runs, whatever the caching policy, and never hangs once such threads are guarded.
//
// Whoever wraps dlopen, dlclose, dlmopen and dl_iterate_phdr (the runtime does, through its
// function wrappers; a program can do it by hand) holds a dl_guard around the real call. A capture
// taken while the counter is non-zero uses libgcc's _Unwind_Backtrace instead (see capture.hpp).
// A counter rather than a flag: dlopen runs constructors, which may dlopen again.

namespace kairos {

namespace backtrace_detail {
// initial-exec: the variable lives in the static TLS block, so reading it from a signal handler
// never calls __tls_get_addr (which may allocate on first use in a dlopen'd object).
[[gnu::tls_model("initial-exec")]] inline thread_local unsigned inside_dynamic_loader = 0;
}  // namespace backtrace_detail

// Marks the calling thread as inside the dynamic loader for the guard's lifetime.
class dl_guard {
 public:
  dl_guard() noexcept { ++backtrace_detail::inside_dynamic_loader; }
  ~dl_guard() { --backtrace_detail::inside_dynamic_loader; }
  dl_guard(const dl_guard&) = delete;
  dl_guard& operator=(const dl_guard&) = delete;

  // Whether the calling thread is inside a guarded dynamic-loader call right now.
  static bool active() noexcept { return backtrace_detail::inside_dynamic_loader != 0; }
};

}  // namespace kairos
