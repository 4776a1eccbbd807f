#pragma once
// Every wait kairos does on behalf of the program is bounded: a program is never held up for
// longer than the limit because a kairos thread is slow or gone. Async-signal-safe when `done` is
// (nanosleep is), so the termination-signal handler uses it too.
#include <time.h>

#include <chrono>

#include "preload/support/clock.hpp"

namespace kairos::runtime {

// Polls `done` every `step` until it holds or `limit` has passed; returns whether it held.
template <class Done>
bool wait_until(Done&& done, std::chrono::milliseconds limit,
                std::chrono::microseconds step = std::chrono::microseconds{100}) noexcept {
  const auto deadline = steady_now_ns() + std::chrono::nanoseconds{limit}.count();
  const timespec pause{0, static_cast<long>(std::chrono::nanoseconds{step}.count())};
  while (!done()) {
    if (steady_now_ns() >= deadline) return false;
    nanosleep(&pause, nullptr);
  }
  return true;
}

}  // namespace kairos::runtime
