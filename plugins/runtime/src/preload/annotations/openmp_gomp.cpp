// libgomp's entry points (GCC's ABI, libgomp/libgomp_g.h), wrapped through kairos::gotcha.
//
// A parallel construct compiles to one call, GOMP_parallel (or a combined loop's or sections'
// variant), with the region's body outlined into a function and its data: the calling thread and
// each thread of the team run fn(data), and the call returns once all have passed the closing
// barrier. kairos passes its own member function and a team record instead, so each thread's part
// is timed where it runs; the calling (primary) thread's wait for the others is a region of its
// own. The other members' waits at the closing barrier happen inside libgomp, after their part:
// they are the region's end less their arrival (openmp_teams.hpp).
#include "preload/annotations/openmp_gomp.hpp"

#include <dlfcn.h>

#include <array>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <kairos/plugins/gotcha.hpp>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

using outlined = void (*)(void*);

// What kairos calls of libgomp itself, found with dlsym.
int (*thread_number)() = nullptr;
int (*max_threads)() = nullptr;

// A thread's parts of the teams it is in, innermost last (nested regions beyond the depth are
// not summed, their regions still recorded).
constexpr int member_depth = 16;
[[gnu::tls_model("initial-exec")]] thread_local constinit std::array<openmp_member*, member_depth> members{};
[[gnu::tls_model("initial-exec")]] thread_local constinit int depth = 0;
openmp_member* current_member() noexcept { return depth > 0 && depth <= member_depth ? members[depth - 1] : nullptr; }

struct team_call {
  outlined body;
  void* data;
  openmp_team* team;
};

constexpr const char* closing_barrier = "omp barrier (implicit)";

// What libgomp runs on each thread of the team, the primary included.
void run_member(void* argument) {
  const auto& call = *static_cast<team_call*>(argument);
  const auto index = thread_number ? thread_number() : 0;
  auto* member = call.team->member(static_cast<std::uint32_t>(index));
  const char* name = name_of(*call.team->region);
  if (member) member->start_ns.store(steady_now_ns(), std::memory_order_release);
  ++depth;
  if (depth <= member_depth) members[depth - 1] = member;
  push_annotated_region(name, region_kind::openmp);
  call_through(call.body, call.data);  // the body's time is the program's (call_through.hpp)
  pop_annotated_region(name);
  if (member) member->arrival_ns.store(steady_now_ns(), std::memory_order_release);
  --depth;
  // The primary waits for the others inside the call it made: closed when that call returns.
  if (index == 0) push_annotated_region(closing_barrier, region_kind::openmp);
}

// The waits: a barrier (explicit, or a work-sharing construct's closing one) and the others.
enum class gomp_wait { barrier, loop_end, sections_end, taskwait, critical, critical_name };
constexpr const char* wait_name(gomp_wait wait) {
  switch (wait) {
    case gomp_wait::barrier:
      return "omp barrier";
    case gomp_wait::loop_end:
    case gomp_wait::sections_end:
      return "omp barrier (implicit)";
    case gomp_wait::taskwait:
      return "omp taskwait";
    default:
      return "omp critical (wait)";
  }
}
enum class gomp_parallel { parallel, loop, sections, reductions };

template <class Call, Call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data& call_data, R (*original)(Args...), Args... arguments) {
    if (!openmp_recording() || inside_kairos) return original(arguments...);
    if constexpr (std::is_same_v<Call, gomp_wait>) {
      const auto start = steady_now_ns();
      push_annotated_region(wait_name(C), region_kind::openmp);
      struct finish {
        std::int64_t start;
        ~finish() {
          pop_annotated_region(wait_name(C));
          if (auto* member = current_member())
            member->wait_ns.fetch_add(steady_now_ns() - start, std::memory_order_relaxed);
        }
      } on_return{start};
      return original(arguments...);
    } else {
      auto all = std::tuple<Args...>{arguments...};
      const auto body = std::get<0>(all);
      const auto requested = std::get<2>(all);
      auto* region = find_openmp_region(reinterpret_cast<const void*>(body), true, call_data.caller);
      const auto capacity = requested != 0 ? requested : max_threads ? static_cast<unsigned>(max_threads()) : 1u;
      team_call call{body, std::get<1>(all), begin_openmp_team(region, capacity)};
      std::get<0>(all) = &run_member;
      std::get<1>(all) = &call;
      struct finish {
        openmp_team* team;
        ~finish() {
          pop_annotated_region(closing_barrier);
          end_openmp_team(team, steady_now_ns());
        }
      } on_return{call.team};
      return std::apply(original, all);
    }
  }
};

