// The one error shape: a problem is empty when the step worked, and says what failed otherwise.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include <kairos/problem.hpp>

TEST_CASE("a default problem is empty: the step worked") {
  const kairos::problem none;
  CHECK_FALSE(none);
  CHECK(none.text().empty());
}

TEST_CASE("a problem with a sentence is a failure and keeps its text as given") {
  const kairos::problem failure{"cannot open 'x.db': give a writable path"};
  CHECK(static_cast<bool>(failure));
  CHECK(failure.text() == "cannot open 'x.db': give a writable path");
}

TEST_CASE("a result holds either its value or the problem that kept it from being made") {
  const kairos::result<int> worked{3};
  REQUIRE(worked.has_value());
  CHECK(worked.value() == 3);
  CHECK_FALSE(worked.failure());

  const kairos::result<int> failed{kairos::problem{"PAPI: no such event"}};
  CHECK_FALSE(failed.has_value());
  CHECK(failed.failure().text() == "PAPI: no such event");
}

TEST_CASE("capture_problem turns an exception into '<what>: <text>', one prefix at most") {
  CHECK_FALSE(kairos::capture_problem("nothing", [] {}));
  CHECK(kairos::capture_problem("opening", [] { throw std::runtime_error{"[kairos] disk full"}; }).text() ==
        "opening: disk full");
  CHECK(kairos::capture_problem("opening", [] { throw 7; }).text() == "opening: an unknown error");
}
