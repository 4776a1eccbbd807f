#pragma once
// The calls that issue GPU work, one table per backend (cuda_backend.cpp, hip_backend.cpp): a row
// per call, {its id, what it issues, how a copy's kind and bytes are read from its parameters}.
// Both backends share the row's shape, the id-to-row index and the reading of a memcpy kind.
// Internal to the plugin.
#include <array>
#include <cstddef>
#include <cstdint>

#include <kairos/plugins/gpu/activity.hpp>

namespace kairos::gpu::detail {

enum class work_kind : std::uint8_t { call, kernel, copy };

// A copy's direction and size, as its call's parameters give them.
struct copied {
  copy_kind kind = copy_kind::unknown;
  std::uint64_t bytes = 0;
};

// `Id`: the call (CUPTI's callback id, hip_call); `Parameters`: how the backend hands over the
// call's arguments (CUPTI's functionParams; HIP: the arguments' addresses, in order).
template <class Id, class Parameters>
struct work_row {
  Id id{};
  work_kind kind = work_kind::call;
  copied (*copy)(Parameters) = nullptr;  // a copy's; nullptr for a kernel launch
};

// cudaMemcpyKind and hipMemcpyKind number the directions alike; each backend asserts it.
enum class memcpy_direction : int { host_to_host, host_to_device, device_to_host, device_to_device, inferred };

// Whether a runtime's memcpy kinds, given in memcpy_direction's order, are numbered as it is.
template <class MemcpyKind>
constexpr bool numbered_as_memcpy_direction(std::array<MemcpyKind, 5> kinds) {
  for (std::size_t direction = 0; direction < kinds.size(); ++direction)
    if (static_cast<std::size_t>(kinds[direction]) != direction) return false;
  return true;
}

template <class MemcpyKind>
constexpr copy_kind copy_kind_of(MemcpyKind kind) {
  switch (static_cast<memcpy_direction>(kind)) {
    case memcpy_direction::host_to_device:
      return copy_kind::host_to_device;
    case memcpy_direction::device_to_host:
      return copy_kind::device_to_host;
    case memcpy_direction::device_to_device:
      return copy_kind::device_to_device;
    case memcpy_direction::host_to_host:
      return copy_kind::host_to_host;
    default:
      return copy_kind::unknown;  // inferred from the pointers: known from the activity record only
  }
}

// The row of each id below `Ids` (-1: none), so that finding a call's row is one load on every
// API call.
template <std::size_t Ids, class Row, std::size_t Rows>
constexpr std::array<std::int16_t, Ids> row_index(const Row (&rows)[Rows]) {
  std::array<std::int16_t, Ids> index{};
  index.fill(-1);
  for (std::size_t row = 0; row < Rows; ++row)
    index[static_cast<std::size_t>(rows[row].id)] = static_cast<std::int16_t>(row);
  return index;
}

// Whether every row's id is below `Ids` and in one row only (a call listed twice would take the
// later row's reading silently).
template <std::size_t Ids, class Row, std::size_t Rows>
constexpr bool ids_distinct_and_below(const Row (&rows)[Rows]) {
  std::array<bool, Ids> seen{};
  for (const auto& row : rows) {
    const auto id = static_cast<std::size_t>(row.id);
    if (id >= Ids || seen[id]) return false;
    seen[id] = true;
  }
  return true;
}

// The row of `id`, or nullptr when the call issues no work.
template <class Row, std::size_t Rows, std::size_t Ids>
constexpr const Row* find_row(const Row (&rows)[Rows], const std::array<std::int16_t, Ids>& index, std::size_t id) {
  if (id >= Ids || index[id] < 0) return nullptr;
  return &rows[static_cast<std::size_t>(index[id])];
}

}  // namespace kairos::gpu::detail
