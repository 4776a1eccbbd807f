#include "preload/regions/region_rules.hpp"

#include <atomic>

#include <fmt/format.h>

#include <kairos/printable.hpp>

#include "preload/support/problems.hpp"
#include "preload/threads/thread_registry.hpp"

namespace kairos::runtime {
namespace {

constexpr int mismatches_shown = 5;
constexpr std::size_t shown_name_bytes = 120;  // of a name in a stderr line

std::atomic<bool> collecting{true};
std::atomic<std::uint64_t> mismatches{0};

}  // namespace

bool regions_collecting() noexcept { return collecting.load(std::memory_order_relaxed); }
void set_regions_collecting(bool on) noexcept { collecting.store(on, std::memory_order_relaxed); }

std::uint64_t mismatched_pops() noexcept { return mismatches.load(std::memory_order_relaxed); }
void forget_mismatched_pops() noexcept { mismatches.store(0); }

void report_mismatched_pop(const thread_record& thread, std::string_view given, const std::string* innermost) {
  const auto count = mismatches.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count <= mismatches_shown) {
    report(innermost == nullptr
               ? fmt::format("kairos_pop_region(\"{}\") on thread {} (tid {}) but no region is open there; "
                             "the pop is ignored",
                             printable(given, shown_name_bytes), thread.sequent_id, thread.tid)
               : fmt::format("kairos_pop_region(\"{}\") on thread {} (tid {}) but the innermost open region "
                             "is \"{}\"; the pop is ignored",
                             printable(given, shown_name_bytes), thread.sequent_id, thread.tid,
                             printable(*innermost, shown_name_bytes)));
  }
  if (count == mismatches_shown) report("further mismatched kairos_pop_region calls are counted, not shown");
}

}  // namespace kairos::runtime
