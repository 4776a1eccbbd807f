#pragma once
// The outputs derived from a profile database by streaming queries: memory stays bounded by the
// number of threads and distinct names, never by the number of samples or regions.
#include <cstddef>
#include <ostream>

#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

struct text_options {
  std::size_t functions = 20;  // rows per table
  bool per_thread = true;
};

// Top functions by self and by total weighted samples, overall and per thread.
void write_text(connection& profile, std::ostream& out, const text_options& options = {});

// Chrome Trace Event JSON (Perfetto UI, chrome://tracing, speedscope): regions as complete
// events, samples as instant events carrying their stack ("sf") into "stackFrames".
void write_trace(connection& profile, std::ostream& out);

// Folded stacks ("main;solve;step 1200"), weights in microseconds of CPU time, for flamegraph.pl
// and speedscope.
void write_folded(connection& profile, std::ostream& out);

// The text report's content as JSON.
void write_summary_json(connection& profile, std::ostream& out, const text_options& options = {});

}  // namespace kairos::database
