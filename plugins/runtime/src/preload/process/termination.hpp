#pragma once
// SIGINT and SIGTERM at their default action, and kairos's service thread.
//
// The handler wakes the service thread, which runs `on_signal` (finalize) in ordinary context
// (the interrupted thread may hold malloc's lock: finalizing inside the handler could deadlock);
// the handler waits at most finalize_timeout for `finished()`, then restores the default action
// and re-raises the signal, so the process dies by that signal exactly as without kairos. The
// program's own handler, or SIG_IGN, is never replaced.
//
// Between signals the service thread runs `on_tick` every tick_interval (the database flush), and
// at once when request_early_tick asks (a producer's buffer filling faster than ticks drain it).
#include <chrono>

namespace kairos::runtime {

inline constexpr std::chrono::milliseconds finalize_timeout{10'000};
inline constexpr std::chrono::milliseconds tick_interval{100};

struct service_hooks {
  void (*on_signal)(int signal_number) = nullptr;
  void (*on_tick)() = nullptr;
  bool (*finished)() = nullptr;
  bool (*finalizing_here)() = nullptr;  // the calling thread is the one writing the outputs
};

// Installs the handlers (where the program left the default) and starts the service thread;
// false when the thread could not start (then SIGINT/SIGTERM end the program without outputs).
bool start_termination_handling(const service_hooks& hooks);
// Wakes the service thread for a tick now (async-signal-safe); false when it is not running.
bool request_early_tick() noexcept;
// A fork child that is not followed: the default actions back (async-signal-safe).
void restore_default_termination_handlers() noexcept;
// A followed fork child: the parent's service thread does not exist there; start the child's.
bool restart_service_thread_in_child();

}  // namespace kairos::runtime
