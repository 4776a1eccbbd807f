// The table shape both GPU backends read their calls from (src/work_table.hpp): the reading of a
// memcpy kind, the id-to-row index and its checks. Each backend's own table is checked where it is
// built (static_asserts in cuda_backend.cpp and hip_backend.cpp).
#include <doctest/doctest.h>

#include <array>
#include <cstdint>

#include "work_table.hpp"

namespace {

using kairos::gpu::copy_kind;
using namespace kairos::gpu::detail;

enum class runtime_memcpy : int { host_to_host, host_to_device, device_to_host, device_to_device, automatic };

using test_row = work_row<std::uint32_t, const void*>;

copied eight_bytes_to_device(const void*) { return {copy_kind::host_to_device, 8}; }

constexpr test_row rows[] = {
    {7, work_kind::kernel},
    {2, work_kind::copy, &eight_bytes_to_device},
};

}  // namespace

TEST_CASE("a memcpy kind is read by its direction's number, an inferred one as unknown") {
  CHECK(copy_kind_of(runtime_memcpy::host_to_host) == copy_kind::host_to_host);
  CHECK(copy_kind_of(runtime_memcpy::host_to_device) == copy_kind::host_to_device);
  CHECK(copy_kind_of(runtime_memcpy::device_to_host) == copy_kind::device_to_host);
  CHECK(copy_kind_of(runtime_memcpy::device_to_device) == copy_kind::device_to_device);
  CHECK(copy_kind_of(runtime_memcpy::automatic) == copy_kind::unknown);
  CHECK(copy_kind_of(static_cast<runtime_memcpy>(42)) == copy_kind::unknown);
  static_assert(numbered_as_memcpy_direction<runtime_memcpy>(
      {runtime_memcpy::host_to_host, runtime_memcpy::host_to_device, runtime_memcpy::device_to_host,
       runtime_memcpy::device_to_device, runtime_memcpy::automatic}));
  static_assert(!numbered_as_memcpy_direction<runtime_memcpy>(
      {runtime_memcpy::host_to_device, runtime_memcpy::host_to_host, runtime_memcpy::device_to_host,
       runtime_memcpy::device_to_device, runtime_memcpy::automatic}));
}

TEST_CASE("a call's row is found by its id, and a call not listed, or beyond the ids, issues no work") {
  constexpr auto index = row_index<16>(rows);
  const test_row* kernel = find_row(rows, index, 7);
  REQUIRE(kernel != nullptr);
  CHECK(kernel->kind == work_kind::kernel);
  const test_row* copy = find_row(rows, index, 2);
  REQUIRE(copy != nullptr);
  CHECK(copy->kind == work_kind::copy);
  const copied read = copy->copy(nullptr);
  CHECK(read.kind == copy_kind::host_to_device);
  CHECK(read.bytes == 8);
  CHECK(find_row(rows, index, 3) == nullptr);
  CHECK(find_row(rows, index, 16) == nullptr);
  CHECK(find_row(rows, index, 1u << 30) == nullptr);
}

TEST_CASE("a table with an id twice, or an id beyond its domain, is refused") {
  static_assert(ids_distinct_and_below<16>(rows));
  static_assert(!ids_distinct_and_below<7>(rows));  // id 7 is beyond ids 0..6
  constexpr test_row twice[] = {{3, work_kind::kernel}, {3, work_kind::copy, &eight_bytes_to_device}};
  static_assert(!ids_distinct_and_below<16>(twice));
  CHECK(ids_distinct_and_below<16>(rows));
}
