#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

#include <kairos/components/phase_total.hpp>

namespace kairos {

// Change of the process's current resident set size during the phase (record() gives the current
// size), read from /proc/self/statm with plain system calls (no allocation, no stdio).
struct page_rss {
  using value_type = std::int64_t;  // bytes

  static constexpr std::string_view label() { return "page_rss"; }
  static constexpr std::string_view description() { return "change of the process's current resident memory"; }
  static constexpr std::string_view unit() { return "MiB"; }

  static value_type record() noexcept {
    const int file = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (file < 0) return 0;
    char text[128];
    const auto length = ::read(file, text, sizeof text - 1);
    ::close(file);
    if (length <= 0) return 0;
    // statm: "size resident shared ..." in pages; the second field is the resident set.
    std::int64_t field = 0, resident_pages = 0;
    for (ssize_t i = 0; i < length && field < 2; ++i) {
      if (text[i] == ' ') {
        ++field;
      } else if (field == 1) {
        resident_pages = resident_pages * 10 + (text[i] - '0');
      }
    }
    static const std::int64_t page_size = ::sysconf(_SC_PAGESIZE);
    return resident_pages * page_size;
  }
  void start() noexcept { phase.begin(record()); }
  void stop() noexcept { phase.end(record()); }

  std::int64_t total_bytes() const noexcept { return phase.total; }
  double get() const noexcept { return static_cast<double>(phase.total) / (1024.0 * 1024.0); }

 private:
  phase_total<value_type> phase;
};

}  // namespace kairos
