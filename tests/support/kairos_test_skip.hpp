#pragma once
// A test whose subject cannot run on this machine (no PMU, perf_event_open refused, ...) says so
// and returns: `if (!available) return kairos_test::skip(reason);`. The line it prints is ctest's
// SKIP_REGULAR_EXPRESSION (cmake/kairos_testing.cmake), so the test shows as skipped, not passed.
#include <cstdio>
#include <string>

namespace kairos_test {

inline void skip(const std::string& reason) {
  std::printf("KAIROS-TEST-SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
}

}  // namespace kairos_test
