#pragma once
// The events kairos::perf_counters knows by name: perf's own spellings (as `perf list` prints them),
// each with the perf_event_attr type/config that selects it and the unit it is shown in.
#include <linux/perf_event.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kairos::perf {

enum class event_kind : std::uint8_t { software, hardware, hardware_cache };

struct event_definition {
  std::string_view name;
  std::string_view alias;  // perf's short spelling ("cs" for context-switches), or empty
  event_kind kind;
  std::uint32_t type;    // perf_event_attr::type
  std::uint64_t config;  // perf_event_attr::config
  std::string_view unit;
  double scale;  // raw count → display unit (task-clock counts ns, shown in ms)
  std::string_view description;
};

namespace detail {
constexpr std::uint64_t cache_config(std::uint64_t cache, std::uint64_t operation, std::uint64_t result) {
  return cache | (operation << 8) | (result << 16);
}
constexpr event_definition software(std::string_view name, std::string_view alias, std::uint64_t config,
                                    std::string_view description) {
  return {name, alias, event_kind::software, PERF_TYPE_SOFTWARE, config, "count", 1.0, description};
}
constexpr event_definition hardware(std::string_view name, std::string_view alias, std::uint64_t config,
                                    std::string_view description) {
  return {name, alias, event_kind::hardware, PERF_TYPE_HARDWARE, config, "count", 1.0, description};
}
constexpr event_definition cache(std::string_view name, std::uint64_t config, std::string_view description) {
  return {name, "", event_kind::hardware_cache, PERF_TYPE_HW_CACHE, config, "count", 1.0, description};
}
}  // namespace detail

inline constexpr std::array event_catalog{
    // Software events: counted by the kernel itself, so they work in VMs without a PMU.
    event_definition{"task-clock", "", event_kind::software, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "ms", 1e-6,
                     "CPU time of the thread"},
    event_definition{"cpu-clock", "", event_kind::software, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "ms", 1e-6,
                     "CPU time, timer based"},
    detail::software("page-faults", "faults", PERF_COUNT_SW_PAGE_FAULTS, "page faults"),
    detail::software("minor-faults", "", PERF_COUNT_SW_PAGE_FAULTS_MIN, "page faults served without I/O"),
    detail::software("major-faults", "", PERF_COUNT_SW_PAGE_FAULTS_MAJ, "page faults that needed I/O"),
    detail::software("context-switches", "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, "times the thread was switched out"),
    detail::software("cpu-migrations", "migrations", PERF_COUNT_SW_CPU_MIGRATIONS,
                     "moves of the thread to another CPU"),
    detail::software("alignment-faults", "", PERF_COUNT_SW_ALIGNMENT_FAULTS,
                     "unaligned accesses fixed up by the kernel"),
    detail::software("emulation-faults", "", PERF_COUNT_SW_EMULATION_FAULTS, "instructions emulated by the kernel"),
    // Hardware events: need a PMU (absent in most VMs: the kernel answers ENOENT or EOPNOTSUPP).
    detail::hardware("cycles", "cpu-cycles", PERF_COUNT_HW_CPU_CYCLES, "CPU cycles"),
    detail::hardware("instructions", "", PERF_COUNT_HW_INSTRUCTIONS, "instructions retired"),
    detail::hardware("cache-references", "", PERF_COUNT_HW_CACHE_REFERENCES, "last-level cache accesses"),
    detail::hardware("cache-misses", "", PERF_COUNT_HW_CACHE_MISSES, "last-level cache misses"),
    detail::hardware("branch-instructions", "branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
                     "branch instructions retired"),
    detail::hardware("branch-misses", "", PERF_COUNT_HW_BRANCH_MISSES, "mispredicted branches"),
    detail::hardware("bus-cycles", "", PERF_COUNT_HW_BUS_CYCLES, "bus cycles"),
    detail::hardware("stalled-cycles-frontend", "", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
                     "cycles the front end issued nothing"),
    detail::hardware("stalled-cycles-backend", "", PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
                     "cycles the back end retired nothing"),
    detail::hardware("ref-cycles", "", PERF_COUNT_HW_REF_CPU_CYCLES, "reference cycles (not scaled by frequency)"),
    detail::cache(
        "L1-dcache-loads",
        detail::cache_config(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS),
        "level-1 data cache loads"),
    detail::cache(
        "L1-dcache-load-misses",
        detail::cache_config(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
        "level-1 data cache load misses"),
    detail::cache(
        "LLC-loads",
        detail::cache_config(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS),
        "last-level cache loads"),
    detail::cache(
        "LLC-load-misses",
        detail::cache_config(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
        "last-level cache load misses"),
    detail::cache(
        "dTLB-load-misses",
        detail::cache_config(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
        "data TLB load misses"),
    detail::cache(
        "iTLB-load-misses",
        detail::cache_config(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
        "instruction TLB load misses"),
};

// Index of `name` (or its alias) in event_catalog, or -1.
inline constexpr int find_event(std::string_view name) {
  for (std::size_t index = 0; index < event_catalog.size(); ++index)
    if (event_catalog[index].name == name ||
        (!event_catalog[index].alias.empty() && event_catalog[index].alias == name))
      return static_cast<int>(index);
  return -1;
}

// "task-clock, cpu-clock, ..." for error messages.
inline std::string valid_event_names() {
  std::string names;
  for (const auto& event : event_catalog) {
    if (!names.empty()) names += ", ";
    names += event.name;
  }
  return names;
}

}  // namespace kairos::perf
