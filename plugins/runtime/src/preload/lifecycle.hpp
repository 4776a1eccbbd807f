#pragma once
// The process's life as kairos sees it: init before main, finalize once on every path, fork,
// exec. The hooks the wrappers call (interposition.cpp) are declared here.
#include <atomic>
#include <string>
#include <vector>

namespace kairos::runtime {

enum class runtime_state : int {
  loading,     // before the constructor ran
  active,      // collecting
  finalizing,  // writing the outputs; the user API is a no-op
  finalized,
  off,         // disabled: settings, a child not followed, KAIROS_ENABLED=false
};

runtime_state current_state() noexcept;
bool is_active() noexcept;

// exec in this process: the environment the new image gets (our LD_PRELOAD entry removed in a
// child that is not followed; the exec generation counted in a profiled process), and what was
// collected before the exec written out.
struct exec_environment {
  std::vector<std::string> storage;
  std::vector<char*> pointers;  // null-terminated; empty: pass the caller's environment unchanged
};
exec_environment environment_for_exec(char* const* environment);
void before_exec();
void after_failed_exec();

// _exit/_Exit skip atexit handlers: the process ends here, so kairos finalizes first.
void before_exit_without_handlers();

// The service thread and other threads kairos starts are marked as kairos's own through the
// re-entry guard: a thread created while it is set is kairos's.

}  // namespace kairos::runtime
