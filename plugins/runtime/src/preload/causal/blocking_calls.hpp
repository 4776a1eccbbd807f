#pragma once
// The program's blocking calls, wrapped for the causal experiments' delay accounting (causal.hpp)
// through the GOT patcher, only in a run that experiments: a run without them pays nothing.
#include <optional>
#include <string>

namespace kairos::runtime {

// Wraps pthread mutexes, condition variables, joins, barriers, semaphores and futexes (syscall) in every loaded
// object; a note naming what could not be wrapped, if anything.
std::optional<std::string> wrap_blocking_calls();

}  // namespace kairos::runtime
