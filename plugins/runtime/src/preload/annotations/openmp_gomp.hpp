#pragma once
// GCC's libgomp, which has no tool interface: its entry points are wrapped by GOT patching
// (kairos::gotcha). The parallel constructs' outlined function is swapped for kairos's, which runs
// it as each member of the team and so sees each thread's part; barriers, taskwait and critical
// sections are timed as waits. A program linked with LLVM's libomp (which exports GOMP_ entry
// points too, for GCC's objects) is left to OMPT.
#include <optional>
#include <string>

namespace kairos::runtime {

// Wraps libgomp if it is the OpenMP runtime loaded; the note says so (nullopt: none loaded).
std::optional<std::string> wrap_libgomp_if_loaded();

}  // namespace kairos::runtime
