// The components as built without libpapi-dev: unavailable, with a reason that says what to install.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <kairos/plugins/papi/papi_stub.hpp>

TEST_CASE("without libpapi-dev papi_vector and papi_array say so and count nothing") {
  static_assert(!kairos::papi_vector::available_at_build);
  static_assert(!kairos::papi_array<2>::available_at_build);
  CHECK_FALSE(kairos::papi_vector::available());
  CHECK(kairos::papi_vector::unavailable_reason().find("libpapi-dev") != std::string::npos);
  kairos::papi_vector counters{"PAPI_TOT_INS"};
  counters.start();
  counters.stop();
  CHECK(counters.get().empty());
  kairos::papi_array<2> fixed{"PAPI_TOT_INS", "PAPI_TOT_CYC"};
  CHECK(std::isnan(fixed.get()[0]));
}
