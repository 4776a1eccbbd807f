#pragma once
// The user API's backend (a producer): a per-thread stack of open regions, each a stored bundle
// of the components KAIROS_COMPONENTS names, recorded into the thread's call graph (the core's
// storage, for the region report); each region's row is made by the traced calls
// (function_trace.hpp), beside the thread's instrumented functions. It knows no other stage;
// lifecycle switches it on and off.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "preload/regions/entry_points_access.hpp"
#include "preload/regions/region_rules.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {

struct thread_record;

// Chooses what regions measure; a problem when a name is not a component.
problem configure_regions(const std::vector<std::string>& component_names, bool keep_rows);
// Whether the user API records (lifecycle: on once init is done, off when finalize starts).
void set_regions_accepting(bool accepting) noexcept;
// Finalize: waits (bounded) until no thread is inside a user-API call.
void wait_for_user_api_calls(std::chrono::milliseconds limit) noexcept;

// Regions pushed by this process image with their bundles (0: nothing to report before an exec).
std::uint64_t regions_recorded() noexcept;

// In a followed fork child (async-signal-safe): what the parent collected is forgotten, at the
// child's first user-API call (freeing memory is not for a fork handler).
void regions_forget_after_fork_in_child() noexcept;
// fork: the list's lock is held across fork.
void regions_lock_for_fork();
void regions_unlock_after_fork() noexcept;

// The functions libkairos-user.so calls: with KAIROS_COMPONENTS=wall_clock (the default), the
// traced ones of function_trace.hpp; else stored bundles of the components named.
const kairos_entry_points& user_entry_points() noexcept;

}  // namespace kairos::runtime
