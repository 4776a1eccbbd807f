#pragma once
// Opt-in: print the report (and write it as JSON) when the program exits normally.
//   kairos::report_at_exit();                                // text on stderr
//   kairos::report_at_exit({.json_path = "report.json"});    // and JSON: needs the header below
// Writing JSON needs <kairos/report_json.hpp> included in the file that calls report_at_exit: its
// report_at_exit, a plain function, is chosen over this header's template wherever both are seen,
// and only it can write JSON. So nlohmann_json is compiled only in the files that write JSON.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

#include <kairos/report.hpp>

namespace kairos {

struct exit_report_options {
  std::FILE* text_stream = stderr;  // nullptr: no text
  std::string json_path;            // empty: no JSON; needs <kairos/report_json.hpp> (see above)
  bool per_thread = false;
};

namespace detail {
using json_report_writer = void (*)(const std::string& path, const report_data& data);

struct exit_report_request {
  exit_report_options options;
  json_report_writer write_json = nullptr;  // set by <kairos/report_json.hpp>'s report_at_exit
};

inline exit_report_request& exit_report_settings() {
  static auto* settings = new exit_report_request;  // outlives static destruction
  return *settings;
}
// Templates with nothing to deduce, as in report.hpp: compiled only where report_at_exit is called.
template <class = void>
void write_exit_report() noexcept {
  const auto& [options, write_json] = exit_report_settings();
  try {
    const auto data = report();
    if (options.text_stream != nullptr) {
      const auto text = format_report(data, {options.per_thread});
      std::fwrite(text.data(), 1, text.size(), options.text_stream);
      std::fflush(options.text_stream);
    }
    if (!options.json_path.empty() && write_json != nullptr) write_json(options.json_path, data);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
  }
}

// A later call replaces the options (and the writer); the report is written once.
template <class = void>
void register_exit_report(exit_report_options options, json_report_writer write_json) {
  exit_report_settings() = {std::move(options), write_json};
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(write_exit_report<>); });
}
}  // namespace detail

// Calling it again replaces the options; the report is written once. A template only so that the
// report_at_exit of <kairos/report_json.hpp> is preferred where that header is included; this one
// throws std::invalid_argument when asked for JSON.
template <class = void>
void report_at_exit(exit_report_options options = {}) {
  if (!options.json_path.empty())
    throw std::invalid_argument("[kairos] report_at_exit cannot write JSON to '" + options.json_path +
                                "' here: include <kairos/report_json.hpp> in the file that calls it");
  detail::register_exit_report(std::move(options), nullptr);
}

}  // namespace kairos
