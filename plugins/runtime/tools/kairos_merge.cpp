// kairos-merge -o ALL.db INPUT... [--keep-going] [--several-launches]: profile databases of many
// processes (files, directories holding them, globs) copied into one (docs/merge.md), one input at a
// time, with a progress bar on a terminal and plain lines otherwise. An input that cannot be merged
// is named and skipped; the exit status is then 1 unless --keep-going. Inputs of two launches are
// refused unless --several-launches. The work is kairos::database::run_merge,
// which `python3 -m kairos merge` runs too.
#include <unistd.h>

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <kairos/plugins/database/commands.hpp>

int main(int argc, char** argv) {
  CLI::App app{"kairos-merge: profile databases of many processes or ranks joined into one (docs/merge.md)"};
  kairos::database::merge_request request;
  app.add_option("-o,--output", request.output, "the merged database to create (it must not exist)")->required();
  app.add_option("inputs", request.inputs,
                 "profile databases (.db), directories holding them, or globs "
                 "('ranks/*.db'); merged databases too")
      ->required();
  app.add_flag("--keep-going", request.keep_going,
               "exit 0 when inputs were skipped (corrupt, another schema "
               "version, merged already): they are still named");
  app.add_flag("--several-launches", request.several_launches,
               "merge inputs of different launch ids (separate mpirun or srun runs) into one; without it they "
               "are refused, as their times would add up");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return kairos::database::run_merge(request, std::cerr, ::isatty(STDERR_FILENO) == 1);
}
