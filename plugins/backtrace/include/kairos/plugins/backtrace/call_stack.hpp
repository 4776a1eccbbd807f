#pragma once
// kairos::backtrace<N>: the call stack at one instant, up to N return addresses in a fixed array.
// record()/sample() allocate nothing and take no lock of kairos's (see capture.hpp for the
// unwinder's side); symbolize later with kairos::backtrace_symbolizer (symbolizer.hpp).
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <kairos/plugins/backtrace/capture.hpp>

namespace kairos {

template <std::size_t N = 64>
struct backtrace {
  static_assert(N > 0 && N <= 1024, "kairos::backtrace<N>: N must be in 1..1024 (frames kept per sample)");
  static constexpr std::size_t max_frames = N;
  static constexpr bool available_at_build = backtrace_detail::available_at_build;

  std::uintptr_t frames_[N] = {};
  std::uint16_t size_ = 0;
  bool truncated_ = false;             // the stack was deeper than N frames
  bool first_frame_is_exact_ = false;  // frames_[0] is an interrupted instruction, not a return address
  backtrace_path path_ = backtrace_path::none;

  static constexpr std::string_view label() { return "backtrace"; }
  static constexpr std::string_view description() {
    return "call stack at the sample (return addresses; symbolized later, off the sampling path)";
  }
  static constexpr std::string_view unit() { return "frames"; }
  static bool available() noexcept { return available_at_build; }
  static std::string unavailable_reason() {
    if constexpr (available_at_build)
      return {};
    else
      return "backtrace: built without libunwind (libunwind.h not found at configure time; "
             "install libunwind-dev and reconfigure)";
  }

  // The caller's stack. The first call on a thread prepares it (backtrace_prewarm), which is not
  // async-signal-safe: in a signal handler use sample(ucontext) on a prewarmed thread.
  [[gnu::always_inline]] static backtrace record() noexcept {
    backtrace result;
    backtrace_prewarm();
    result.path_ = capture_into(result, 0, true);
    return result;
  }
  [[gnu::always_inline]] void sample() noexcept {
    backtrace_prewarm();
    path_ = capture_into(*this, 0, true);
  }
  // From a signal handler: the stack of the interrupted code, starting at the interrupted
  // instruction (the handler and the signal trampoline are dropped). Never does lazy setup: on a
  // thread that was not prewarmed it uses the fallback unwinder, or captures nothing.
  [[gnu::always_inline]] void sample(const ucontext_t* interrupted) noexcept {
    if (interrupted == nullptr) {
      path_ = capture_into(*this, 0, thread_is_prewarmed());
      return;
    }
    bool truncated = false;
    const auto captured =
        backtrace_detail::capture_interrupted(frames_, *interrupted, thread_is_prewarmed(), truncated);
    size_ = static_cast<std::uint16_t>(captured.count);
    truncated_ = truncated;
    path_ = captured.path;
    std::uintptr_t interrupted_ip = 0;
#if defined(__x86_64__)
    interrupted_ip = static_cast<std::uintptr_t>(interrupted->uc_mcontext.gregs[REG_RIP]);
#endif
    first_frame_is_exact_ = size_ > 0 && frames_[0] == interrupted_ip;
  }

  std::span<const std::uintptr_t> frames() const noexcept { return {frames_, size_}; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool truncated() const noexcept { return truncated_; }
  backtrace_path path() const noexcept { return path_; }
  // The address to look up for frame i: a return address points after the call, so one byte back
  // lands inside the call instruction (the right line for file:line).
  std::uintptr_t lookup_address(std::size_t i) const noexcept {
    return (i == 0 && first_frame_is_exact_) ? frames_[0] : frames_[i] - 1;
  }
  std::size_t get() const noexcept { return size_; }

 private:
  static bool thread_is_prewarmed() noexcept {
#if KAIROS_BACKTRACE_HAVE_LIBUNWIND
    return backtrace_detail::thread_prewarmed;
#else
    return false;
#endif
  }
  [[gnu::always_inline]] static backtrace_path capture_into(backtrace& target, std::uintptr_t interrupted_ip,
                                                            bool allow_libunwind) noexcept {
    bool truncated = false;
    const auto captured = backtrace_detail::capture_frames(target.frames_, interrupted_ip, allow_libunwind, truncated);
    target.size_ = static_cast<std::uint16_t>(captured.count);
    target.truncated_ = truncated;
    target.first_frame_is_exact_ = false;
    return captured.path;
  }
};

}  // namespace kairos
