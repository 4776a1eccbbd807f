// A user-written component next to built-in ones: the bytes a phase read through a counter the
// program owns. A component is a plain struct; the bundle calls what it has.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <kairos/component_tuple.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/wall_clock.hpp>

namespace app {
std::uint64_t bytes_read_total = 0;  // the program's own I/O counter

std::vector<char> read_file(const char* path) {
  std::ifstream file{path, std::ios::binary};
  std::vector<char> data{std::istreambuf_iterator<char>{file}, {}};
  bytes_read_total += data.size();
  return data;
}
}  // namespace app

struct bytes_read {
  static constexpr std::string_view label() { return "bytes_read"; }
  static constexpr std::string_view description() { return "bytes the program read from files"; }
  static constexpr std::string_view unit() { return "B"; }

  static std::uint64_t record() { return app::bytes_read_total; }
  void start() { at_start = record(); }
  void stop() { total += record() - at_start; }
  std::uint64_t get() const { return total; }

 private:
  std::uint64_t at_start = 0;
  std::uint64_t total = 0;
};

int main() {
  const char* path = "custom_component.data";
  std::ofstream{path, std::ios::binary} << std::string(1 << 20, 'k');

  kairos::component_tuple<kairos::wall_clock, kairos::peak_rss, bytes_read> bundle{"load"};
  bundle.start();
  const auto data = app::read_file(path);
  bundle.stop();
  std::remove(path);

  fmt::print("{}: read {} bytes in {:.3f} ms wall, peak RSS grew {:.2f} MiB\n", bundle.label(),
             bundle.get<bytes_read>(), bundle.get<kairos::wall_clock>(), bundle.get<kairos::peak_rss>());
  return data.size() == bundle.get<bytes_read>() ? 0 : 1;
}
