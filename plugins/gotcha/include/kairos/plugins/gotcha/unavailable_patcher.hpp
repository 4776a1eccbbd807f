#pragma once
// The patcher in a build without ELF dynamic linking support: every request says why it failed.
// patcher.hpp includes it in place of its declarations; it includes only the types they share.
#include <kairos/plugins/gotcha/binding.hpp>

#include <string>
#include <string_view>

namespace kairos::gotcha_patcher {

inline wrap_status install(binding& b) {
  wrap_status status;
  status.symbol = b.symbol;
  status.failure = problem{"gotcha: cannot wrap '" + b.symbol +
                           "': this build has no ELF dynamic-linking support (x86-64 Linux with link.h)"};
  return status;
}
inline bool remove(binding&) { return false; }
inline void reapply() {}
inline slot_census count_slots(std::string_view, const void*) { return {}; }
inline std::string wrapped_symbol(const void*) { return {}; }
inline void exclude_object(const void*) {}
inline bool available() noexcept { return false; }

}  // namespace kairos::gotcha_patcher
