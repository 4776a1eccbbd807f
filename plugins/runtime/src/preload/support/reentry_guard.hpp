#pragma once
// libkairos.so's re-entry flag and guard (the guard itself is the core's kairos::reentry_guard).
// Set while kairos runs on a thread: the wrappers and the user API call straight through, and a
// thread created while it is set is kairos's own. Initial-exec TLS: libkairos.so is preloaded, so
// its TLS is static and a read is one load, with no __tls_get_addr call that could allocate.
#include <kairos/reentry_guard.hpp>

namespace kairos::runtime {

inline thread_local bool inside_kairos [[gnu::tls_model("initial-exec")]] = false;

class reentry_guard : public kairos::reentry_guard {
 public:
  reentry_guard() noexcept : kairos::reentry_guard{inside_kairos} {}
};

}  // namespace kairos::runtime
