#pragma once
// Names are bytes from users (region labels, function names, thread names): kairos stores them
// exactly and shows them escaped, the same way in every output (text, JSON, traces, stderr):
//   - printable ASCII and well-formed UTF-8 are kept as they are;
//   - control characters, DEL and every byte that is not part of well-formed UTF-8 become \xNN;
//   - a backslash becomes \\, so an escape is never ambiguous;
//   - at most `max_bytes` of the name are shown, then "...(+N bytes)".
// A newline in a name can then never break a row, invalid UTF-8 can never make a JSON writer
// throw, and a 1 MiB name costs a report a kilobyte.
#include <cstddef>
#include <string>
#include <string_view>

namespace kairos {

inline constexpr std::size_t printable_name_bytes = 1024;  // long C++ template names fit

namespace detail {
// The length of the well-formed UTF-8 sequence starting at text[i] (2 to 4), or 0.
inline std::size_t utf8_sequence(std::string_view text, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const auto lead = byte(i);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // no overlong forms
    if (lead == 0xed) high = 0x9f;  // no surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;  // nothing above U+10FFFF
  }
  if (length == 0 || i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return length;
}
}  // namespace detail

inline std::string printable(std::string_view name, std::size_t max_bytes = printable_name_bytes) {
  constexpr char hex[] = "0123456789abcdef";
  std::string shown;
  std::size_t i = 0;
  for (; i < name.size() && i < max_bytes;) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\') shown += '\\';
      shown += static_cast<char>(c);
      ++i;
    } else if (const auto length = c >= 0x80 ? detail::utf8_sequence(name, i) : 0; length > 0) {
      shown.append(name.substr(i, length));
      i += length;
    } else {
      shown += "\\x";
      shown += hex[c >> 4];
      shown += hex[c & 15];
      ++i;
    }
  }
  if (i < name.size()) shown += "...(+" + std::to_string(name.size() - i) + " bytes)";
  return shown;
}

}  // namespace kairos
