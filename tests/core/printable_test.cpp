#include <doctest/doctest.h>

#include <string>

#include <kairos/printable.hpp>

TEST_CASE("printable keeps ASCII and well-formed UTF-8 as they are") {
  CHECK(kairos::printable("solve") == "solve");
  CHECK(kairos::printable("caf\xc3\xa9 \xe2\x88\x91 \xf0\x9f\x94\xa5") == "caf\xc3\xa9 \xe2\x88\x91 \xf0\x9f\x94\xa5");
}

TEST_CASE("printable escapes control characters, invalid UTF-8 and the backslash byte by byte") {
  CHECK(kairos::printable("a\nb\tc") == "a\\x0ab\\x09c");
  CHECK(kairos::printable("\xff\xfe x") == "\\xff\\xfe x");
  CHECK(kairos::printable("\xc3") == "\\xc3");                    // cut short
  CHECK(kairos::printable("\xc0\xaf") == "\\xc0\\xaf");           // overlong
  CHECK(kairos::printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(kairos::printable("a\\x0a") == "a\\\\x0a");               // never mistaken for an escape
  CHECK(kairos::printable(std::string("a\0b", 3)) == "a\\x00b");
}

TEST_CASE("printable caps a name and says how much was left out") {
  const std::string huge(1 << 20, 'n');
  const auto shown = kairos::printable(huge);
  CHECK(shown.size() < kairos::printable_name_bytes + 32);
  CHECK(shown.ends_with("...(+" + std::to_string((1 << 20) - kairos::printable_name_bytes) + " bytes)"));
  CHECK(kairos::printable("abcdef", 3) == "abc...(+3 bytes)");
}
