#pragma once
// The outputs written at finalize: the regions' call graphs (process-wide and per thread) and the
// thread registry, as text and JSON, under the expanded KAIROS_OUTPUT_PATH stem.
#include <string>
#include <vector>

namespace kairos::runtime {

struct report_request {
  std::string stem;                  // absolute path without extension
  std::vector<std::string> formats;  // "text", "json"
  std::string command_line;
  std::string end_reason;            // "exit", "signal SIGTERM", "exec"
};

struct written_report {
  std::vector<std::string> files;
  std::string problem;  // non-empty: what failed (the "[kairos]" line to print)
};

written_report write_report(const report_request& request);

}  // namespace kairos::runtime
