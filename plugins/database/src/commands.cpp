// kairos-report's and kairos-merge's work behind their argument parsers (commands.hpp).
#include <kairos/plugins/database/commands.hpp>

#include <glob.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/merge.hpp>
#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/problem.hpp>

namespace kairos::database {

namespace {

namespace fs = std::filesystem;

// The tools and the Python package print what these commands write, as is: each line they show a
// user carries the prefix, added here once; messages (and database_error's) carry none.
constexpr std::string_view line_prefix = "[kairos] ";

void error_line(std::ostream& errors, std::string_view text) { errors << line_prefix << text << '\n'; }

// A count as a reader takes it in at a glance: "600", "12,345", "3,210,987".
std::string grouped(std::int64_t count) {
  auto digits = std::to_string(count < 0 ? -count : count);
  for (auto at = static_cast<std::ptrdiff_t>(digits.size()) - 3; at > 0; at -= 3)
    digits.insert(static_cast<std::size_t>(at), ",");
  return count < 0 ? "-" + digits : digits;
}

// "K" or "K..L" with 1 <= K <= L.
std::optional<window_range> parse_window_range(const std::string& text) {
  auto number = [](std::string_view digits) -> std::optional<std::int64_t> {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc{} || end != digits.data() + digits.size() || value < 1) return std::nullopt;
    return value;
  };
  const auto dots = text.find("..");
  const auto first = number(std::string_view{text}.substr(0, dots));
  const auto last = dots == std::string::npos ? first : number(std::string_view{text}.substr(dots + 2));
  if (!first || !last || *last < *first) return std::nullopt;
  return window_range::only(*first, *last);
}

constexpr const char* accepted_inputs =
    "kairos-merge takes profile databases (.db files), directories holding them, or globs such as 'ranks/*.db'";

// A file as given; a directory's .db files, sorted; a glob's matches, sorted; or the problem that
// the argument is none of these.
result<std::vector<std::string>> expand(const std::string& argument) {
  std::error_code error;
  if (fs::is_directory(argument, error)) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(argument, error))
      if (entry.path().extension() == ".db" && entry.is_regular_file(error)) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty())
      return problem{fmt::format("input '{}' is a directory with no .db files; {}", argument, accepted_inputs)};
    return files;
  }
  if (fs::exists(argument, error)) return std::vector<std::string>{argument};
  if (argument.find_first_of("*?[") != std::string::npos) {
    glob_t matches{};
    std::vector<std::string> files;
    if (::glob(argument.c_str(), 0, nullptr, &matches) == 0)
      files.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
    ::globfree(&matches);
    if (files.empty())
      return problem{fmt::format("input '{}' is a glob that matches no file; {}", argument, accepted_inputs)};
    return files;
  }
  return problem{fmt::format("input '{}' does not exist; {}", argument, accepted_inputs)};
}

// A bar redrawn in place on a terminal (at most 10 times a second), a line every 2 s otherwise.
class progress {
 public:
  progress(std::ostream& errors, std::size_t inputs, bool terminal)
      : errors_{errors}, inputs_{inputs}, terminal_{terminal} {}

  void update(std::size_t done, std::int64_t samples, bool last = false) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < (terminal_ ? std::chrono::milliseconds{100} : std::chrono::milliseconds{2000})) return;
    shown_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const auto status =
        fmt::format("{}/{} inputs, {} samples, {} samples/s", done, inputs_, grouped(samples),
                    grouped(seconds > 0 ? static_cast<std::int64_t>(static_cast<double>(samples) / seconds) : 0));
    if (terminal_) {
      constexpr std::size_t width = 30;
      const std::size_t filled = inputs_ == 0 ? width : width * done / inputs_;
      errors_ << fmt::format("\r{}merging [{}{}] {}\x1b[K", line_prefix, std::string(filled, '#'),
                             std::string(width - filled, '.'), status);
      if (last) errors_ << '\n';
    } else {
      error_line(errors_, "merged " + status);
    }
    errors_.flush();
  }

  // A problem on a line of its own, the bar drawn again below it.
  void problem(const std::string& message) {
    if (terminal_) errors_ << "\r\x1b[K";
    error_line(errors_, message);
    shown_ = {};
  }

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::ostream& errors_;
  std::size_t inputs_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_{};
};

}  // namespace

