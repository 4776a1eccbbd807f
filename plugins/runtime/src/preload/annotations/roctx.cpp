// ROCTx (AMD's roctracer markers, libroctx64.so): Debian ships no ROCm tracer to take ranges from,
// so the program's calls of the library's functions are wrapped through kairos::gotcha where it is
// loaded (at start, or at a tick for a library loaded later), as MPI's are. Each call goes on to
// ROCTx, so a ROCm tracer running beside kairos still sees it.
//   roctxRangePushA / roctxRangePop      regions of kind roctx (a stack per thread, as ROCTx keeps)
//   roctxRangeStartA / roctxRangeStop    annotation_range rows (they need not nest)
//   roctxMarkA                           a region around nothing
#include "preload/annotations/roctx.hpp"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <kairos/plugins/gotcha.hpp>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t library_recheck_ns = 500'000'000;
std::atomic<bool> wrapped{false};
std::atomic<std::int64_t> last_check_ns{0};

enum class roctx_call { push, pop, mark, start, stop };

// A thread's open pushed ranges (their interned names), innermost last.
thread_local std::vector<const char*>* pushed = nullptr;
std::vector<const char*>& pushed_on_this_thread() {
  if (pushed == nullptr) {
    reentry_guard guard;
    pushed = new std::vector<const char*>;
  }
  return *pushed;
}

// ROCTx's range ids are its own; kairos's ranges are kept by them (under a lock: such ranges are
// coarse), per process.
struct started_ranges {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::uint64_t> by_roctx_id;
};
started_ranges* started = new started_ranges;  // never destroyed

template <roctx_call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data&, R (*original)(Args...), Args... arguments) {
    if (!roctx_recording() || inside_kairos) return original(arguments...);
    if constexpr (C == roctx_call::push) {
      const R level = original(arguments...);
      if (const char* kept = push_annotated_region(arguments..., region_kind::roctx)) {
        reentry_guard guard;
        pushed_on_this_thread().push_back(kept);
      }
      return level;
    } else if constexpr (C == roctx_call::pop) {
      auto& names = pushed_on_this_thread();
      if (!names.empty()) {
        pop_annotated_region(names.back());
        names.pop_back();
      }
      return original(arguments...);
    } else if constexpr (C == roctx_call::mark) {
      if (const char* kept = push_annotated_region(arguments..., region_kind::roctx)) pop_annotated_region(kept);
      return original(arguments...);
    } else if constexpr (C == roctx_call::start) {
      const auto range = begin_annotation_range(arguments..., region_kind::roctx);
      const R id = original(arguments...);
      reentry_guard guard;
      std::lock_guard lock{started->mutex};
      started->by_roctx_id[static_cast<std::uint64_t>(id)] = range;
      return id;
    } else {
      std::uint64_t range = 0;
      const auto id = [](auto given) { return static_cast<std::uint64_t>(given); }(arguments...);
      {
        reentry_guard guard;
        std::lock_guard lock{started->mutex};
        const auto found = started->by_roctx_id.find(id);
        if (found != started->by_roctx_id.end()) {
          range = found->second;
          started->by_roctx_id.erase(found);
        }
      }
      end_annotation_range(range);
      return original(arguments...);
    }
  }
};

template <roctx_call C>
using wrapper = kairos::gotcha<1, interceptor<C>, std::integral_constant<roctx_call, C>>;

template <roctx_call C, class Function>
constexpr wrapped_symbol entry(const char* symbol) {
  return wrapped_symbol::of<wrapper<C>, Function>(symbol);
}

using roctx_range_id = std::uint64_t;
const std::array wrapped_functions{
    entry<roctx_call::push, int(const char*)>("roctxRangePushA"),
    entry<roctx_call::pop, int()>("roctxRangePop"),
    entry<roctx_call::mark, void(const char*)>("roctxMarkA"),
    entry<roctx_call::start, roctx_range_id(const char*)>("roctxRangeStartA"),
    entry<roctx_call::stop, void(roctx_range_id)>("roctxRangeStop"),
};

}  // namespace

std::optional<std::string> wrap_roctx_if_loaded() {
  reentry_guard guard;
  last_check_ns.store(steady_now_ns(), std::memory_order_relaxed);
  if (wrapped.load(std::memory_order_acquire) || dlsym(RTLD_DEFAULT, "roctxRangePushA") == nullptr) return std::nullopt;
  const auto unwrapped = wrap_each(wrapped_functions, absent_symbols::passed_over);
  wrapped.store(true, std::memory_order_release);
  set_roctx_attached();
  if (!unwrapped.empty()) return "ROCTx: could not wrap " + unwrapped + "; those calls are not recorded";
  return std::string{"ROCTx: observing libroctx64"};
}

void roctx_tick() {
  if (!roctx_recording() || wrapped.load(std::memory_order_acquire)) return;
  if (steady_now_ns() - last_check_ns.load(std::memory_order_relaxed) < library_recheck_ns) return;
  if (auto note = wrap_roctx_if_loaded(); note && verbosity() > 0) report(*note);
}

}  // namespace kairos::runtime
