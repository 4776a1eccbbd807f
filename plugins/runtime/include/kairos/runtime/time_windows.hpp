#pragma once
// Time windows: when the runtime collects (docs/windows.md). Two ways to say it, parsed here into
// one plan that the runtime walks, one window at a time:
//   KAIROS_TRACE_PERIODS       specs "clock:delay:duration:repeat" (or the clock last), run one
//                              after another; each cycle waits `delay` from the previous window's
//                              end (the start, for the first), then collects for `duration`.
//   KAIROS_TRACE_WINDOWS_FILE  CSV lines "clock,start,length": windows at fixed positions of their
//                              clock, counted from the process's start; after the periods.
// Pure parsing and planning: no clocks are read here (the runtime's windows/ stage does that), so
// the tools, the tests and the fuzzer use the same code the runtime does.
#include <kairos/problem.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kairos::runtime {

enum class window_clock : std::uint8_t { realtime, monotonic, process_cputime, thread_cputime, instructions };
inline constexpr int window_clock_count = 5;

std::string_view clock_name(window_clock clock) noexcept;
// "realtime, monotonic, process_cputime, thread_cputime, instructions".
std::string_view accepted_clock_names() noexcept;
// Units of every clock but `instructions` are nanoseconds.
constexpr bool counts_instructions(window_clock clock) noexcept { return clock == window_clock::instructions; }

// One spec of KAIROS_TRACE_PERIODS; amounts in the clock's units (ns, or instructions).
struct period_spec {
  window_clock clock = window_clock::realtime;
  std::int64_t delay = 0;
  std::int64_t duration = 0;
  std::int64_t repeat = 1;  // 0: until the process ends
  std::string text;         // as written, for messages and the database
};

// One line of KAIROS_TRACE_WINDOWS_FILE: [start, start + length) on `clock`, from the process's start.
struct fixed_window {
  window_clock clock = window_clock::realtime;
  std::int64_t start = 0;
  std::int64_t length = 0;
  std::string text;  // "file.csv:12: instructions,100M,10M"
};

// A parse gives its value, or a problem naming the position and what is accepted.
// "realtime:10:1:5 process_cputime:10:2:20", separated by spaces or commas; "" is no windows.
result<std::vector<period_spec>> parse_periods(std::string_view text);
// The file's content; `name` prefixes messages and each window's text.
result<std::vector<fixed_window>> parse_windows_file(std::string_view content, std::string_view name);
// The file at `path` (a regular file of at most 1 MiB), parsed.
result<std::vector<fixed_window>> load_windows_file(const std::string& path);

// One window of the plan, in the order the runtime opens them.
struct planned_window {
  std::int64_t ordinal = 0;  // 1, 2, ...
  window_clock clock = window_clock::realtime;
  // Relative (periods): opens `offset` after the previous window closed, read on this window's
  // clock at that moment. Absolute (file): opens when the clock reaches `offset`.
  bool relative = true;
  std::int64_t offset = 0;
  std::int64_t length = 0;
  std::int64_t cycle = 1;             // of its period spec (1 for a file's window)
  const std::string* text = nullptr;  // its spec or file line, owned by the plan
};

// The plan, walked lazily: a spec repeated "until exit" never ends.
class window_plan {
 public:
  window_plan() = default;
  window_plan(std::vector<period_spec> periods, std::vector<fixed_window> fixed);
  // Windows point at their specs' text: moved, never copied.
  window_plan(window_plan&&) = default;
  window_plan& operator=(window_plan&&) = default;

  bool empty() const noexcept { return periods_.empty() && fixed_.empty(); }
  bool uses(window_clock clock) const noexcept;
  // Forgets the windows on `clock` (one the runtime cannot read here); before the first next().
  void drop(window_clock clock);
  // The next window, or nullopt when the plan is done.
  std::optional<planned_window> next();

 private:
  std::vector<period_spec> periods_;
  std::vector<fixed_window> fixed_;
  std::size_t spec_ = 0, fixed_index_ = 0;
  std::int64_t cycle_ = 0, ordinal_ = 0;
};

}  // namespace kairos::runtime
