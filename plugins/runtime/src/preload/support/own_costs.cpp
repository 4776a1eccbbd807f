#include "preload/support/own_costs.hpp"

#include <time.h>

#include <array>
#include <atomic>

#include <fmt/format.h>

#include "preload/support/clock.hpp"

namespace kairos::runtime {
namespace {

struct part_total {
  std::atomic<std::int64_t> wall_ns{0}, cpu_ns{0};
};
std::array<part_total, static_cast<int>(own_cost::count)> totals;
std::atomic<bool> measuring{true};

constexpr std::array<const char*, static_cast<int>(own_cost::count)> names{
    "start-up", "sample delivery", "database creation", "symbols",         "unwind tables",
    "stopping", "database end",    "outputs",           "process sampling"};

std::int64_t thread_cpu_now_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return to_ns(now);
}

}  // namespace

void measure_own_costs(bool wanted) noexcept { measuring.store(wanted, std::memory_order_relaxed); }

void add_own_cost(own_cost part, std::int64_t wall_ns, std::int64_t cpu_ns) noexcept {
  auto& total = totals[static_cast<int>(part)];
  total.wall_ns.fetch_add(wall_ns, std::memory_order_relaxed);
  total.cpu_ns.fetch_add(cpu_ns, std::memory_order_relaxed);
}

std::string own_costs_text() {
  std::string text;
  for (int i = 0; i < static_cast<int>(own_cost::count); ++i) {
    const auto wall = totals[i].wall_ns.load(std::memory_order_relaxed);
    const auto cpu = totals[i].cpu_ns.load(std::memory_order_relaxed);
    if (wall == 0 && cpu == 0) continue;
    text += fmt::format("{}{} {:.2f}/{:.2f} ms", text.empty() ? "" : ", ", names[i], wall / 1e6, cpu / 1e6);
  }
  return text;
}

own_cost_timer::own_cost_timer(own_cost part) noexcept
    : part_{part}, measuring_{measuring.load(std::memory_order_relaxed)} {
  if (!measuring_) return;
  wall_start_ns_ = steady_now_ns();
  cpu_start_ns_ = thread_cpu_now_ns();
}

own_cost_timer::~own_cost_timer() {
  if (measuring_) add_own_cost(part_, steady_now_ns() - wall_start_ns_, thread_cpu_now_ns() - cpu_start_ns_);
}

}  // namespace kairos::runtime