template <class Call, Call C>
using wrapper = kairos::gotcha<1, interceptor<Call, C>, std::integral_constant<Call, C>>;

template <auto C, class Function>
constexpr wrapped_symbol entry(const char* symbol) {
  return wrapped_symbol::of<wrapper<decltype(C), C>, Function>(symbol);
}

using parallel_type = void(outlined, void*, unsigned, unsigned);
using loop_type = void(outlined, void*, unsigned, long, long, long, long, unsigned);
using loop_runtime_type = void(outlined, void*, unsigned, long, long, long, unsigned);
using sections_type = void(outlined, void*, unsigned, unsigned, unsigned);
using reductions_type = unsigned(outlined, void*, unsigned, unsigned);

// The combined parallel loops share one interceptor; a tag per symbol gives each its own wrapper.
template <int N>
struct loop_tag {};
template <int N, class Function>
constexpr wrapped_symbol loop_entry(const char* symbol) {
  return wrapped_symbol::of<kairos::gotcha<1, interceptor<gomp_parallel, gomp_parallel::loop>, loop_tag<N>>, Function>(
      symbol);
}

const std::array wrapped_functions{
    entry<gomp_parallel::parallel, parallel_type>("GOMP_parallel"),
    entry<gomp_parallel::sections, sections_type>("GOMP_parallel_sections"),
    entry<gomp_parallel::reductions, reductions_type>("GOMP_parallel_reductions"),
    loop_entry<0, loop_type>("GOMP_parallel_loop_static"),
    loop_entry<1, loop_type>("GOMP_parallel_loop_dynamic"),
    loop_entry<2, loop_type>("GOMP_parallel_loop_guided"),
    loop_entry<3, loop_type>("GOMP_parallel_loop_nonmonotonic_dynamic"),
    loop_entry<4, loop_type>("GOMP_parallel_loop_nonmonotonic_guided"),
    loop_entry<5, loop_runtime_type>("GOMP_parallel_loop_runtime"),
    loop_entry<6, loop_runtime_type>("GOMP_parallel_loop_nonmonotonic_runtime"),
    loop_entry<7, loop_runtime_type>("GOMP_parallel_loop_maybe_nonmonotonic_runtime"),
    entry<gomp_wait::barrier, void()>("GOMP_barrier"),
    entry<gomp_wait::loop_end, void()>("GOMP_loop_end"),
    entry<gomp_wait::sections_end, void()>("GOMP_sections_end"),
    entry<gomp_wait::taskwait, void()>("GOMP_taskwait"),
    entry<gomp_wait::critical, void()>("GOMP_critical_start"),
    entry<gomp_wait::critical_name, void(void**)>("GOMP_critical_name_start"),
};

}  // namespace

std::optional<std::string> wrap_libgomp_if_loaded() {
  reentry_guard guard;
  // libomp exports GOMP_ entry points too; its programs are OMPT's.
  if (dlsym(RTLD_DEFAULT, "GOMP_parallel") == nullptr || dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != nullptr)
    return std::nullopt;
  thread_number = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
  max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  const auto unwrapped = wrap_each(wrapped_functions, absent_symbols::passed_over);  // an older libgomp lacks some
  set_openmp_runtime("libgomp");
  if (!unwrapped.empty()) return "OpenMP: could not wrap " + unwrapped + "; those constructs are not recorded";
  return std::string{"OpenMP: observing libgomp"};
}

}  // namespace kairos::runtime
