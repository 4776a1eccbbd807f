#pragma once
// Producer: OpenMP (docs/openmp.md). LLVM's libomp finds libkairos.so's exported ompt_start_tool
// when it starts and kairos becomes its OMPT tool (openmp_tool.cpp); GCC's libgomp, which has no
// tool interface, has its entry points wrapped by GOT patching (openmp_gomp.cpp). Both make
// regions of kind openmp (parallel regions, work-sharing constructs, waits, tasks, target
// regions) and the per-thread work and wait sums of openmp_teams.hpp. libkairos.so links
// neither runtime; a program that is not OpenMP costs one dlsym at start.
#include <optional>
#include <string>

namespace kairos::runtime {

// At init (`wanted`: KAIROS_OPENMP=auto): the OMPT tool accepts libomp's call from now on, and
// libgomp is wrapped if it is the runtime loaded; the note says what happened.
std::optional<std::string> start_openmp(bool wanted);
// The service thread's tick: a libgomp loaded since (dlopen) is wrapped.
void openmp_tick();
// The end of the run: nothing more is recorded.
void stop_openmp() noexcept;
// Whether a runtime reached kairos (for the metadata), and which.
bool openmp_observed() noexcept;
std::string openmp_runtime();

}  // namespace kairos::runtime
