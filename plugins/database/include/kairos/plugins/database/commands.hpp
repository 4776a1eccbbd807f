#pragma once
// What kairos-report and kairos-merge do once their arguments are parsed. The tools (CLI11) and
// the Python package (`python3 -m kairos`, argparse) both call these, so that they write the same
// bytes and name bad input with the same lines and exit statuses.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kairos::database {

struct report_request {
  std::vector<std::string> databases;
  std::string format = "text";  // the name of a row of formats.hpp's table written from a database
  std::string output;           // a file to write; empty: the `out` stream
  std::string window;           // "K" or "K..L" (docs/windows.md); empty: every window
  bool compare_windows = false;
  std::optional<std::int64_t> rank;  // only this MPI rank's processes (restrict_to_rank)
};

// The report of each database; problems as `[kairos]` lines on `errors` (the one place that prefix
// is added to a database message). Returns the exit status:
// 0, 1 when a database cannot be read or the output written, 2 for a bad request.
int run_report(const report_request& request, std::ostream& out, std::ostream& errors);

struct merge_request {
  std::string output;               // must not exist
  std::vector<std::string> inputs;  // databases, directories holding them, globs
  bool keep_going = false;          // exit 0 although inputs were skipped
  bool several_launches = false;    // inputs of different launch ids are merged together
};

// docs/merge.md: inputs merged one at a time, progress on `errors` (a bar redrawn in place when
// `terminal`, else a line every 2 s), each skipped input named. Returns the exit status: 0; 1 when
// an input was skipped (0 with keep_going) or none was merged; 2 for a bad argument or output, or
// inputs of two launches without several_launches (then nothing is written).
int run_merge(const merge_request& request, std::ostream& errors, bool terminal);

}  // namespace kairos::database
