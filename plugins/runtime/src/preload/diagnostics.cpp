#include "preload/diagnostics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

namespace kairos::runtime {
namespace {
std::atomic<int> verbose_level{0};
std::atomic<int> stderr_copy{-1};
constexpr int lowest_private_descriptor = 100;  // out of the way of the program's small numbers
}

void keep_stderr() {
  if (stderr_copy.load() >= 0) return;
  stderr_copy.store(fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, lowest_private_descriptor));
}

void release_stderr() {
  const int descriptor = stderr_copy.exchange(-1);
  if (descriptor >= 0) close(descriptor);
}

void print_line(std::string_view line) {
  const int saved_errno = errno;
  std::string text;
  if (!line.starts_with("[kairos]")) text = "[kairos] ";
  text += line;
  if (text.back() != '\n') text += '\n';
  const int copy = stderr_copy.load(std::memory_order_relaxed);
  const int descriptor = copy >= 0 ? copy : STDERR_FILENO;
  std::size_t written = 0;
  while (written < text.size()) {
    const auto result = ::write(descriptor, text.data() + written, text.size() - written);
    if (result < 0 && errno == EINTR) continue;
    if (result <= 0) break;
    written += static_cast<std::size_t>(result);
  }
  errno = saved_errno;
}

int verbosity() { return verbose_level.load(std::memory_order_relaxed); }
void set_verbosity(int level) { verbose_level.store(level, std::memory_order_relaxed); }

}  // namespace kairos::runtime
