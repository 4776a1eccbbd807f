// The per-thread log that carries finished user-API regions to the profile database.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "preload/regions/region_log.hpp"

using kairos::runtime::region_log;
using kairos::runtime::region_row;

namespace {
const std::string name = "region";

region_row row(std::int64_t start) { return {&name, start, start + 1, 0}; }

std::vector<std::int64_t> drain_starts(region_log& log) {
  std::vector<std::int64_t> starts;
  log.drain([&](const region_row& finished) { starts.push_back(finished.start_ns); });
  return starts;
}
}  // namespace

TEST_CASE("rows come out in order, across chunk boundaries, each once") {
  region_log log;
  const auto total = static_cast<std::int64_t>(region_log::chunk_rows) * 3 + 7;
  for (std::int64_t i = 0; i < total / 2; ++i) log.append(row(i));
  auto first = drain_starts(log);
  for (std::int64_t i = total / 2; i < total; ++i) log.append(row(i));
  auto second = drain_starts(log);
  first.insert(first.end(), second.begin(), second.end());
  REQUIRE(first.size() == static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) CHECK(first[static_cast<std::size_t>(i)] == i);
  CHECK(drain_starts(log).empty());
  CHECK(log.dropped() == 0);
}

TEST_CASE("an undrained log stops growing at its bound and counts what it drops") {
  region_log log;
  const auto bound = static_cast<std::int64_t>(region_log::chunk_rows) * region_log::default_max_chunks;
  std::int64_t refused = 0;  // append_with says which rows it dropped
  for (std::int64_t i = 0; i < bound + 500; ++i)
    if (!log.append_with([&](kairos::runtime::region_row& slot) { slot = row(i); })) ++refused;
  CHECK(log.dropped() == 500);
  CHECK(refused == 500);
  const auto kept = drain_starts(log);
  CHECK(kept.size() == static_cast<std::size_t>(bound));
  CHECK(kept.back() == bound - 1);  // the oldest rows are kept, the newest dropped
  log.append(row(bound + 500));     // drained: room again
  CHECK(drain_starts(log) == std::vector<std::int64_t>{bound + 500});
}

TEST_CASE("a writer draining while the thread appends sees every row exactly once") {
  region_log log;
  // Three times what the log holds undrained: it only fits if the writer drains as rows arrive.
  const std::int64_t total = 3 * std::int64_t{region_log::chunk_rows} * region_log::default_max_chunks;
  std::vector<std::int64_t> seen;
  std::atomic<std::int64_t> drained{0};
  std::atomic<bool> done{false};
  std::thread writer{[&] {
    auto keep = [&](const region_row& finished) { seen.push_back(finished.start_ns); };
    while (!done.load()) {
      log.drain(keep);
      drained.store(static_cast<std::int64_t>(seen.size()));
    }
    log.drain(keep);
  }};
  const std::int64_t half_bound = std::int64_t{region_log::chunk_rows} * region_log::default_max_chunks / 2;
  for (std::int64_t i = 0; i < total; ++i) {
    // Never more than half the bound ahead of the writer: nothing may be dropped.
    while (i - drained.load() >= half_bound) std::this_thread::yield();
    log.append(row(i));
  }
  done.store(true);
  writer.join();
  CHECK(log.dropped() == 0);
  REQUIRE(seen.size() == static_cast<std::size_t>(total));
  for (std::size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == static_cast<std::int64_t>(i));
}

TEST_CASE("clear forgets every row (a forked child)") {
  region_log log;
  for (std::int64_t i = 0; i < 3000; ++i) log.append(row(i));
  log.clear();
  CHECK(drain_starts(log).empty());
  log.append(row(7));
  CHECK(drain_starts(log) == std::vector<std::int64_t>{7});
}
