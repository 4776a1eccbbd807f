#include "preload/support/problems.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "preload/support/private_descriptor.hpp"

namespace kairos::runtime {
namespace {
std::atomic<int> verbose_level{0};
owned_descriptor stderr_copy;  // trivially constructible: usable before this file's initializers
}  // namespace

void keep_stderr() noexcept {
  if (!stderr_copy) stderr_copy.adopt(fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0));
}

void release_stderr() noexcept { stderr_copy.close_if_ours(); }

void report(std::string_view line) noexcept {
  const int saved_errno = errno;
  try {
    std::string text;
    if (!line.starts_with("[kairos]")) text = "[kairos] ";
    text += line;
    if (text.back() != '\n') text += '\n';
    // The program may have closed kairos's copy and reused the number: then fd 2 it is.
    const int descriptor = stderr_copy.still_ours() ? stderr_copy.get() : STDERR_FILENO;
    std::size_t written = 0;
    while (written < text.size()) {
      const auto result = ::write(descriptor, text.data() + written, text.size() - written);
      if (result < 0 && errno == EINTR) continue;
      if (result <= 0) break;
      written += static_cast<std::size_t>(result);
    }
  } catch (...) {  // out of memory for one line: nothing else could be said either
  }
  errno = saved_errno;
}

int verbosity() noexcept { return verbose_level.load(std::memory_order_relaxed); }
void set_verbosity(int level) noexcept { verbose_level.store(level, std::memory_order_relaxed); }

}  // namespace kairos::runtime
