#pragma once
// The process's life as kairos sees it: init before main, finalize once on every path, fork,
// exec. Lifecycle walks the stage table (stages.hpp) and names no stage; the wrappers
// (interposition.cpp) call only these hooks.
#include <signal.h>

#include <string>
#include <vector>

#include "preload/process/environment.hpp"

namespace kairos::runtime {

enum class runtime_state : int {
  loading,     // before the constructor ran
  active,      // collecting
  finalizing,  // writing the outputs; the user API is a no-op
  finalized,
  off,  // disabled: settings, a child not followed, KAIROS_ENABLED=false
};

runtime_state current_state() noexcept;

// pthread_create's trampoline, on the new thread, and its end.
void on_thread_start(bool kairos_owned) noexcept;
void on_thread_end() noexcept;
// After the calling thread changed its signal mask (async-signal-safe).
void on_signal_mask_changed(const sigset_t& mask) noexcept;

// exec in this process: the environment the new image gets, what was collected put into the
// profile the next image goes on with, and, when the exec failed (`error`: its errno), that
// profile kept for this image's end.
exec_environment environment_for_exec(char* const* environment);
void before_exec();
void after_failed_exec(int error);

// _exit/_Exit skip atexit handlers: the process ends here, so kairos finalizes first.
void before_exit_without_handlers();

}  // namespace kairos::runtime
