// A stand-in for ROCm's libroctx64.so (Debian ships no ROCm tracer): ROCTx's marker functions with
// its signatures, keeping ROCTx's nesting levels and range ids, so that a program calling them
// (roctx_program.cpp) runs with and without kairos (tests/annotations_tests.py).
#include <cstdint>

namespace {
thread_local int level = 0;
std::uint64_t last_id = 0;
}  // namespace

extern "C" {
int roctxRangePushA(const char*) { return level++; }
int roctxRangePop() { return level > 0 ? --level : -1; }
void roctxMarkA(const char*) {}
std::uint64_t roctxRangeStartA(const char*) { return ++last_id; }
void roctxRangeStop(std::uint64_t) {}
}
