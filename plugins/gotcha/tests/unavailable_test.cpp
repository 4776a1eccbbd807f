// A build without ELF dynamic-linking support: the same header compiles to a stub that says why.
#include <doctest/doctest.h>

#include <kairos/component_tuple.hpp>
#include <kairos/plugins/gotcha.hpp>

#if KAIROS_GOTCHA_AVAILABLE
#error "this test is compiled as the stub build (KAIROS_GOTCHA_AVAILABLE=0)"
#endif

namespace {
struct nothing {};
int add(int a, int b) { return a + b; }
}  // namespace

TEST_CASE("without ELF support gotcha is unavailable, says why, and wraps nothing") {
  using stub = kairos::gotcha<1, kairos::component_tuple<nothing>>;
  static_assert(!stub::available_at_build);
  CHECK_FALSE(stub::available());
  CHECK(stub::unavailable_reason().find("x86-64 Linux") != std::string::npos);
  const auto status = stub::wrap<0>("add", &add);
  CHECK_FALSE(status.ok());
  CHECK_FALSE(status.installed);
  CHECK(status.failure.text().find("gotcha: cannot wrap 'add'") == 0);
  CHECK_FALSE(stub::unwrap<0>());
  CHECK(add(1, 2) == 3);
}
