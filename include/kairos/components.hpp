#pragma once
// Every built-in component (no dependency beyond the C++ and POSIX libraries).
#include <kairos/components/context_switches.hpp>
#include <kairos/components/cpu_clock.hpp>
#include <kairos/components/page_faults.hpp>
#include <kairos/components/page_rss.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/system_clock.hpp>
#include <kairos/components/thread_cpu_clock.hpp>
#include <kairos/components/user_clock.hpp>
#include <kairos/components/wall_clock.hpp>

#include <tuple>

namespace kairos {

// The built-in components, in display order: the one list kairos-avail, the runtime's regions
// and the KAIROS_COMPONENTS setting's accepted names are built from.
using builtin_components = std::tuple<wall_clock, cpu_clock, thread_cpu_clock, user_clock, system_clock, peak_rss,
                                      page_rss, page_faults, context_switches>;

}  // namespace kairos
