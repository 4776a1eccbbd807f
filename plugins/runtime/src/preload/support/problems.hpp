#pragma once
// The runtime's reporter. The `problem` type (and capture_problem, which turns exceptions into
// problems at a boundary) is the core's, <kairos/problem.hpp>, shared with the plugins. A step
// that can fail returns one; whoever decides what the failure means for the run (lifecycle,
// mostly) reports it here: one "[kairos]" line on stderr, the only place the prefix is added.
//
// Lines are written with one write(2) each, so lines from several threads or processes never
// interleave, and never through the program's stdio buffers.
#include <string_view>

#include <kairos/problem.hpp>

namespace kairos::runtime {

// Prints one line on stderr, "[kairos] " added unless present.
void report(std::string_view line) noexcept;
inline void report(const problem& failure) noexcept {
  if (failure) report(failure.text());
}

// kairos keeps a private, close-on-exec copy of stderr (above the program's descriptors):
// programs such as coreutils close fd 2 in their own atexit handlers, before kairos's summary.
// release_stderr() drops it (a child that is not followed); async-signal-safe.
void keep_stderr() noexcept;
void release_stderr() noexcept;

// KAIROS_VERBOSE, set once the settings are loaded (0 before).
int verbosity() noexcept;
void set_verbosity(int level) noexcept;

}  // namespace kairos::runtime
