#include <kairos/runtime/time_windows.hpp>

#include <array>
#include <cctype>
#include <limits>

#include <fmt/format.h>

#include <kairos/printable.hpp>
#include <kairos/runtime/settings.hpp>

namespace kairos::runtime {
namespace {

constexpr std::array<std::string_view, window_clock_count> clock_names{"realtime", "monotonic", "process_cputime",
                                                                       "thread_cputime", "instructions"};

constexpr std::int64_t max_time_ns = 1'000'000'000LL * 1'000'000'000LL;  // 1e9 s, as other settings
constexpr std::int64_t max_instructions = 1'000'000'000'000'000'000LL;
constexpr std::int64_t max_repeat = 1'000'000'000;
constexpr std::size_t windows_file_max_bytes = 1 << 20;
constexpr std::size_t shown_bytes = 60;  // of an input quoted in a message

std::optional<window_clock> clock_named(std::string_view name) {
  for (std::size_t i = 0; i < clock_names.size(); ++i)
    if (clock_names[i] == name) return static_cast<window_clock>(i);
  return std::nullopt;
}

bool starts_like_a_clock(std::string_view field) {
  return !field.empty() && std::isalpha(static_cast<unsigned char>(field.front()));
}

std::string units_of(window_clock clock) {
  return counts_instructions(clock) ? "a count with an optional K, M or G (10M, 1G, 250000)"
                                    : "a number of seconds with an optional unit s, ms, us or ns "
                                      "(10, 2.5, 250ms)";
}

// "10", "2.5s", "250ms" (time: ns) or "10M", "1G" (instructions), or why not.
result<std::int64_t> parse_amount(std::string_view field, window_clock clock) {
  const auto quoted = fmt::format("\"{}\"", printable(field, shown_bytes));
  std::size_t digits_end = 0;
  while (digits_end < field.size() &&
         (std::isdigit(static_cast<unsigned char>(field[digits_end])) || field[digits_end] == '.'))
    ++digits_end;
  const auto number = field.substr(0, digits_end);
  const auto unit = field.substr(digits_end);
  const auto dot = number.find('.');
  const bool well_formed = !number.empty() && number != "." && number.find('.', dot + 1) == std::string_view::npos &&
                           (dot == std::string_view::npos || (dot > 0 && dot + 1 < number.size()));
  if (field.empty()) {
    return problem{fmt::format("it is empty; expected {}", units_of(clock))};
  }
  if (!well_formed) {
    return problem{fmt::format("{} is not {}", quoted, units_of(clock))};
  }
  std::int64_t scale = 0;
  const bool time_unit = unit == "s" || unit == "ms" || unit == "us" || unit == "ns";
  const bool count_unit = unit == "K" || unit == "k" || unit == "M" || unit == "G";
  if (unit == "m") {
    return problem{
        fmt::format("{} is ambiguous: write ms for milliseconds, or M for millions of instructions", quoted)};
  }
  if (counts_instructions(clock)) {
    if (time_unit) {
      return problem{fmt::format("{} is a time, but the instructions clock takes {}", quoted, units_of(clock))};
    }
    scale = unit.empty() ? 1 : unit == "M" ? 1'000'000 : unit == "G" ? 1'000'000'000 : count_unit ? 1'000 : 0;
  } else {
    if (count_unit) {
      return problem{
          fmt::format("{} counts instructions, but the {} clock takes {}", quoted, clock_name(clock), units_of(clock))};
    }
    scale = unit.empty() || unit == "s" ? 1'000'000'000
            : unit == "ms"              ? 1'000'000
            : unit == "us"              ? 1'000
            : unit == "ns"              ? 1
                                        : 0;
  }
  if (scale == 0) {
    return problem{fmt::format("{} has an unknown unit \"{}\"; expected {}", quoted, printable(unit, shown_bytes),
                               units_of(clock))};
  }
  // Exact decimal arithmetic: whole part and fraction apart, each checked against the limit.
  const std::int64_t limit = counts_instructions(clock) ? max_instructions : max_time_ns;
  const auto whole_text = number.substr(0, dot);
  const auto fraction_text = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
  std::int64_t whole = 0;
  bool too_large = false;
  for (char c : whole_text) {
    if ((too_large = whole > (limit / scale - (c - '0')) / 10)) break;  // checked before it can overflow
    whole = whole * 10 + (c - '0');
  }
  if (too_large) {
    return problem{fmt::format("{} is too large; at most {} {}", quoted, limit / scale,
                               counts_instructions(clock) ? "in those units" : "in those units (1e9 s)")};
  }
  std::int64_t fraction = 0, fraction_scale = scale;
  for (char c : fraction_text) {
    if (fraction_scale % 10 != 0) {
      if (c != '0') {
        return problem{fmt::format("{} is finer than 1 {}", quoted, counts_instructions(clock) ? "instruction" : "ns")};
      }
      continue;
    }
    fraction_scale /= 10;
    fraction += (c - '0') * fraction_scale;
  }
  return whole * scale + fraction;
}

result<std::int64_t> parse_repeat(std::string_view field) {
  std::int64_t value = 0;
  bool digits = !field.empty();
  for (char c : field) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      digits = false;
    else if (value <= max_repeat)
      value = value * 10 + (c - '0');
  }
  if (!digits || value > max_repeat) {
    return problem{fmt::format("the repeat count \"{}\" is not an integer in [0, {}] (0: until the process ends)",
                               printable(field, shown_bytes), max_repeat)};
  }
  return value;
}

struct field {
  std::string_view text;
  std::size_t position;  // 1-based, in the whole input
};

std::vector<field> split_fields(std::string_view text, std::size_t base, char separator) {
  std::vector<field> fields;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find(separator, start);
    fields.push_back({text.substr(start, end - start), base + start});
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

std::string_view trim_blanks(std::string_view text, std::size_t& position) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
    ++position;
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// One spec (its fields already split); the error names the character it starts at.
problem parse_spec(std::string_view text, std::size_t position, period_spec& spec) {
  auto fields = split_fields(text, position, ':');
  auto at = [](const field& where, const std::string& what) {
    return problem{fmt::format("character {}: {}", where.position, what)};
  };
  std::optional<window_clock> clock;
  auto take_clock = [&](const field& where) -> problem {
    clock = clock_named(where.text);
    if (!clock)
      return at(where, fmt::format("\"{}\" is not a clock; clocks: {}", printable(where.text, shown_bytes),
                                   accepted_clock_names()));
    return {};
  };
  if (fields.size() > 1 && starts_like_a_clock(fields.front().text)) {
    if (auto failure = take_clock(fields.front())) return failure;
    fields.erase(fields.begin());
  } else if (fields.size() > 1 && starts_like_a_clock(fields.back().text)) {
    if (auto failure = take_clock(fields.back())) return failure;
    fields.pop_back();
  }
  if (fields.size() < 2 || fields.size() > 3)
    return at(fields.front(), fmt::format("\"{}\" has {} number{}; a spec is delay:duration with an optional "
                                          ":repeat, and an optional clock first or last",
                                          printable(text, shown_bytes), fields.size(), fields.size() == 1 ? "" : "s"));
  for (const auto& where : fields)
    if (clock_named(where.text))
      return at(where, fmt::format("\"{}\" is in the place of a number; a clock goes first or last",
                                   printable(where.text, shown_bytes)));
  spec.clock = clock.value_or(window_clock::realtime);
  spec.text = std::string{text};
  const auto delay = parse_amount(fields[0].text, spec.clock);
  if (!delay.has_value()) return at(fields[0], "the delay: " + delay.failure().text());
  const auto duration = parse_amount(fields[1].text, spec.clock);
  if (!duration.has_value()) return at(fields[1], "the duration: " + duration.failure().text());
  if (duration.value() == 0) return at(fields[1], "the duration is 0; a window lasts more than nothing");
  spec.delay = delay.value();
  spec.duration = duration.value();
  if (fields.size() == 3) {
    const auto repeat = parse_repeat(fields[2].text);
    if (!repeat.has_value()) return at(fields[2], repeat.failure().text());
    spec.repeat = repeat.value();
  }
  return {};
}

}  // namespace

std::string_view clock_name(window_clock clock) noexcept { return clock_names[static_cast<std::size_t>(clock)]; }

std::string_view accepted_clock_names() noexcept {
  return "realtime, monotonic, process_cputime, thread_cputime, instructions";
}

result<std::vector<period_spec>> parse_periods(std::string_view text) {
  std::vector<period_spec> specs;
  std::size_t start = 0;
  auto separator = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
  while (start < text.size()) {
    if (separator(text[start])) {
      ++start;
      continue;
    }
    auto end = start;
    while (end < text.size() && !separator(text[end])) ++end;
    const auto spec_text = text.substr(start, end - start);
    const auto number = specs.size() + 1;
    if (!specs.empty() && specs.back().repeat == 0)
      return problem{
          fmt::format("spec {} (\"{}\", character {}) follows \"{}\", which repeats until the "
                      "process ends; an until-exit spec (repeat 0) must be the last",
                      number, printable(spec_text, shown_bytes), start + 1, printable(specs.back().text, shown_bytes))};
    period_spec spec;
    if (auto failure = parse_spec(spec_text, start + 1, spec))
      return problem{fmt::format("spec {} (\"{}\"), {}", number, printable(spec_text, shown_bytes), failure.text())};
    specs.push_back(std::move(spec));
    start = end;
  }
  return specs;
}

result<std::vector<fixed_window>> parse_windows_file(std::string_view content, std::string_view name) {
  std::vector<fixed_window> windows;
  problem failure;
  std::array<std::int64_t, window_clock_count> clock_end{};  // of the last window per clock
  std::array<std::size_t, window_clock_count> clock_line{};
  std::size_t line_number = 0, line_start = 0;
  bool header_allowed = true;
  while (line_start < content.size() && !failure) {
    ++line_number;
    auto line_end = content.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = content.size();
    auto line = content.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (const auto comment = line.find('#'); comment != std::string_view::npos) line = line.substr(0, comment);
    std::size_t column = 1;
    line = trim_blanks(line, column);
    if (line.empty()) continue;
    auto fail = [&](std::size_t at_column, const std::string& what) {
      failure =
          problem{fmt::format("{}:{}, column {}: {}; each line is clock,start,length (clocks: {}; "
                              "# starts a comment)",
                              printable(name, shown_bytes * 2), line_number, at_column, what, accepted_clock_names())};
    };
    auto fields = split_fields(line, column, ',');
    for (auto& where : fields) where.text = trim_blanks(where.text, where.position);
    if (header_allowed && fields.size() == 3 && fields[0].text == "clock" && fields[1].text == "start" &&
        fields[2].text == "length") {
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    if (fields.size() != 3) {
      fail(column, fmt::format("\"{}\" has {} field{}", printable(line, shown_bytes), fields.size(),
                               fields.size() == 1 ? "" : "s"));
      break;
    }
    const auto clock = clock_named(fields[0].text);
    if (!clock) {
      fail(fields[0].position, fmt::format("\"{}\" is not a clock", printable(fields[0].text, shown_bytes)));
      break;
    }
    const auto start_or_failure = parse_amount(fields[1].text, *clock);
    if (!start_or_failure.has_value()) {
      fail(fields[1].position, "the start: " + start_or_failure.failure().text());
      break;
    }
    const auto length_or_failure = parse_amount(fields[2].text, *clock);
    if (!length_or_failure.has_value() || length_or_failure.value() == 0) {
      fail(fields[2].position, length_or_failure.has_value() ? std::string{"the length is 0"}
                                                             : "the length: " + length_or_failure.failure().text());
      break;
    }
    const std::int64_t start = start_or_failure.value();
    const std::int64_t length = length_or_failure.value();
    const auto index = static_cast<std::size_t>(*clock);
    if (clock_line[index] != 0 && start < clock_end[index]) {
      fail(fields[1].position, fmt::format("this {} window starts before the one of line {} ends; the windows "
                                           "of a clock must be in order and must not overlap",
                                           clock_name(*clock), clock_line[index]));
      break;
    }
    if (start > std::numeric_limits<std::int64_t>::max() - length) {
      fail(fields[2].position, "the window ends beyond what the clock can count");
      break;
    }
    clock_end[index] = start + length;
    clock_line[index] = line_number;
    windows.push_back(
        {*clock, start, length,
         fmt::format("{}:{}: {}", printable(name, shown_bytes * 2), line_number, printable(line, shown_bytes))});
  }
  if (failure) return failure;
  return windows;
}

result<std::vector<fixed_window>> load_windows_file(const std::string& path) {
  const auto text = read_bounded_text_file(path, windows_file_max_bytes);
  if (!text.has_value())
    return problem{fmt::format("{} cannot be read: {}; expected a readable CSV file of at most {} bytes",
                               printable(path, shown_bytes * 2), text.failure().text(), windows_file_max_bytes)};
  const auto slash = path.rfind('/');
  return parse_windows_file(text.value(), slash == std::string::npos ? path : path.substr(slash + 1));
}

window_plan::window_plan(std::vector<period_spec> periods, std::vector<fixed_window> fixed)
    : periods_{std::move(periods)}, fixed_{std::move(fixed)} {}

bool window_plan::uses(window_clock clock) const noexcept {
  for (const auto& spec : periods_)
    if (spec.clock == clock) return true;
  for (const auto& window : fixed_)
    if (window.clock == clock) return true;
  return false;
}

void window_plan::drop(window_clock clock) {
  std::erase_if(periods_, [&](const period_spec& spec) { return spec.clock == clock; });
  std::erase_if(fixed_, [&](const fixed_window& window) { return window.clock == clock; });
}

std::optional<planned_window> window_plan::next() {
  if (spec_ < periods_.size()) {
    const auto& spec = periods_[spec_];
    planned_window window{++ordinal_, spec.clock, true, spec.delay, spec.duration, ++cycle_, &spec.text};
    if (spec.repeat != 0 && cycle_ >= spec.repeat) {
      ++spec_;
      cycle_ = 0;
    }
    return window;
  }
  if (fixed_index_ < fixed_.size()) {
    const auto& fixed = fixed_[fixed_index_++];
    return planned_window{++ordinal_, fixed.clock, false, fixed.start, fixed.length, 1, &fixed.text};
  }
  return std::nullopt;
}

}  // namespace kairos::runtime