int run_report(const report_request& request, std::ostream& standard_out, std::ostream& errors) {
  const auto* format = find_format(request.format);
  if (format == nullptr || !format->from_database) {
    error_line(errors, fmt::format("--format \"{}\" is not valid: expected one of {}", request.format,
                                   report_format_names(", ")));
    return 2;
  }
  if (request.databases.size() > 1 && !format->several_databases) {
    std::vector<std::string_view> several;
    for (const auto& row : formats)
      if (row.from_database && row.several_databases) several.push_back(row.name);
    error_line(errors, fmt::format("--format {} takes one database at a time ({} given); {} take several", format->name,
                                   request.databases.size(), fmt::join(several, " and ")));
    return 2;
  }
  for (const auto& path : request.databases) {
    std::error_code error;
    if (!fs::is_regular_file(path, error)) {
      error_line(errors, fmt::format("database '{}' is not a file; kairos-report takes profile databases "
                                     "(.db files) written by kairos-run or kairos-merge",
                                     path));
      return 2;
    }
  }
  window_range windows;
  if (!request.window.empty()) {
    const auto range = parse_window_range(request.window);
    if (!range) {
      error_line(errors, fmt::format("--window \"{}\" is not valid: expected a window ordinal K or a "
                                     "range K..L with 1 <= K <= L",
                                     request.window));
      return 2;
    }
    windows = *range;
  }
  std::ofstream file;
  if (!request.output.empty()) {
    file.open(request.output, std::ios::binary | std::ios::trunc);
    if (!file) {
      error_line(errors, fmt::format("cannot write {}; give a writable -o path", request.output));
      return 1;
    }
  }
  std::ostream& out = request.output.empty() ? standard_out : file;
  try {
    for (const auto& path : request.databases) {
      auto profile = open_profile(path);
      if (request.rank) restrict_to_rank(profile, *request.rank);
      if (request.databases.size() > 1 && (format->id == format_id::text || request.compare_windows))
        out << "== " << path << "\n";
      if (!windows.all || request.compare_windows) {
        const auto count = window_count(profile);
        if (count == 0) {
          error_line(errors, fmt::format("{} has no time windows (its run set no KAIROS_TRACE_PERIODS "
                                         "nor KAIROS_TRACE_WINDOWS_FILE); leave out --window and --compare-windows",
                                         path));
          return 2;
        }
        if (windows.first > count) {
          error_line(errors, fmt::format("--window {}: {} has windows 1 to {}", request.window, path, count));
          return 2;
        }
      }
      if (request.compare_windows)
        write_window_comparison(profile, out);
      else
        write_format(format->id, profile, out, windows);
    }
  } catch (const std::exception& error) {
    error_line(errors, error.what());
    return 1;
  }
  out.flush();
  return out ? 0 : 1;
}

int run_merge(const merge_request& request, std::ostream& errors, bool terminal) {
  std::vector<std::string> inputs;
  for (const auto& argument : request.inputs) {
    const auto files = expand(argument);
    if (!files.has_value()) {
      error_line(errors, files.failure().text());
      return 2;
    }
    inputs.insert(inputs.end(), files.value().begin(), files.value().end());
  }

  std::unique_ptr<merger> merged_into;
  try {
    merged_into = std::make_unique<merger>(request.output);
  } catch (const std::exception& problem) {
    error_line(errors, std::string{problem.what()} + "; give -o a new path");
    return 2;
  }
  progress shown{errors, inputs.size(), terminal};
  std::size_t merged = 0, skipped = 0;
  std::string first_launch, first_launch_input;
  for (std::size_t index = 0; index < inputs.size(); ++index) {
    try {
      const auto added = merged_into->add(inputs[index]);
      ++merged;
      // Two launches' times would add up as one run's: the merge stops, and its output goes (the
      // launch ids are the merger's by-product, so the check costs no input a second read).
      for (const auto& launch : added.launch_ids) {
        if (first_launch_input.empty()) {
          first_launch = launch;
          first_launch_input = inputs[index];
        } else if (launch != first_launch && !request.several_launches) {
          shown.problem(
              fmt::format("the inputs hold two launches: '{}' (in '{}') and '{}' (in '{}'); their "
                          "times would add up as one run's. Merge each launch on its own, or give "
                          "--several-launches if they belong together; {} was not written",
                          first_launch, first_launch_input, launch, inputs[index], request.output));
          merged_into.reset();
          std::error_code ignored;
          for (const char* suffix : {"", "-journal"}) fs::remove(request.output + suffix, ignored);
          return 2;
        }
      }
    } catch (const std::exception& problem) {
      ++skipped;
      shown.problem(fmt::format("{} (skipped)", problem.what()));
    }
    shown.update(index + 1, merged_into->samples(), index + 1 == inputs.size());
  }
  try {
    merged_into->finish();
  } catch (const std::exception& problem) {
    error_line(errors, problem.what());
    return 1;
  }
  error_line(errors,
             fmt::format("{}: {} of {} inputs merged ({} processes, {} samples) in {:.1f} s{}", request.output, merged,
                         inputs.size(), grouped(merged_into->processes()), grouped(merged_into->samples()),
                         shown.seconds(), skipped == 0 ? "" : fmt::format("; {} skipped, named above", skipped)));
  errors.flush();
  if (merged == 0) return 1;
  return skipped == 0 || request.keep_going ? 0 : 1;
}

}  // namespace kairos::database
