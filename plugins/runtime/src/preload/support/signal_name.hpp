#pragma once
// A signal as kairos names it in its lines and metadata: "SIGTERM", "SIGRTMIN+6", or the number.
#include <signal.h>
#include <string.h>

#include <string>

namespace kairos::runtime {

inline std::string signal_name(int signal_number) {
  if (signal_number >= SIGRTMIN && signal_number <= SIGRTMAX)
    return "SIGRTMIN+" + std::to_string(signal_number - SIGRTMIN);
  const char* name = sigabbrev_np(signal_number);
  return name ? std::string{"SIG"} + name : std::to_string(signal_number);
}

}  // namespace kairos::runtime
