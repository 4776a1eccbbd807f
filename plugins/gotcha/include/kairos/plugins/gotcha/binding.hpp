#pragma once
// What the GOT patcher (patcher.hpp) takes and reports: a binding, the status of installing it,
// and a census of the slots that bind a symbol. Held apart from the patcher's functions so that
// their two definitions (patcher.cpp, and unavailable_patcher.hpp where ELF support is missing)
// share these types without including each other.
#include <kairos/problem.hpp>

#include <atomic>
#include <cstddef>
#include <string>

namespace kairos::gotcha_patcher {

struct binding {
  std::string symbol;  // "strlen", or "pthread_cond_wait@GLIBC_2.3.2" for one version
  void* wrapper = nullptr;
  // What the wrapper calls: the original function, or the wrapper installed before this one.
  // Set before any slot points at `wrapper`; updated when a wrapper below is removed.
  std::atomic<void*> next{nullptr};
};

struct wrap_status {
  std::string symbol;
  bool installed = false;         // the binding is in place (remove() takes it out)
  bool defined = false;           // some loaded object defines the symbol (and version)
  std::size_t slots_patched = 0;  // GOT slots now reaching the wrapper
  problem failure;                // what is wrong, else empty; the caller prints it (with the prefix)
  bool ok() const noexcept { return defined && slots_patched > 0; }
};

// How many GOT slots bind a symbol in the loaded objects, and how many of them hold a value
// (count_slots).
struct slot_census {
  std::size_t binding_symbol = 0;
  std::size_t holding_value = 0;
};

}  // namespace kairos::gotcha_patcher
