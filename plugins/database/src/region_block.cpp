#include <kairos/plugins/database/region_block.hpp>

#include <algorithm>
#include <cstring>

namespace kairos::database {
namespace {

constexpr char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

int digit_count(std::uint64_t magnitude) {
  int count = 0;
  for (; magnitude != 0; magnitude /= 10) ++count;
  return count;
}

std::uint64_t magnitude_of(std::int64_t value) {
  return value < 0 ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
}

// `value` in exactly `width` places ending at `end`, zeros in front, '-' in the first place of a
// negative value. Four digits a step from the right, each step's two pairs independent of each
// other: a 7-digit value is two dependent divisions, not seven.
void put(char* end, std::int64_t value, int width) {
  std::uint64_t magnitude = magnitude_of(value);
  if (value < 0) {
    *(end - width) = '-';
    --width;
  }
  for (; width >= 4; width -= 4) {
    const auto rest = magnitude / 10000;
    const auto four = static_cast<std::uint32_t>(magnitude - rest * 10000);
    end -= 4;
    std::memcpy(end, digit_pairs + 2 * (four / 100), 2);
    std::memcpy(end + 2, digit_pairs + 2 * (four % 100), 2);
    magnitude = rest;
  }
  const auto last = static_cast<std::uint32_t>(magnitude);  // under 1,000 now
  if (width >= 2) {
    end -= 2;
    std::memcpy(end, digit_pairs + 2 * (last % 100), 2);
    if (width == 3) *--end = static_cast<char>('0' + last / 100);
  } else if (width == 1) {
    *--end = static_cast<char>('0' + last);
  }
}

// A row's stored fields: its start from the block's, its length, then its own.
std::array<std::int64_t, region_stored_fields> stored_fields(const region_fields& row, std::int64_t block_start_ns) {
  return {
      static_cast<std::int64_t>(static_cast<std::uint64_t>(row.start_ns) - static_cast<std::uint64_t>(block_start_ns)),
      static_cast<std::int64_t>(static_cast<std::uint64_t>(row.end_ns) - static_cast<std::uint64_t>(row.start_ns)),
      row.name,
      row.depth,
      row.window,
      row.clipped,
      row.frame};
}

// One pass for the block's span and each field's width. Starts and lengths, the widest fields,
// take their largest value's digits; the others the digits of the OR of their values, as many or
// one more (a loop of ORs, where maxima and minima cost this loop twice as much). A field with a
// negative value (the sign bit set, never in what kairos writes) is measured exactly, in a pass of
// its own. Sets out's span and digits; returns a row's digits.
std::size_t measure(std::span<const region_fields> rows, encoded_region_block& out) {
  std::int64_t start_ns = rows.front().start_ns, last_start_ns = start_ns, end_ns = rows.front().end_ns;
  std::uint64_t lengths = 0, longest = 0, names = 0, depths = 0, windows = 0, clipped = 0, frames = 0;
  for (const auto& row : rows) {
    start_ns = std::min(start_ns, row.start_ns);
    last_start_ns = std::max(last_start_ns, row.start_ns);
    end_ns = std::max(end_ns, row.end_ns);
    const auto length = static_cast<std::uint64_t>(row.end_ns) - static_cast<std::uint64_t>(row.start_ns);
    lengths |= length;
    longest = std::max(longest, length);
    names |= static_cast<std::uint64_t>(row.name);
    depths |= static_cast<std::uint64_t>(row.depth);
    windows |= static_cast<std::uint64_t>(row.window);
    clipped |= static_cast<std::uint64_t>(row.clipped);
    frames |= static_cast<std::uint64_t>(row.frame);
  }
  out.start_ns = start_ns;
  out.end_ns = end_ns;
  const std::uint64_t spans[region_stored_fields]{
      static_cast<std::uint64_t>(last_start_ns) - static_cast<std::uint64_t>(start_ns),
      static_cast<std::int64_t>(lengths) < 0 ? lengths : longest,
      names,
      depths,
      windows,
      clipped,
      frames};
  std::size_t stride = 0;
  for (std::size_t i = 0; i < region_stored_fields; ++i) {
    if (static_cast<std::int64_t>(spans[i]) >= 0) {
      out.digits[i] = digit_count(spans[i]);
    } else {
      std::int64_t largest = 0, smallest = 0;
      for (const auto& row : rows) {
        largest = std::max(largest, stored_fields(row, out.start_ns)[i]);
        smallest = std::min(smallest, stored_fields(row, out.start_ns)[i]);
      }
      out.digits[i] = std::max(digit_count(static_cast<std::uint64_t>(largest)),
                               smallest < 0 ? digit_count(magnitude_of(smallest)) + 1 : 0);
    }
    stride += static_cast<std::size_t>(out.digits[i]);
  }
  return stride;
}

}  // namespace

void encode_region_block(std::span<const region_fields> rows, encoded_region_block& out) {
  out.count = static_cast<std::int64_t>(rows.size());
  out.rows.clear();
  if (rows.empty()) {
    out.digits = {};
    return;
  }
  const std::size_t stride = measure(rows, out);
  // The fields that take places (most blocks have no window, clipped nor frame).
  struct placed_field {
    std::size_t field;
    int width;
  };
  std::array<placed_field, region_stored_fields> placed{};
  std::size_t placed_count = 0;
  for (std::size_t i = 0; i < region_stored_fields; ++i)
    if (out.digits[i] > 0) placed[placed_count++] = {i, out.digits[i]};
  out.rows.resize((stride + 3) * rows.size() + 1);
  char* at = out.rows.data();
  *at++ = '[';
  for (const auto& row : rows) {
    const auto fields = stored_fields(row, out.start_ns);
    *at++ = '"';
    for (std::size_t i = 0; i < placed_count; ++i) {
      at += placed[i].width;
      put(at, fields[placed[i].field], placed[i].width);
    }
    *at++ = '"';
    *at++ = ',';
  }
  at[-1] = ']';
}

stored_region_block stored_block(const statement& query) {
  stored_region_block block{query.integer(0), query.integer(1), query.integer(2), query.integer(3), {}, query.text(11)};
  // A width outside 0..20 fails the layout check; clamped, it cannot overflow an int.
  for (std::size_t i = 0; i < region_stored_fields; ++i)
    block.digits[i] = static_cast<int>(std::clamp<std::int64_t>(query.integer(static_cast<int>(4 + i)), -1, 21));
  return block;
}

database_error stored_region_block::corrupt() const {
  return database_error{"region_block " + std::to_string(id) +
                        " does not hold rows as kairos writes them (a JSON array of `count` strings of "
                        "fixed-width digits, the widths in its *_digits columns)"};
}

std::string region_block_insert_sql(std::string_view table) {
  return "INSERT INTO " + std::string{table} +
         " (thread, start_ns, end_ns, count, start_digits, length_digits, name_digits, depth_digits, "
         "window_digits, clipped_digits, frame_digits, rows) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
}

void insert_region_block(statement& insert, std::int64_t thread, const encoded_region_block& block) {
  insert.bind(1, thread).bind(2, block.start_ns).bind(3, block.end_ns).bind(4, block.count);
  for (std::size_t i = 0; i < region_stored_fields; ++i)
    insert.bind(static_cast<int>(5 + i), std::int64_t{block.digits[i]});
  insert.bind(12, std::string_view{block.rows}).run();
}

bool region_block_layout_fits(std::int64_t count, const std::array<int, region_stored_fields>& digits,
                              std::size_t bytes) {
  if (count < 0 || count > region_block_rows) return false;
  std::size_t stride = 0;
  for (const auto width : digits) {
    if (width < 0 || width > 20) return false;
    stride += static_cast<std::size_t>(width);
  }
  return count > 0 && (stride + 3) * static_cast<std::size_t>(count) + 1 == bytes;
}

}  // namespace kairos::database
