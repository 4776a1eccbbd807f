#include "preload/annotations/openmp.hpp"

#include <atomic>

#include "preload/annotations/openmp_gomp.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t library_recheck_ns = 500'000'000;

struct openmp_state {
  std::atomic<bool> gomp_wrapped{false};
  std::atomic<std::int64_t> last_check_ns{0};
};
openmp_state* state = new openmp_state;  // never destroyed: runtimes call until the process ends

std::optional<std::string> wrap_gomp() {
  state->last_check_ns.store(steady_now_ns(), std::memory_order_relaxed);
  auto note = wrap_libgomp_if_loaded();
  if (note) state->gomp_wrapped.store(true, std::memory_order_release);
  return note;
}

}  // namespace

std::optional<std::string> start_openmp(bool wanted) {
  if (!wanted) return std::nullopt;
  set_openmp_recording(true);
  return wrap_gomp();
}

void openmp_tick() {
  if (!openmp_recording() || state->gomp_wrapped.load(std::memory_order_acquire) || openmp_runtime_name() != nullptr)
    return;
  if (steady_now_ns() - state->last_check_ns.load(std::memory_order_relaxed) < library_recheck_ns) return;
  if (auto note = wrap_gomp(); note && verbosity() > 0) report(*note);
}

void stop_openmp() noexcept { set_openmp_recording(false); }

bool openmp_observed() noexcept { return openmp_runtime_name() != nullptr; }
std::string openmp_runtime() {
  const char* runtime = openmp_runtime_name();
  return runtime != nullptr ? runtime : "";
}

}  // namespace kairos::runtime
