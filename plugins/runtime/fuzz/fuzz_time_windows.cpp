// libFuzzer: any bytes as KAIROS_TRACE_PERIODS (first byte even) or as a windows file (odd). A
// parse never crashes or hangs; a rejection names its position and what is accepted; an accepted
// plan yields windows that last, on a known clock, whose ends the clock can count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include <kairos/runtime/time_windows.hpp>

using namespace kairos::runtime;

namespace {

void require(bool holds) {
  if (!holds) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text{reinterpret_cast<const char*>(data) + 1, size - 1};
  window_plan plan;
  if (data[0] % 2 == 0) {
    auto periods = parse_periods(text);
    if (!periods.has_value()) {
      const auto failure = periods.failure().text();
      require(failure.find("character") != std::string::npos || failure.find("spec") != std::string::npos);
      return 0;
    }
    for (const auto& spec : periods.value()) require(spec.duration > 0 && spec.delay >= 0 && spec.repeat >= 0);
    plan = window_plan{std::move(periods).value(), {}};
  } else {
    auto windows = parse_windows_file(text, "fuzz.csv");
    if (!windows.has_value()) {
      const auto failure = windows.failure().text();
      require(failure.find("fuzz.csv:") == 0 && failure.find("clock,start,length") != std::string::npos);
      return 0;
    }
    plan = window_plan{{}, std::move(windows).value()};
  }
  std::int64_t previous = 0;
  for (int i = 0; i < 64; ++i) {
    const auto window = plan.next();
    if (!window) break;
    require(window->ordinal == previous + 1 && window->length > 0 && window->offset >= 0 && window->text);
    require(static_cast<int>(window->clock) < window_clock_count);
    require(window->offset <= std::numeric_limits<std::int64_t>::max() - window->length);
    previous = window->ordinal;
  }
  return 0;
}
