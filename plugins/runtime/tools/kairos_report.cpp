// kairos-report DB... [--format text|trace|folded|json] [-o FILE]: the outputs kairos-run writes
// at exit, produced again (offline, later) from profile databases, by the same streamed writers.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>

int main(int argc, char** argv) {
  CLI::App app{"kairos-report: text, trace, folded stacks or JSON from kairos profile databases"};
  std::vector<std::string> databases;
  std::string format = "text";
  std::string output;
  app.add_option("databases", databases, "profile databases (<stem>.db) written by kairos-run")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-f,--format", format, "text (default), trace (Chrome Trace Event JSON), folded "
                                        "(flamegraph.pl / speedscope), json (summary)")
      ->check(CLI::IsMember({"text", "trace", "folded", "json"}));
  app.add_option("-o,--output", output, "write here instead of stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (databases.size() > 1 && (format == "trace" || format == "json")) {
    std::cerr << fmt::format("[kairos] --format {} takes one database at a time ({} given); "
                             "text and folded take several\n", format, databases.size());
    return 2;
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
      if (format == "text") {
        if (databases.size() > 1) out << "== " << path << "\n";
        kairos::database::write_text(profile, out);
      } else if (format == "trace") {
        kairos::database::write_trace(profile, out);
      } else if (format == "folded") {
        kairos::database::write_folded(profile, out);
      } else {
        kairos::database::write_summary_json(profile, out);
      }
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  out.flush();
  return out ? 0 : 1;
}
