#pragma once
// kairos::backtrace_metrics: what the sampled thread and process look like at the sample, read
// with two system calls and no other plugin:
//   getrusage(RUSAGE_THREAD): peak resident set of the process (Linux fills ru_maxrss from the
//     shared memory map's high-water mark for RUSAGE_THREAD too), and this thread's minor and
//     major page faults and voluntary / involuntary context switches;
//   clock_gettime(CLOCK_THREAD_CPUTIME_ID): this thread's CPU time.
// clock_gettime is async-signal-safe by POSIX; getrusage is not on POSIX's list but is a plain
// system call on Linux (no lock, no allocation in glibc). Hardware counters come from the perf or
// papi plugins in the same bundle, not from here. Cost: two real system calls
// (docs/performance-log.md, "Measured reasons in the code").
#include <sys/resource.h>
#include <time.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace kairos {

struct backtrace_metrics {
  struct reading {
    std::int64_t peak_rss_bytes = 0;
    std::int64_t thread_cpu_time_ns = 0;
    std::int64_t minor_page_faults = 0;
    std::int64_t major_page_faults = 0;
    std::int64_t voluntary_context_switches = 0;
    std::int64_t involuntary_context_switches = 0;
  };
  using value_type = reading;
  static constexpr bool available_at_build = true;

  reading value;

  static constexpr std::string_view label() { return "backtrace_metrics"; }
  static constexpr std::string_view description() {
    return "peak RSS of the process and the sampled thread's CPU time, page faults and context switches";
  }
  static constexpr std::string_view unit() { return "MiB, ms, count"; }
  static constexpr std::array<std::string_view, 6> value_labels() {
    return {"peak_rss_MiB", "thread_cpu_ms",      "minor_faults",
            "major_faults", "voluntary_switches", "involuntary_switches"};
  }
  static bool available() noexcept { return true; }

  static reading record() noexcept {
    reading now;
    ::rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) == 0) {
      now.peak_rss_bytes = std::int64_t{usage.ru_maxrss} * 1024;  // Linux reports KiB
      now.minor_page_faults = usage.ru_minflt;
      now.major_page_faults = usage.ru_majflt;
      now.voluntary_context_switches = usage.ru_nvcsw;
      now.involuntary_context_switches = usage.ru_nivcsw;
    }
    timespec cpu{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
      now.thread_cpu_time_ns = std::int64_t{cpu.tv_sec} * 1'000'000'000 + cpu.tv_nsec;
    return now;
  }
  void sample() noexcept { value = record(); }

  std::array<double, 6> get() const noexcept {
    return {static_cast<double>(value.peak_rss_bytes) / (1024.0 * 1024.0),
            static_cast<double>(value.thread_cpu_time_ns) / 1e6,
            static_cast<double>(value.minor_page_faults),
            static_cast<double>(value.major_page_faults),
            static_cast<double>(value.voluntary_context_switches),
            static_cast<double>(value.involuntary_context_switches)};
  }
};

}  // namespace kairos
