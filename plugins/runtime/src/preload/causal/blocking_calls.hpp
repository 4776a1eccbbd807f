#pragma once
// The program's blocking calls, wrapped for the causal experiments' delay accounting (causal.hpp)
// through the GOT patcher, only in a run that experiments: a run without them pays nothing.
#include <cstdint>
#include <optional>
#include <string>

namespace kairos::runtime {

// Wraps pthread mutexes, condition variables, joins, barriers, semaphores and futexes (syscall) in every loaded
// object, and the reads and writes on pipes and socket pairs the process made (with what makes,
// copies and closes descriptors); a note naming what could not be wrapped, if anything.
std::optional<std::string> wrap_blocking_calls();
// Transfers on those pipes and socket pairs credited as wake-ups by another thread (part of
// causal_totals().wakeups_credited).
std::uint64_t pipe_wakeups_credited() noexcept;

}  // namespace kairos::runtime
