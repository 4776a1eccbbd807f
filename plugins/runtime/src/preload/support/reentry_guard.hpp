#pragma once
// The per-thread re-entry guard: set while kairos itself runs on a thread. Wrappers and the user
// API call straight through while it is set, so kairos never measures or re-enters itself
// (kairos's own pthread_create, malloc hooks later, exec from within finalize...).
// Initial-exec TLS: libkairos.so is preloaded, so its TLS is static and a read is one load,
// with no __tls_get_addr call that could allocate.

namespace kairos::runtime {

inline thread_local bool inside_kairos [[gnu::tls_model("initial-exec")]] = false;

class reentry_guard {
 public:
  reentry_guard() noexcept : already_inside_{inside_kairos} { inside_kairos = true; }
  ~reentry_guard() { inside_kairos = already_inside_; }
  reentry_guard(const reentry_guard&) = delete;
  reentry_guard& operator=(const reentry_guard&) = delete;

  // True when the guard was already set on this thread: the caller is kairos itself.
  bool reentered() const noexcept { return already_inside_; }

 private:
  bool already_inside_;
};

}  // namespace kairos::runtime
