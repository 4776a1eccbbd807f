#pragma once
// The re-entry guard, written once: marks "kairos is running on this thread" on a per-thread flag
// for a scope, and nests. Every wrapper and hook of kairos calls straight through to the
// original while its flag is set, so kairos never measures or re-enters itself. Each shared
// object that wraps functions owns its flag (libkairos_gotcha.so: kairos::gotcha_patcher::
// inside_kairos; libkairos.so: kairos::runtime::inside_kairos), in initial-exec TLS, so reading
// it is one load; this class is how either is set.
namespace kairos {

class reentry_guard {
 public:
  explicit reentry_guard(bool& inside) noexcept : inside_{inside}, already_inside_{inside} { inside = true; }
  ~reentry_guard() { inside_ = already_inside_; }
  reentry_guard(const reentry_guard&) = delete;
  reentry_guard& operator=(const reentry_guard&) = delete;

  // True when the flag was already set: the caller is kairos itself.
  bool reentered() const noexcept { return already_inside_; }

 private:
  bool& inside_;
  bool already_inside_;
};

}  // namespace kairos
