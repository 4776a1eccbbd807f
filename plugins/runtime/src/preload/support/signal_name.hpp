#pragma once
// A signal as kairos names it in its lines and metadata: "SIGTERM", "SIGRTMIN+6", or the number;
// and the one rule for choosing a real-time signal of kairos's own.
#include <signal.h>
#include <string.h>

#include <kairos/problem.hpp>

#include <string>

namespace kairos::runtime {

inline std::string signal_name(int signal_number) {
  if (signal_number >= SIGRTMIN && signal_number <= SIGRTMAX)
    return "SIGRTMIN+" + std::to_string(signal_number - SIGRTMIN);
  const char* name = sigabbrev_np(signal_number);
  return name ? std::string{"SIG"} + name : std::to_string(signal_number);
}

// The first real-time signal from `preferred` up that is still at its default disposition (the
// program does not handle it, and kairos has not taken it), or the problem that none is. Real-time
// rather than SIGPROF or SIGIO, so the program's own (setitimer, gperftools, O_ASYNC) keep working.
inline result<int> unused_realtime_signal(int preferred) {
  for (int candidate = preferred; candidate <= SIGRTMAX; ++candidate) {
    struct sigaction current {};
    if (sigaction(candidate, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
    return candidate;
  }
  return problem{"every real-time signal is handled by the program"};
}

// What the user should know when `purpose` uses `chosen` rather than `preferred` (the program
// handles that one); empty when they are the same.
inline problem signal_choice_note(int preferred, int chosen, const char* purpose) {
  if (chosen == preferred) return {};
  return problem{"the program handles signal " + signal_name(preferred) + "; " + purpose + " uses " +
                 signal_name(chosen) + " instead"};
}

}  // namespace kairos::runtime
