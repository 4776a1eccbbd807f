#pragma once
// A /proc file's whole text with plain open/read. The start-up path reads several; the ifstreams
// and the istringstream that read them before were a quarter of the constructor's time, each
// stream building its locale (docs/performance-log.md, "Measured reasons in the code").
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

namespace kairos::runtime {

// nullopt when the file cannot be opened.
inline std::optional<std::string> read_proc_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  for (;;) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace kairos::runtime
