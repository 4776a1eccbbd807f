#pragma once
// A thread's regions as the table region_block stores them (docs/database.md). A block holds up to
// region_block_rows rows, a JSON array of one string a row: ["00120450101", ...]. A row is seven
// fields of fixed-width decimal digits, the same width for a field across the block, chosen by its
// widest value (a width of 0 holds 0, a '-' leads a negative value). So SQLite's own functions read
// a block with one json_each and a field with one substr and one CAST (the view `region`, any
// client), and a block of short, dense regions costs a few digits a field: the writer's work a
// region is a few stores, the database's a dozen bytes.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

inline constexpr std::int64_t region_block_rows = 4096;

// One region; `frame` 0 for a user-API region.
struct region_fields {
  std::int64_t start_ns = 0, end_ns = 0, name = 0, depth = 0, window = 0, clipped = 0, frame = 0;
  friend bool operator==(const region_fields&, const region_fields&) = default;
};

// The fields as stored, in this order: the start less the block's start_ns, end_ns - start_ns,
// name, depth, window, clipped, frame. Their widths are the block's columns start_digits ... frame_digits.
inline constexpr std::size_t region_stored_fields = 7;

struct encoded_region_block {
  std::int64_t start_ns = 0, end_ns = 0;  // the earliest start (every stored start counts from it), the latest end
  std::int64_t count = 0;
  std::array<int, region_stored_fields> digits{};
  std::string rows;  // the JSON array
};

// `rows`: 1 to region_block_rows regions. `out`'s string keeps its capacity between blocks.
void encode_region_block(std::span<const region_fields> rows, encoded_region_block& out);

// Whether `count` rows of these widths take exactly `bytes` (and count and widths are in range).
bool region_block_layout_fits(std::int64_t count, const std::array<int, region_stored_fields>& digits,
                              std::size_t bytes);

// Calls visit(const region_fields&) for each row. False when the block is not as
// encode_region_block writes it (a wrong length, a width over 20, a character out of place); the
// rows before the fault have been visited.
template <class Visit>
bool decode_region_block(std::int64_t block_start_ns, std::int64_t count,
                         const std::array<int, region_stored_fields>& digits, std::string_view rows, Visit&& visit) {
  if (!region_block_layout_fits(count, digits, rows.size()) || rows.front() != '[' || rows.back() != ']') return false;
  const char* at = rows.data() + 1;
  for (std::int64_t row = 0; row < count; ++row) {
    if (*at++ != '"') return false;
    std::uint64_t field[region_stored_fields];
    for (std::size_t i = 0; i < region_stored_fields; ++i) {
      const char* end = at + digits[i];
      const bool negative = at < end && *at == '-';
      // At most 19 digits that count: a 20th place holds a sign or a leading zero (no overflow).
      if (end - at - negative > 19 && *at != '0') return false;
      std::uint64_t magnitude = 0;
      for (const char* digit = at + negative; digit < end; ++digit) {
        const auto value = static_cast<unsigned>(*digit - '0');
        if (value > 9) return false;
        magnitude = magnitude * 10 + value;
      }
      field[i] = negative ? 0 - magnitude : magnitude;
      at = end;
    }
    if (*at++ != '"' || *at++ != (row + 1 < count ? ',' : ']')) return false;
    // Unsigned sums: a corrupt value wraps instead of overflowing.
    const auto start_ns = static_cast<std::uint64_t>(block_start_ns) + field[0];
    visit(region_fields{static_cast<std::int64_t>(start_ns), static_cast<std::int64_t>(start_ns + field[1]),
                        static_cast<std::int64_t>(field[2]), static_cast<std::int64_t>(field[3]),
                        static_cast<std::int64_t>(field[4]), static_cast<std::int64_t>(field[5]),
                        static_cast<std::int64_t>(field[6])});
  }
  return true;
}

// A block as a reader selects it: `SELECT <region_block_columns> FROM region_block`, then
// stored_block(query) for each row (its `rows` views the query's current row).
inline constexpr std::string_view region_block_columns =
    "id, thread, start_ns, count, start_digits, length_digits, name_digits, depth_digits, window_digits, "
    "clipped_digits, frame_digits, rows";
struct stored_region_block {
  std::int64_t id = 0, thread = 0, start_ns = 0, count = 0;
  std::array<int, region_stored_fields> digits{};
  std::string_view rows;

  // Visits every row; throws database_error naming the block when it is not as kairos writes it.
  template <class Visit>
  void decode(Visit&& visit) const {
    if (!decode_region_block(start_ns, count, digits, rows, std::forward<Visit>(visit))) throw corrupt();
  }

 private:
  database_error corrupt() const;
};
stored_region_block stored_block(const statement& query);

// The INSERT of an encoded block into `table` (region_block, or main.region_block beside an
// attached input), and its run.
std::string region_block_insert_sql(std::string_view table);
void insert_region_block(statement& insert, std::int64_t thread, const encoded_region_block& block);

}  // namespace kairos::database
