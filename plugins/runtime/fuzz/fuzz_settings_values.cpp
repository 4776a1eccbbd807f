// libFuzzer: any bytes as the value of any setting, from any source. kairos must answer with
// at most one problem line per value (never a crash, never a line broken by the value's bytes,
// never an echo longer than the cap), and a rejected value must leave the default in force.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <kairos/runtime/settings.hpp>

using namespace kairos::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto definitions = setting_definitions();
  const auto& definition = definitions[data[0] % definitions.size()];
  const std::string_view value{reinterpret_cast<const char*>(data + 1), size - 1};
  settings values;
  const bool accepted = values.set(definition.variable, value, setting_source::environment);
  if (accepted != values.problems().empty()) std::abort();
  for (const auto& line : values.problems())
    if (line.find('\n') != std::string::npos || line.size() > 2048) std::abort();
  return 0;
}
