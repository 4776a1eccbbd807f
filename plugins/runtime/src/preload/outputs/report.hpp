#pragma once
// The outputs written at finalize, under the expanded KAIROS_OUTPUT_PATH stem, all but `db`
// derived from the profile database by the database plugin's streamed writers, plus the user-API
// regions' call graphs (aggregated in memory by the core's storage) and the thread registry:
//   db      <stem>.db          the SQLite profile (source of truth)
//   text    <stem>.txt         top functions (overall, per thread), region tables, threads
//   trace   <stem>.trace.json  Chrome Trace Event JSON (regions as slices, samples with stacks)
//   perfetto <stem>.perfetto-trace  Perfetto's protobuf trace (the same, interned; its samples
//                                   encoded as they were committed)
//   folded  <stem>.folded      collapsed stacks for flamegraph.pl / speedscope
//   speedscope <stem>.speedscope.json  speedscope's own format
//   flamegraph <stem>.svg      a flame graph, self-contained
//   html    <stem>.html        a self-contained report page (summary, tables, flame graph, timeline)
//   json    <stem>.json        the region report JSON, with the profile summary under "profile"
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct report_request {
  std::string stem;                  // absolute path without extension
  std::vector<std::string> formats;  // KAIROS_OUTPUT_FORMATS: "db", "text", "trace", ...
  std::string command_line;
  std::string end_reason;     // "exit", "signal SIGTERM", "exec"
  std::string database_path;  // the profile database; empty when there is none
  std::uint64_t regions_recorded = 0;
  std::uint64_t mismatched_pops = 0;
  // The regions the annotations made (OpenMP, NVTX, Kokkos, ROCTx), name to kind ("openmp"): the
  // text report lists them apart from the user API's, under a heading per kind.
  std::map<std::string, std::string, std::less<>> region_kinds;
  // The packets of the database's every CPU sample, streamed as they were committed: the Perfetto
  // trace is written around them (write_perfetto_with_streamed_samples). "": from the database.
  std::string perfetto_samples_path;
};

struct written_report {
  std::vector<std::string> files;
  problem failure;            // what failed; the files before it were written whole
  std::string database_path;  // where the database is now (an exec snapshot's moves)
  std::string note;           // the Chrome trace's samples stopped at its size limit: where they all are
};

// Every file is created exclusively under a temporary name next to its final one and renamed
// into place only once complete (renameat2 RENAME_NOREPLACE): a symlink planted at the final name
// is never followed, an existing file is never overwritten, and a full disk leaves no half file.

// The file a format writes for `stem`.
std::string output_file(const std::string& stem, const std::string& format);

written_report write_report(const report_request& request);

// Whether none of the files `formats` would write for `stem` exists yet.
bool stem_is_free(const std::string& stem, const std::vector<std::string>& formats);
// Moves `from` to `to` unless `to` exists; a problem naming both otherwise.
problem rename_without_replacing(const std::string& from, const std::string& to);

}  // namespace kairos::runtime
