#pragma once
// Progress points (docs/causal.md): named counters the program bumps where it completes a unit of
// work (throughput) or where a unit enters and leaves (latency). The causal experiments read
// their counts; nothing else writes them.
//
// A counter has the layout of coz's (a count and a spare word), so a program annotated with coz.h
// works unchanged: its macros ask `_coz_get_counter` (exported by libkairos.so) once per call
// site and then bump the count themselves, one relaxed atomic add.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kairos::runtime {

struct progress_counter {
  std::atomic<std::size_t> count{0};
  std::size_t backoff = 0;  // coz's layout; unused
};
static_assert(sizeof(progress_counter) == 2 * sizeof(std::size_t), "coz_counter_t's layout");

enum class progress_kind : std::uint8_t { throughput, latency };

// The counter of `name` (created at its first use); for a latency point, `end` picks the
// departures' counter. nullptr only when 1,024 points exist already (counted, said at the end).
progress_counter* progress_counter_for(progress_kind kind, bool end, const char* name) noexcept;

// The user API's calls: the counter is found by the name's address (a string's contents only the
// first time a given address is seen), then one relaxed add.
void progress_visit(const char* name) noexcept;
void progress_begin(const char* name) noexcept;
void progress_end(const char* name) noexcept;

struct progress_reading {
  std::string name;
  progress_kind kind = progress_kind::throughput;
  std::int64_t visits = 0;  // throughput: visits; latency: begins
  std::int64_t ends = 0;    // latency: ends
};
// Every point's counts now, in creation order.
std::vector<progress_reading> read_progress_points();
std::uint64_t progress_points_refused() noexcept;

}  // namespace kairos::runtime
