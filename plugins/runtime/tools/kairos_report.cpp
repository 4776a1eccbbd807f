// kairos-report DB... [--format F] [--window K|K..L] [--compare-windows] [--rank R] [-o FILE]:
// the outputs kairos-run writes at exit (formats.hpp lists them), produced again (offline, later) from profile
// databases, by the same streamed writers; restricted to time windows, or comparing them. The work
// is kairos::database::run_report, which `python3 -m kairos report` runs too.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <kairos/plugins/database/commands.hpp>
#include <kairos/plugins/database/formats.hpp>

int main(int argc, char** argv) {
  CLI::App app{"kairos-report: the reports, traces and pictures of kairos profile databases"};
  kairos::database::report_request request;
  app.add_option("databases", request.databases, "profile databases (<stem>.db) written by kairos-run")->required();
  app.add_option("-f,--format", request.format,
                 kairos::database::format_help(false) + "; text by default; docs/outputs.md");
  app.add_option("-o,--output", request.output, "write here instead of stdout");
  app.add_option("-w,--window", request.window, "only time window K, or windows K..L (docs/windows.md)");
  app.add_flag("--compare-windows", request.compare_windows,
               "the functions whose share changed most between time windows (phase behaviour)");
  app.add_option("--rank", request.rank,
                 "only MPI rank R's processes, in any output (a merged database, docs/merge.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return kairos::database::run_report(request, std::cout, std::cerr);
}
