// The Python frame reader's facts and arithmetic (sampling/python_frames.cpp): its layouts against
// CPython's own headers, and the location table's lines.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "kairos_test_skip.hpp"
#include "preload/sampling/python_frames.hpp"

#if KAIROS_PYTHON_HEADER_LAYOUT
#include "python_header_layout.h"
#endif

namespace kairos::runtime {
namespace {

TEST_CASE("layouts match the interpreter's headers") {
#if KAIROS_PYTHON_HEADER_LAYOUT
  header_layout header{};
  python_header_layout(&header);
  const auto* layout = python_layout_for(header.minor);
  REQUIRE_MESSAGE(layout, "kairos reads CPython 3.", header.minor);
  CHECK(layout->tstate_thread_id == header.tstate_thread_id);
  CHECK(layout->tstate_cframe == header.tstate_cframe);
  CHECK(layout->cframe_current_frame == header.cframe_current_frame);
  CHECK(layout->tstate_current_frame == header.tstate_current_frame);
  CHECK(layout->tstate_datastack_chunk == header.tstate_datastack_chunk);
  CHECK(layout->frame_code == header.frame_code);
  CHECK(layout->frame_previous == header.frame_previous);
  CHECK(layout->frame_instruction == header.frame_instruction);
  CHECK(layout->frame_owner == header.frame_owner);
  CHECK(layout->frame_is_entry == header.frame_is_entry);
  CHECK(layout->owner_cstack == header.owner_cstack);
  CHECK(layout->code_filename == header.code_filename);
  CHECK(layout->code_name == header.code_name);
  CHECK(layout->code_qualname == header.code_qualname);
  CHECK(layout->code_linetable == header.code_linetable);
  CHECK(layout->code_firstlineno == header.code_firstlineno);
  CHECK(layout->code_instructions == header.code_instructions);
  CHECK(layout->ascii_header == header.ascii_header);
  CHECK(layout->compact_header == header.compact_header);
  CHECK(header.stack_chunk_data == 24);  // python_frames.cpp's stack_chunk_data
#else
  kairos_test::skip("CPython's internal headers were not found at configure time (python3-dev)");
#endif
}

std::string entry(unsigned form, unsigned units) {
  return std::string(1, static_cast<char>(0x80 | (form << 3) | (units - 1)));
}

TEST_CASE("a location table gives each code unit its line") {
  // Each form of Objects/locations.md once, from first line 10.
  std::string table;
  table += entry(13, 2) + '\x02';                             // no columns, line +1: units 0-1 -> 11
  table += entry(3, 3) + '\x05';                              // short form, same line: units 2-4 -> 11
  table += entry(12, 1) + std::string("\x04\x09");            // one-line form, line +2: unit 5 -> 13
  table += entry(14, 2) + '\x05' + '\x00' + '\x01' + '\x01';  // long form, line -2: units 6-7 -> 11
  table += entry(15, 1);                                      // no location: unit 8 -> none
  table += entry(13, 1) + std::string("\x48\x01");            // line +(0x48&63 | 1<<6)/2 = +36: unit 9 -> 47
  CHECK(python_line_of(table, 10, 0) == 11);
  CHECK(python_line_of(table, 10, 1) == 11);
  CHECK(python_line_of(table, 10, 4) == 11);
  CHECK(python_line_of(table, 10, 5) == 13);
  CHECK(python_line_of(table, 10, 7) == 11);
  CHECK(python_line_of(table, 10, 8) == 0);
  CHECK(python_line_of(table, 10, 9) == 47);
  CHECK(python_line_of(table, 10, 10) == 0);               // past the table
  CHECK(python_line_of(std::string{"\x01"}, 10, 0) == 0);  // not an entry's first byte
}

TEST_CASE("splicing leaves a stack without Python frames as it is") {
  python_frame_capture capture{};
  const std::uint64_t native[] = {0x1000, 0x2000, 0x3000};
  std::uint64_t out[8] = {};
  REQUIRE(splice_python_frames(capture, native, 3, false, out, 8) == 3);
  CHECK(out[0] == 0x1000);
  CHECK(out[2] == 0x3000);
}

}  // namespace
}  // namespace kairos::runtime
