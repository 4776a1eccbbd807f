// PAPI on this machine, for real. Where PAPI's CPU component is disabled (no PMU it knows), presets
// report unavailable with PAPI's reason; where it is enabled they count. Software-defined events
// (PAPI's sde component, fed by counters this test registers) count everywhere, so the event-set
// handling is exercised for real either way.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/plugins/papi.hpp>

#include "kairos_test_skip.hpp"

#if KAIROS_TEST_WITH_SDE
#include <sde_lib.h>
#endif

namespace {

long long work_items = 0;  // read by PAPI through the sde component
long long other_items = 0;
constexpr const char* work_items_event = "sde:::kairos_tests::work_items";
constexpr const char* other_items_event = "sde:::kairos_tests::other_items";

// Registered before anything initializes PAPI, as libraries using SDE do at load time.
[[maybe_unused]] const bool sde_counters_registered = [] {
#if KAIROS_TEST_WITH_SDE
  papi_handle_t handle = papi_sde_init("kairos_tests");
  papi_sde_register_counter(handle, "work_items", PAPI_SDE_RO | PAPI_SDE_DELTA, PAPI_SDE_long_long, &work_items);
  papi_sde_register_counter(handle, "other_items", PAPI_SDE_RO | PAPI_SDE_DELTA, PAPI_SDE_long_long, &other_items);
  return true;
#else
  return false;
#endif
}();

void some_work() {
  volatile std::uint64_t sink = 0;
  for (std::uint64_t i = 0; i < 5'000'000; ++i) sink = sink + i;
}

}  // namespace

TEST_CASE("PAPI initializes once, whichever threads ask first") {
  const kairos::problem* seen_by_thread = nullptr;
  std::thread other{[&] { seen_by_thread = &kairos::papi::library_problem(); }};
  const auto& seen_here = kairos::papi::library_problem();
  other.join();
  CHECK(&seen_here == seen_by_thread);
  CHECK_FALSE(seen_here);
  CHECK(seen_here.text().empty());
}

TEST_CASE("where PAPI's CPU counters are off, available() is false with PAPI's reason") {
  if (kairos::papi_vector::available()) {
    CHECK(kairos::papi_vector::unavailable_reason().empty());
    return kairos_test::skip("PAPI's perf_event component is enabled here");
  }
  const std::string reason = kairos::papi_vector::unavailable_reason();
  CHECK(reason.find("PAPI: component perf_event disabled: ") == 0);
  CHECK(reason.size() > std::string{"PAPI: component perf_event disabled: "}.size());
}

TEST_CASE("where PAPI has CPU counters, a preset counts a known loop") {
  if (!kairos::papi_vector::available("PAPI_TOT_INS"))
    return kairos_test::skip(kairos::papi_vector::unavailable_reason("PAPI_TOT_INS"));
  kairos::papi_vector counters{"PAPI_TOT_INS"};
  counters.start();
  some_work();  // 5 million iterations of at least 4 instructions
  counters.stop();
  REQUIRE(counters.value_of("PAPI_TOT_INS").has_value());
  CHECK(*counters.value_of("PAPI_TOT_INS") > 2e7);
  CHECK(*counters.value_of("PAPI_TOT_INS") < 2e8);
}

TEST_CASE("where PAPI has no CPU counters, a preset is unavailable with PAPI's error") {
  if (kairos::papi_vector::available("PAPI_TOT_INS")) return kairos_test::skip("PAPI counts PAPI_TOT_INS here");
  kairos::papi_vector counters{"PAPI_TOT_INS"};
  counters.start();
  some_work();
  counters.stop();
  REQUIRE(counters.events().size() == 1);
  {
    const auto status = counters.events()[0];
    CHECK_FALSE(status.counting);
    CHECK(status.unavailable_reason.find("PAPI: PAPI_TOT_INS: ") == 0);
    CHECK(status.unavailable_reason.find("PAPI_add_event: PAPI_") != std::string::npos);
    CHECK(status.unavailable_reason == kairos::papi_vector::unavailable_reason("PAPI_TOT_INS"));
    CHECK_FALSE(counters.value_of("PAPI_TOT_INS").has_value());
    CHECK(counters.get().empty());
  }
}

