// kairos-report DB... [--format text|trace|folded|speedscope|flamegraph|html|json] [--window K|K..L] [--compare-windows]
// [-o FILE]: the outputs kairos-run writes at exit, produced again (offline, later) from profile
// databases, by the same streamed writers; restricted to time windows, or comparing them.
#include <charconv>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>

namespace {

// "K" or "K..L" with 1 <= K <= L.
std::optional<kairos::database::window_range> parse_window_range(const std::string& text) {
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
  return kairos::database::window_range::only(*first, *last);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kairos-report: text, trace, folded stacks or JSON from kairos profile databases"};
  std::vector<std::string> databases;
  std::string format = "text";
  std::string output;
  app.add_option("databases", databases, "profile databases (<stem>.db) written by kairos-run")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-f,--format", format, "text (default), trace (Chrome Trace Event JSON), folded "
                                        "(flamegraph.pl), speedscope (speedscope's own format), flamegraph (SVG), html (report "
                                        "page), json (summary)")
      ->check(CLI::IsMember({"text", "trace", "folded", "speedscope", "flamegraph", "html", "json"}));
  app.add_option("-o,--output", output, "write here instead of stdout");
  std::string window_text;
  bool compare_windows = false;
  app.add_option("-w,--window", window_text, "only time window K, or windows K..L (docs/windows.md)");
  app.add_flag("--compare-windows", compare_windows,
               "the functions whose share changed most between time windows (phase behaviour)");
  std::optional<std::int64_t> rank;
  app.add_option("--rank", rank, "only MPI rank R's processes, in any output (a merged database, docs/merge.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (databases.size() > 1 && format != "text" && format != "folded") {
    std::cerr << fmt::format("[kairos] --format {} takes one database at a time ({} given); "
                             "text and folded take several\n", format, databases.size());
    return 2;
  }
  kairos::database::window_range windows;
  if (!window_text.empty()) {
    const auto range = parse_window_range(window_text);
    if (!range) {
      std::cerr << fmt::format("[kairos] --window \"{}\" is not valid: expected a window ordinal K or a "
                               "range K..L with 1 <= K <= L\n", window_text);
      return 2;
    }
    windows = *range;
  }
  std::ofstream file;
  if (!output.empty()) {
    file.open(output, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::cerr << fmt::format("[kairos] cannot write {}; give a writable -o path\n", output);
      return 1;
    }
  }
  std::ostream& out = output.empty() ? std::cout : file;
  try {
    for (const auto& path : databases) {
      auto profile = kairos::database::open_profile(path);
      if (rank) kairos::database::restrict_to_rank(profile, *rank);
      if (databases.size() > 1 && (format == "text" || compare_windows)) out << "== " << path << "\n";
      if (!windows.all || compare_windows) {
        const auto count = kairos::database::window_count(profile);
        if (count == 0) {
          std::cerr << fmt::format("[kairos] {} has no time windows (its run set no KAIROS_TRACE_PERIODS "
                                   "nor KAIROS_TRACE_WINDOWS_FILE); leave out --window and --compare-windows\n",
                                   path);
          return 2;
        }
        if (windows.first > count) {
          std::cerr << fmt::format("[kairos] --window {}: {} has windows 1 to {}\n", window_text, path, count);
          return 2;
        }
      }
      if (compare_windows) {
        kairos::database::write_window_comparison(profile, out);
      } else if (format == "text") {
        kairos::database::write_text(profile, out, {.windows = windows});
      } else if (format == "trace") {
        kairos::database::write_trace(profile, out, windows);
      } else if (format == "folded") {
        kairos::database::write_folded(profile, out, windows);
      } else if (format == "flamegraph") {
        kairos::database::write_flamegraph(profile, out, windows);
      } else if (format == "speedscope") {
        kairos::database::write_speedscope(profile, out, windows, "kairos " KAIROS_VERSION);
      } else if (format == "html") {
        kairos::database::write_html(profile, out, windows, "kairos " KAIROS_VERSION);
      } else {
        kairos::database::write_summary_json(profile, out, {.windows = windows});
      }
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  out.flush();
  return out ? 0 : 1;
}
