// kairos as a Kokkos Tools library. Kokkos loads the library KOKKOS_TOOLS_LIBS (or the older
// KOKKOS_PROFILE_LIBRARY) names and looks up its kokkosp_ functions (the profiling interface of
// kokkos-tools, Kokkos_Profiling_C_Interface.h); kairos exports them:
//   parallel_for/reduce/scan, fences, deep copies  regions of kind kokkos, on the calling thread
//   push/pop profile regions                       likewise
//   profile sections (create/start/stop)           annotation_range rows: they need not nest
//   profile events                                 regions of no length
// A kernel's end gives only the id its begin returned: each thread keeps the names it opened.
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

// What a thread opened, innermost last: a kernel or fence by the id kairos gave it, a profile
// region or deep copy with id 0.
struct open_entry {
  std::uint64_t id;
  const char* name;
};
thread_local std::vector<open_entry>* opened = nullptr;
thread_local std::uint64_t next_kernel_id = 0;

std::vector<open_entry>& opened_on_this_thread() {
  if (opened == nullptr) {
    reentry_guard guard;
    opened = new std::vector<open_entry>;
    opened->reserve(16);
  }
  return *opened;
}

void begin(const char* name, std::uint64_t* id) {
  if (id != nullptr) *id = 0;
  if (!kokkos_recording() || inside_kairos) return;
  const char* kept = push_annotated_region(name, region_kind::kokkos);
  if (kept == nullptr) return;
  // Ids are unique per thread: a kernel ends on the thread that began it.
  const auto given = ++next_kernel_id;
  auto& entries = opened_on_this_thread();
  {
    reentry_guard guard;
    entries.push_back({given, kept});
  }
  if (id != nullptr) *id = given;
}

// Ends the innermost open entry if it is `id`'s (0: a region or copy).
void end(std::uint64_t id) {
  if (inside_kairos || opened == nullptr || opened->empty() || opened->back().id != id) return;
  pop_annotated_region(opened->back().name);
  opened->pop_back();
}

// Profile sections, by the id kairos gave at creation.
struct sections_state {
  std::mutex mutex;
  std::deque<std::string> names;
  std::vector<std::uint64_t> running;  // each section's open range (0: stopped)
};
sections_state* sections = new sections_state;  // never destroyed

}  // namespace

// Kokkos's SpaceHandle, passed by value to the deep-copy hooks.
struct space_handle {
  char name[64];
};

}  // namespace kairos::runtime

using kairos::runtime::space_handle;

// The interface's entry points (extern "C", as Kokkos looks them up by name).
extern "C" {
[[gnu::visibility("default")]] void kokkosp_init_library(int, std::uint64_t, std::uint32_t, void*) {
  if (kairos::runtime::kokkos_recording()) kairos::runtime::set_kokkos_attached();
}
[[gnu::visibility("default")]] void kokkosp_finalize_library() {}

[[gnu::visibility("default")]] void kokkosp_begin_parallel_for(const char* name, std::uint32_t, std::uint64_t* id) {
  kairos::runtime::begin(name, id);
}
[[gnu::visibility("default")]] void kokkosp_end_parallel_for(std::uint64_t id) { kairos::runtime::end(id); }
[[gnu::visibility("default")]] void kokkosp_begin_parallel_reduce(const char* name, std::uint32_t, std::uint64_t* id) {
  kairos::runtime::begin(name, id);
}
[[gnu::visibility("default")]] void kokkosp_end_parallel_reduce(std::uint64_t id) { kairos::runtime::end(id); }
[[gnu::visibility("default")]] void kokkosp_begin_parallel_scan(const char* name, std::uint32_t, std::uint64_t* id) {
  kairos::runtime::begin(name, id);
}
[[gnu::visibility("default")]] void kokkosp_end_parallel_scan(std::uint64_t id) { kairos::runtime::end(id); }
[[gnu::visibility("default")]] void kokkosp_begin_fence(const char* name, std::uint32_t, std::uint64_t* id) {
  kairos::runtime::begin(name, id);
}
[[gnu::visibility("default")]] void kokkosp_end_fence(std::uint64_t id) { kairos::runtime::end(id); }

[[gnu::visibility("default")]] void kokkosp_push_profile_region(const char* name) {
  std::uint64_t id = 0;
  kairos::runtime::begin(name, &id);
  // A region is closed by a pop that names nothing: it is found by id 0 below.
  if (id != 0) kairos::runtime::opened->back().id = 0;
}
[[gnu::visibility("default")]] void kokkosp_pop_profile_region() { kairos::runtime::end(0); }

[[gnu::visibility("default")]] void kokkosp_begin_deep_copy(space_handle, const char*, const void*, space_handle,
                                                            const char*, const void*, std::uint64_t) {
  kokkosp_push_profile_region("Kokkos::deep_copy");
}
[[gnu::visibility("default")]] void kokkosp_end_deep_copy() { kairos::runtime::end(0); }

[[gnu::visibility("default")]] void kokkosp_profile_event(const char* name) {
  using namespace kairos::runtime;
  if (!kokkos_recording() || inside_kairos) return;
  if (const char* kept = push_annotated_region(name, region_kind::kokkos)) pop_annotated_region(kept);
}

[[gnu::visibility("default")]] void kokkosp_create_profile_section(const char* name, std::uint32_t* id) {
  using namespace kairos::runtime;
  reentry_guard guard;
  std::lock_guard lock{sections->mutex};
  *id = static_cast<std::uint32_t>(sections->names.size());
  sections->names.emplace_back(name != nullptr ? name : "(null)");
  sections->running.push_back(0);
}
[[gnu::visibility("default")]] void kokkosp_start_profile_section(std::uint32_t id) {
  using namespace kairos::runtime;
  if (!kokkos_recording() || inside_kairos) return;
  const char* name = nullptr;
  {
    reentry_guard guard;
    std::lock_guard lock{sections->mutex};
    if (id >= sections->names.size() || sections->running[id] != 0) return;
    name = sections->names[id].c_str();
  }
  const auto range = begin_annotation_range(name, region_kind::kokkos);
  reentry_guard guard;
  std::lock_guard lock{sections->mutex};
  sections->running[id] = range;
}
[[gnu::visibility("default")]] void kokkosp_stop_profile_section(std::uint32_t id) {
  using namespace kairos::runtime;
  std::uint64_t range = 0;
  {
    reentry_guard guard;
    std::lock_guard lock{sections->mutex};
    if (id >= sections->running.size()) return;
    range = sections->running[id];
    sections->running[id] = 0;
  }
  end_annotation_range(range);
}
[[gnu::visibility("default")]] void kokkosp_destroy_profile_section(std::uint32_t) {}
}
