#pragma once
// PAPI initialized once per process (thread-safe), with thread support, and PAPI's refusals turned
// into sentences.
#include <papi.h>
#include <pthread.h>

#include <string>
#include <string_view>

#include <kairos/problem.hpp>

namespace kairos::papi {

inline std::string_view error_name(int code) {
  switch (code) {
    case PAPI_EINVAL:
      return "PAPI_EINVAL";
    case PAPI_ENOMEM:
      return "PAPI_ENOMEM";
    case PAPI_ESYS:
      return "PAPI_ESYS";
    case PAPI_ECMP:
      return "PAPI_ECMP";
    case PAPI_ENOEVNT:
      return "PAPI_ENOEVNT";
    case PAPI_ECNFLCT:
      return "PAPI_ECNFLCT";
    case PAPI_ENOTRUN:
      return "PAPI_ENOTRUN";
    case PAPI_EISRUN:
      return "PAPI_EISRUN";
    case PAPI_ENOTPRESET:
      return "PAPI_ENOTPRESET";
    case PAPI_ENOCNTR:
      return "PAPI_ENOCNTR";
    case PAPI_EPERM:
      return "PAPI_EPERM";
    case PAPI_ENOINIT:
      return "PAPI_ENOINIT";
    case PAPI_ENOCMP:
      return "PAPI_ENOCMP";
    case PAPI_ECMP_DISABLED:
      return "PAPI_ECMP_DISABLED";
    default:
      return "PAPI error";
  }
}

// "PAPI_add_event: PAPI_ECMP_DISABLED (Component containing event is disabled)"
inline std::string describe_error(std::string_view call, int code) {
  const char* text = PAPI_strerror(code);
  return std::string{call} + ": " + std::string{error_name(code)} + " (" + (text ? text : std::to_string(code)) + ")";
}

// Every thread that calls into PAPI through kairos registers first (PAPI 7 crashes resolving a
// native name on a thread it has not registered) and unregisters when it exits (PAPI keys its
// thread records by pthread_self(), which a later thread may reuse: a stale record would be
// found again).
struct thread_registration {
  thread_registration() { PAPI_register_thread(); }
  ~thread_registration() { PAPI_unregister_thread(); }
};
inline void papi_used_on_this_thread() noexcept {
  thread_local thread_registration registered;
  (void)registered;
}

// PAPI_library_init and PAPI_thread_init, once (a function-local static: thread-safe). What kept
// PAPI from starting; empty when it is ready.
inline const problem& library_problem() {
  static const problem failure = []() -> problem {
    const int version = PAPI_library_init(PAPI_VER_CURRENT);
    if (version != PAPI_VER_CURRENT)
      return problem{version > 0 ? "PAPI_library_init: papi.h and libpapi.so are different versions"
                                 : describe_error("PAPI_library_init", version)};
    const int threads = PAPI_thread_init([]() -> unsigned long { return static_cast<unsigned long>(pthread_self()); });
    if (threads != PAPI_OK) return problem{describe_error("PAPI_thread_init", threads)};
    papi_used_on_this_thread();
    return {};
  }();
  return failure;
}

// "component perf_event disabled: Error libpfm4 no default PMU found", or empty if enabled.
inline std::string component_disabled_reason(int component_index) {
  const PAPI_component_info_t* component = PAPI_get_component_info(component_index);
  if (component == nullptr) return "component " + std::to_string(component_index) + " unknown";
  if (!component->disabled) return {};
  return std::string{"component "} + component->name + " disabled: " + component->disabled_reason;
}

// Index of the CPU counter component ("perf_event" on Linux), or -1.
inline int cpu_component_index() { return PAPI_get_component_index("perf_event"); }

}  // namespace kairos::papi
