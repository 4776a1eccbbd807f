// libFuzzer: any bytes as a KAIROS_OUTPUT_PATH template. Checking and expanding must never
// crash, and a pattern that the check accepts must expand without an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <kairos/runtime/output_path.hpp>

using namespace kairos::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view pattern{reinterpret_cast<const char*>(data), size};
  path_values values;
  values.pid = "4242";
  values.ppid = "1";
  values.hostname = "host";
  values.exe = "app";
  values.launch_date = "20261122-101500";
  values.launch_id = "openmpi-1069744129";
  values.rank = "0";
  values.environment = [](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return std::string{"/home/user"};
    return std::nullopt;
  };
  const bool accepted = !check_path_pattern(pattern);
  const auto expanded = expand_path(pattern, values);
  if (accepted && !expanded.has_value()) std::abort();
  return 0;
}
