#pragma once
// The form the tools that run a program share (kairos-run, kairos-causal):
// `tool [options] -- <command> [args...]`. Everything after the first "--" is the command, never
// parsed as the tool's options.
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <variant>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace kairos::tools {

inline constexpr int usage_error_status = 2;

inline void error_line(const std::string& message) { std::cerr << "[kairos] " << message << '\n'; }

// What an option's value may be ("a number in [1, 100000]"; "" where its description says it),
// for an option given without one.
using accepted_values_of = std::function<std::string(std::string_view option)>;

// Parses `app` over the options before "--". Returns the command (argv's tail after "--"), or the
// exit status to end with: help or version printed (0), or a usage error said on stderr (2).
// `usage`: "kairos-run [options] -- <command> [args...]".
inline std::variant<char**, int> parse_command_line(CLI::App& app, int argc, char** argv, std::string_view usage,
                                                    const accepted_values_of& accepted = {}) {
  int separator = -1;
  for (int i = 1; i < argc; ++i)
    if (std::string_view{argv[i]} == "--") {
      separator = i;
      break;
    }
  if (separator < 0) {
    bool asks_for_help = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view argument{argv[i]};
      asks_for_help = asks_for_help || argument == "-h" || argument == "--help" || argument == "--version";
    }
    if (!asks_for_help) {
      error_line(fmt::format("missing '--' before the command: {}", usage));
      return usage_error_status;
    }
  }
  try {
    app.parse(separator < 0 ? argc : separator, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ArgumentMismatch& error) {
    // An option's value left out ("--freq --"): CLI11 says "--freq: 1 required TEXT missing".
    const std::string_view what{error.what()};
    const auto* option = app.get_option_no_throw(std::string{what.substr(0, what.find(':'))});
    if (option == nullptr || !what.ends_with(" missing")) {
      error_line(fmt::format("{}; see {} --help", error.what(), app.get_name()));
      return usage_error_status;
    }
    const auto values = accepted ? accepted(option->get_name()) : std::string{};
    error_line(fmt::format("{} needs a value: {}{}; see {} --help", option->get_name(), option->get_description(),
                           values.empty() ? "" : ", " + values, app.get_name()));
    return usage_error_status;
  } catch (const CLI::ParseError& error) {
    error_line(fmt::format("{}; see {} --help", error.what(), app.get_name()));
    return usage_error_status;
  }
  if (separator + 1 >= argc) {
    error_line(fmt::format("no command after '--': {}", usage));
    return usage_error_status;
  }
  return argv + separator + 1;
}

}  // namespace kairos::tools
