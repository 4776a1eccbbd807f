#pragma once
// Opt-in: print the report (and write it as JSON) when the program exits normally.
//   kairos::report_at_exit({.json_path = "report.json"});
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include <kairos/report.hpp>
#include <kairos/report_json.hpp>

namespace kairos {

struct exit_report_options {
  std::FILE* text_stream = stderr;  // nullptr: no text
  std::string json_path;            // empty: no JSON
  bool per_thread = false;
};

namespace detail {
inline exit_report_options& exit_report_settings() {
  static auto* settings = new exit_report_options;  // outlives static destruction
  return *settings;
}
inline void write_exit_report() noexcept {
  const auto& options = exit_report_settings();
  try {
    const auto data = report();
    if (options.text_stream != nullptr) {
      const auto text = format_report(data, {options.per_thread});
      std::fwrite(text.data(), 1, text.size(), options.text_stream);
      std::fflush(options.text_stream);
    }
    if (!options.json_path.empty()) write_json(options.json_path, data);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
  }
}
}  // namespace detail

// Calling it again replaces the options; the report is written once.
inline void report_at_exit(exit_report_options options = {}) {
  detail::exit_report_settings() = std::move(options);
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(detail::write_exit_report); });
}

}  // namespace kairos
