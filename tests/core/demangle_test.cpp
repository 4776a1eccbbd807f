#include <doctest/doctest.h>

#include <kairos/demangle.hpp>

TEST_CASE("demangle gives C++ names as people read them") {
  CHECK(kairos::demangle("_ZN6solver4stepEi") == "solver::step(int)");
  CHECK(kairos::demangle("_ZNSt6vectorIiSaIiEE9push_backEOi") ==
        "std::vector<int, std::allocator<int> >::push_back(int&&)");
}

TEST_CASE("demangle drops a symbol version and keeps other names as given") {
  CHECK(kairos::demangle("hypot@@GLIBC_2.35") == "hypot");
  CHECK(kairos::demangle("__hypot_finite@GLIBC_2.15") == "__hypot_finite");
  CHECK(kairos::demangle("_ZN6solver4stepEi@V1") == "solver::step(int)");
  CHECK(kairos::demangle("main") == "main");
  CHECK(kairos::demangle("_Z") == "_Z");  // not a whole mangled name
  CHECK(kairos::demangle(static_cast<const char*>(nullptr)).empty());
  CHECK(kairos::demangle("").empty());
}