TEST_CASE("unknown preset names are rejected with the list of valid presets") {
  try {
    kairos::papi_vector counters{"PAPI_TOT_INZ"};
    FAIL("no exception for PAPI_TOT_INZ");
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    CHECK(message.find("papi: unknown preset 'PAPI_TOT_INZ'; valid presets: ") == 0);
    CHECK(message.find("PAPI_TOT_INS") != std::string::npos);
    CHECK(message.find("PAPI_L1_DCM") != std::string::npos);
  }
  CHECK_FALSE(kairos::papi_vector::available("PAPI_TOT_INZ"));
  CHECK(kairos::papi_vector::unavailable_reason("PAPI_TOT_INZ").find("valid presets") != std::string::npos);
}

TEST_CASE("a native name PAPI cannot resolve is unavailable with the disabled components' reasons") {
  kairos::papi_vector counters{"no_such_component::NO_SUCH_EVENT"};
  REQUIRE(counters.events().size() == 1);
  const std::string reason = counters.events()[0].unavailable_reason;
  CHECK_FALSE(counters.events()[0].counting);
  CHECK(reason.find("no enabled component knows it (PAPI_event_name_to_code: PAPI_") != std::string::npos);
}

#if KAIROS_TEST_WITH_SDE
TEST_CASE("software-defined events count exactly between start and stop") {
  kairos::papi_vector counters{work_items_event};
  work_items += 5;  // before start: not counted
  counters.start();
  work_items += 1000;
  counters.stop();
  work_items += 7;  // after stop: not counted
  counters.start();
  work_items += 24;
  counters.stop();
  CHECK(counters.value_of(work_items_event) == 1024.0);
  CHECK(counters.value_labels() == std::vector<std::string_view>{work_items_event});
}

TEST_CASE("an event that cannot count does not stop the others of the same counters") {
  kairos::papi_vector counters{"PAPI_TOT_INS", work_items_event, "PAPI_TOT_CYC"};
  counters.start();
  work_items += 300;
  some_work();
  counters.stop();
  CHECK(counters.value_of(work_items_event) == 300.0);
  for (const auto& status : counters.events()) CHECK(status.counting == status.unavailable_reason.empty());
  CHECK(counters.get().size() == counters.value_labels().size());
}

TEST_CASE("papi_array keeps fixed positions: NaN where an event cannot count") {
  kairos::papi_array<2> counters{"PAPI_TOT_INS", work_items_event};
  counters.start();
  work_items += 42;
  counters.stop();
  const std::array<double, 2> values = counters.get();
  CHECK(values[1] == 42.0);
  if (kairos::papi_vector::available("PAPI_TOT_INS"))
    CHECK(values[0] > 0.0);
  else
    CHECK(std::isnan(values[0]));
  CHECK(counters.value_labels()[0] == "PAPI_TOT_INS");
  CHECK(counters.value_labels()[1] == work_items_event);
}

TEST_CASE("adding events to a thread's running event set keeps the totals of phases in flight") {
  kairos::papi_vector first{work_items_event};
  first.start();
  work_items += 10;
  kairos::papi_vector second{other_items_event};  // added to the same set: PAPI restarts it
  second.start();
  work_items += 20;
  other_items += 3;
  second.stop();
  first.stop();
  CHECK(first.value_of(work_items_event) == 30.0);
  CHECK(second.value_of(other_items_event) == 3.0);
}

TEST_CASE("each thread counts on its own event set") {
  double counted_by_thread = -1.0;
  std::thread worker{[&] {
    kairos::papi_vector counters{work_items_event};
    counters.start();
    work_items += 11;
    counters.stop();
    counted_by_thread = counters.value_of(work_items_event).value_or(-1.0);
  }};
  worker.join();
  CHECK(counted_by_thread == 11.0);
}
#else
TEST_CASE("software-defined events count exactly between start and stop") {
  return kairos_test::skip("PAPI's SDE library (libsde) was not found at configure time");
}
#endif

TEST_CASE("a bundle with papi_vector and a wall clock keeps working when PAPI cannot count") {
  kairos::component_tuple<kairos::wall_clock, kairos::papi_vector> bundle{"work"};
  bundle.start();
  some_work();
  bundle.stop();
  CHECK(bundle.component<kairos::wall_clock>().get() > 0.0);
  const auto& counters = bundle.component<kairos::papi_vector>();
  CHECK(counters.get().size() == counters.value_labels().size());
  if (!kairos::papi_vector::available()) CHECK(counters.get().empty());
}
