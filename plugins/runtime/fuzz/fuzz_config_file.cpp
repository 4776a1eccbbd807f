// libFuzzer: any bytes as the KAIROS_CONFIG_FILE. kairos must never crash (a 100,000-deep
// object once crashed the program before main), and every problem names the file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <kairos/runtime/settings.hpp>

using namespace kairos::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = memfd_create("kairos-config", MFD_CLOEXEC);  // a regular file, in memory
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  settings values;
  values.apply_config_file(path);
  close(fd);
  for (const auto& line : values.problems())
    if (line.find('\n') != std::string::npos) std::abort();
  return 0;
}
