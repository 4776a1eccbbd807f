#pragma once
// The outputs written at finalize, under the expanded KAIROS_OUTPUT_PATH stem, all but `db`
// derived from the profile database by the database plugin's streamed writers, plus the user-API
// regions' call graphs (aggregated in memory by the core's storage) and the thread registry:
//   db      <stem>.db          the SQLite profile (source of truth)
//   text    <stem>.txt         top functions (overall, per thread), region tables, threads
//   trace   <stem>.trace.json  Chrome Trace Event JSON (regions as slices, samples with stacks)
//   folded  <stem>.folded      collapsed stacks for flamegraph.pl / speedscope
//   json    <stem>.json        the region report JSON, with the profile summary under "profile"
#include <string>
#include <vector>

namespace kairos::runtime {

struct report_request {
  std::string stem;                  // absolute path without extension
  std::vector<std::string> formats;  // "db", "text", "trace", "folded", "json"
  std::string command_line;
  std::string end_reason;            // "exit", "signal SIGTERM", "exec"
  std::string database_path;         // the profile database; empty when there is none
};

struct written_report {
  std::vector<std::string> files;
  std::string problem;  // non-empty: what failed (the "[kairos]" line to print)
};

// The file a format writes for `stem`.
std::string output_file(const std::string& stem, const std::string& format);

written_report write_report(const report_request& request);

}  // namespace kairos::runtime
