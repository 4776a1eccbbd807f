#pragma once
// What the annotation producers (OpenMP, NVTX, Kokkos, ROCTx) share: their ranges become regions like the
// user API's (the same functions, so the same rows, call graph and report), each name remembered
// with the kind of the source that pushed it, for the database's region_kind table; and the one
// way to name code by its address ("main (solver.cpp:42)") for the regions OpenMP's runtimes
// hand over as addresses.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kairos::runtime {

enum class region_kind : std::uint8_t { openmp, nvtx, kokkos, roctx, count };
// The kind's name in the database (region_kind.kind, the regions view's kind column).
constexpr std::array<std::string_view, static_cast<std::size_t>(region_kind::count)> region_kind_names{
    "openmp", "nvtx", "kokkos", "roctx"};
constexpr std::string_view name_of(region_kind kind) noexcept {
  return region_kind_names[static_cast<std::size_t>(kind)];
}

// A region on the calling thread, as kairos_push_region and kairos_pop_region make one; the
// name's kind is remembered (by pointer first: a name pushed from the same string costs a compare).
// Returns the thread's copy of the name, which lives until the process ends: what a source
// that pops without a name (NVTX, Kokkos) keeps for the pop. Not under the re-entry guard: the
// user API records nothing inside kairos.
const char* push_annotated_region(const char* name, region_kind kind) noexcept;
void pop_annotated_region(const char* name) noexcept;
// The thread's copy of a name (interned as push_annotated_region does), without a region: for
// the ranges of annotation_ranges.hpp.
const char* intern_annotated_name(const char* name, region_kind kind) noexcept;

// Every name an annotation pushed, with its kind (at the end: the pipeline's region_kind rows).
void for_each_annotated_name(const std::function<void(std::string_view name, region_kind kind)>& visit);

// "function (file:line)", "function" without line information, "module+0x1a2b" without a symbol:
// the code at `address`, a function's entry or (a return address) a call site. Code without a
// symbol that `caller` (a return address) called is named by the caller's function, as
// "in caller (module+0x1a2b)": a stripped library's outlined OpenMP body by the function whose
// construct it is. Looked up once per address under a lock, so only where a new region is first
// seen (OpenMP's constructs).
std::string code_location(const void* address, bool function_entry, const void* caller = nullptr);

// fork: the list's lock is held across fork. In a child (async-signal-safe) the surviving thread
// starts a list of its own at its next name; the parent's stay out of the child's rows.
void annotated_regions_lock_for_fork();
void annotated_regions_unlock_after_fork() noexcept;
void annotated_regions_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
