#pragma once
// Per-thread re-entry state. While kairos runs on a thread (a bundle's operations inside a
// wrapper, the patcher, the runtime's own code), every wrapper on that thread calls straight
// through to its original. Thread-local only: no flag is shared between threads.
#include <kairos/reentry_guard.hpp>

namespace kairos::gotcha_patcher {

// Defined in libkairos_gotcha.so with the initial-exec TLS model; constinit lets callers read it
// directly (no TLS wrapper call), which keeps the wrapper's fast path to one %fs-relative load.
#if defined(KAIROS_GOTCHA_AVAILABLE) && !KAIROS_GOTCHA_AVAILABLE
inline thread_local constinit bool inside_kairos = false;  // no library in a stub build
#else
extern thread_local constinit bool inside_kairos [[gnu::tls_model("initial-exec")]];
#endif

// Marks "kairos is running on this thread" for a scope; nests (the core's guard on this flag).
class inside_kairos_scope : public kairos::reentry_guard {
 public:
  inside_kairos_scope() noexcept : kairos::reentry_guard{inside_kairos} {}
};

}  // namespace kairos::gotcha_patcher
