#pragma once
// What the user API (regions.hpp) and the traced regions (function_trace.hpp) share, below both:
// whether kairos_start/kairos_stop left collection on, and the one count and report of pops that
// name no open region. Neither of the two includes the other's header.
#include <cstdint>
#include <string>
#include <string_view>

namespace kairos::runtime {

struct thread_record;

bool regions_collecting() noexcept;
void set_regions_collecting(bool collecting) noexcept;

// One "[kairos]" line for a pop that names no open region (`innermost`: the innermost open one,
// nullptr when none), the first few times; every one counted.
void report_mismatched_pop(const thread_record& thread, std::string_view given, const std::string* innermost);
std::uint64_t mismatched_pops() noexcept;
void forget_mismatched_pops() noexcept;  // a followed fork child (async-signal-safe)

}  // namespace kairos::runtime
