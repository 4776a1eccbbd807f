#pragma once
// The user API's backend: a per-thread stack of open regions, each a stored bundle of the
// components KAIROS_COMPONENTS names, recorded into the thread's call graph.
#include <cstdint>
#include <string>
#include <vector>

#include "preload/entry_points_access.hpp"
#include "preload/region_log.hpp"

namespace kairos::runtime {

// Chooses what regions measure; false (with the reason) when a name is unknown here.
bool configure_regions(const std::vector<std::string>& component_names, std::string& problem);

// Regions pushed by this process image (0: nothing to report before an exec).
std::uint64_t regions_recorded() noexcept;
// Regions whose database rows were dropped because the writer fell behind (they are still in
// the call-graph report).
std::uint64_t regions_not_traced() noexcept;
// Pops reported as mismatched (for the report and the tests).
std::uint64_t mismatched_pops() noexcept;

struct thread_record;
// The thread's finished regions awaiting the profile database (nullptr: it never pushed one).
region_log* finished_regions(thread_record& record) noexcept;

// After fork in a followed child: forget what the parent collected.
void reset_regions_after_fork();

// The functions libkairos-user.so calls.
const kairos_entry_points& user_entry_points() noexcept;

}  // namespace kairos::runtime
