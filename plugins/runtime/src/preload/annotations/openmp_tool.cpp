// kairos as LLVM libomp's OMPT tool. libomp calls ompt_start_tool (exported by libkairos.so) as
// it starts; kairos answers with its initializer, which registers the callbacks below. The types
// and numbers are OMPT's (OpenMP 5.x, omp-tools.h), declared here so that libkairos.so needs no
// OpenMP header or library to build.
//
// What libomp reports, and how it becomes regions (all on the thread the callback runs on):
//   implicit task begin      push "omp parallel <where>" (a member of the team joins)
//   closing barrier reached  a member other than the primary pops it: libomp reports the end of
//                            that wait, and of the implicit task, only when the thread is next
//                            given work (the next parallel region's fork), so its region ends at
//                            its arrival and the rest of the region's span is its wait (the sums
//                            in openmp_teams.hpp); the primary's wait is a region of its own
//   barriers, taskwait, lock waits, work-sharing constructs, explicit tasks, target regions
//                            push at begin, pop at end
// A suspended task's region is closed with what was open above it, and opened again, with
// those, where it resumes.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/openmp_teams.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

// --- OMPT's types (omp-tools.h) ------------------------------------------------------------------
union ompt_data {
  std::uint64_t value;
  void* ptr;
};
using ompt_callback = void (*)();
using ompt_interface_function = void (*)();
using ompt_lookup = ompt_interface_function (*)(const char* name);
using ompt_set_callback = int (*)(int event, ompt_callback callback);
using ompt_initialize = int (*)(ompt_lookup lookup, int initial_device_number, ompt_data* tool_data);
using ompt_finalize = void (*)(ompt_data* tool_data);
struct ompt_start_tool_result {
  ompt_initialize initialize;
  ompt_finalize finalize;
  ompt_data tool_data;
};
using ompt_start_tool_function = ompt_start_tool_result* (*)(unsigned int omp_version, const char* runtime_version);

// Callback events (ompt_callbacks_t).
enum ompt_event : int {
  event_parallel_begin = 3,
  event_parallel_end = 4,
  event_task_create = 5,
  event_task_schedule = 6,
  event_implicit_task = 7,
  event_target = 8,
  event_sync_region_wait = 16,
  event_mutex_released = 17,
  event_work = 20,
  event_mutex_acquire = 26,
  event_mutex_acquired = 27,
};
constexpr int set_never = 1;  // ompt_set_result_t: 0 error, 1 never, ... 5 always
constexpr int scope_begin = 1, scope_end = 2;
// ompt_task_flag_t
constexpr int task_initial = 0x1, task_explicit = 0x4;
// ompt_task_status_t: the prior task ended (its region closes for good) or was suspended.
constexpr int task_complete = 1, task_cancel = 3, task_detach = 4, task_late_fulfill = 6;
// ompt_sync_region_t
constexpr int sync_barrier_implicit = 2, sync_barrier_implicit_parallel = 9;
// ompt_mutex_t: the kinds whose acquire is always followed by acquired on the same thread.
constexpr int mutex_lock = 1, mutex_critical = 5, mutex_ordered = 7;

const char* sync_region_name(int kind) {
  switch (kind) {
    case 1:
    case 3:
      return "omp barrier";
    case 2:
    case 8:
    case 9:
      return "omp barrier (implicit)";
    case 4:
      return "omp barrier (implementation)";
    case 5:
      return "omp taskwait";
    case 6:
      return "omp taskgroup";
    case 7:
      return "omp reduction";
    case 10:
      return "omp barrier (teams)";
    default:
      return "omp wait";
  }
}

const char* work_name(int kind) {
  switch (kind) {
    case 1:
      return "omp loop";
    case 2:
      return "omp sections";
    case 3:
      return "omp single";
    case 4:
      return "omp single (other thread's)";
    case 5:
      return "omp workshare";
    case 6:
      return "omp distribute";
    case 7:
      return "omp taskloop";
    case 8:
      return "omp scope";
    default:
      return "omp work";
  }
}

const char* mutex_wait_name(int kind) {
  switch (kind) {
    case mutex_lock:
      return "omp lock (wait)";
    case mutex_critical:
      return "omp critical (wait)";
    default:
      return "omp ordered (wait)";
  }
}

// --- each thread's state --------------------------------------------------------------------------

struct participation {
  openmp_team* team = nullptr;
  openmp_member* member = nullptr;  // null: the thread's number was past the team's capacity
  std::size_t region_entry = 0;     // the parallel region's place in `open`
  bool primary = false;
  bool arrived = false;  // reached the closing barrier (a member other than the primary)
};

struct open_wait {
  std::int64_t since_ns = 0;
  std::int64_t tasks_before_ns = 0;  // the thread's task time when the wait began
};

struct omp_thread {
  std::vector<const char*> open;  // the regions this tool opened on the thread, innermost last
  std::vector<participation> teams;
  std::vector<open_wait> waits;
  // Explicit tasks running here: their data (to find them) and their place in `open`.
  std::vector<std::pair<ompt_data*, std::size_t>> tasks;
  std::int64_t task_ns = 0;  // time in explicit tasks so far
  std::int64_t task_since_ns = 0;
};
thread_local omp_thread* this_omp_thread = nullptr;

omp_thread& state_of_this_thread() {
  if (this_omp_thread != nullptr) [[likely]]
    return *this_omp_thread;
  reentry_guard guard;
  this_omp_thread = new omp_thread;  // per-thread data lives until the process ends
  this_omp_thread->open.reserve(32);
  this_omp_thread->teams.reserve(8);
  this_omp_thread->waits.reserve(8);
  return *this_omp_thread;
}

void open_region(omp_thread& thread, const char* name) {
  thread.open.push_back(name);
  push_annotated_region(name, region_kind::openmp);
}
// Closes every region this tool opened on the thread down to `entry` (inclusive).
void close_regions_down_to(omp_thread& thread, std::size_t entry) {
  while (thread.open.size() > entry) {
    pop_annotated_region(thread.open.back());
    thread.open.pop_back();
  }
}
void close_region(omp_thread& thread) {
  if (!thread.open.empty()) close_regions_down_to(thread, thread.open.size() - 1);
}

participation* current_team(omp_thread& thread) { return thread.teams.empty() ? nullptr : &thread.teams.back(); }

// Construct names by code address ("omp task main (solver.cpp:31)"), each made once.
struct construct_names {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> by_key;
  // Suspended tasks' regions opened above them, to open again where they resume.
  std::unordered_map<ompt_data*, std::vector<const char*>> suspended;
};
construct_names* names = new construct_names;  // never destroyed

struct recent_name {
  const void* code = nullptr;
  const char* construct = nullptr;
  const char* name = nullptr;
};
thread_local std::array<recent_name, 16> recent_names{};

const char* construct_name(const char* construct, const void* code) {
  auto& recent = recent_names[(reinterpret_cast<std::uintptr_t>(code) >> 4) % recent_names.size()];
  if (recent.code == code && recent.construct == construct) [[likely]]
    return recent.name;
  reentry_guard guard;
  const auto key = fmt::format("{}@{}", construct, code);
  {
    std::lock_guard lock{names->mutex};
    if (const auto found = names->by_key.find(key); found != names->by_key.end()) {
      recent = {code, construct, found->second.c_str()};
      return recent.name;
    }
  }
  auto name = code == nullptr ? std::string{construct} : std::string{construct} + " " + code_location(code, false);
  std::lock_guard lock{names->mutex};
  const auto& stored = names->by_key.try_emplace(key, std::move(name)).first->second;
  recent = {code, construct, stored.c_str()};
  return recent.name;
}

// --- the callbacks ------------------------------------------------------------------------------

void on_parallel_begin(ompt_data*, const void*, ompt_data* parallel, unsigned int requested, int, const void* code) {
  if (!openmp_recording() || inside_kairos) return;
  parallel->ptr = begin_openmp_team(find_openmp_region(code, false), requested);
}

void on_parallel_end(ompt_data* parallel, ompt_data*, int, const void*) {
  auto* team = static_cast<openmp_team*>(parallel->ptr);
  if (team == nullptr) return;
  parallel->ptr = nullptr;
  end_openmp_team(team, steady_now_ns());
}

void on_implicit_task(int endpoint, ompt_data* parallel, ompt_data*, unsigned int, unsigned int index, int flags) {
  if ((flags & task_initial) != 0 || inside_kairos) return;
  auto& thread = state_of_this_thread();
  if (endpoint == scope_begin) {
    auto* team = parallel != nullptr ? static_cast<openmp_team*>(parallel->ptr) : nullptr;
    if (team == nullptr || !openmp_recording()) return;  // began before kairos recorded
    auto& joined = thread.teams.emplace_back();
    joined.team = team;
    joined.member = team->member(index);
    joined.primary = index == 0;
    joined.region_entry = thread.open.size();
    if (joined.member) joined.member->start_ns.store(steady_now_ns(), std::memory_order_release);
    open_region(thread, name_of(*team->region));
    return;
  }
  auto* joined = current_team(thread);
  if (joined == nullptr) return;
  if (!joined->arrived) {
    if (joined->member) joined->member->end_ns.store(steady_now_ns(), std::memory_order_release);
    close_regions_down_to(thread, joined->region_entry);
  }
  thread.teams.pop_back();
}

void on_sync_region_wait(int kind, int endpoint, ompt_data*, ompt_data*, const void* code) {
  if (inside_kairos) return;
  auto& thread = state_of_this_thread();
  auto* joined = current_team(thread);
  if (endpoint == scope_begin) {
    const auto now = steady_now_ns();
    // The closing barrier of a member other than the primary (libomp gives it no code address):
    // its part of the region ends here.
    if (joined && !joined->primary && !joined->arrived && code == nullptr &&
        (kind == sync_barrier_implicit || kind == sync_barrier_implicit_parallel)) {
      joined->arrived = true;
      if (joined->member) joined->member->arrival_ns.store(now, std::memory_order_release);
      close_regions_down_to(thread, joined->region_entry);
      return;
    }
    if (!openmp_recording()) return;
    thread.waits.push_back({now, thread.task_ns});
    open_region(thread, sync_region_name(kind));
    return;
  }
  if (joined && joined->arrived) return;  // the closing barrier's late end
  if (thread.waits.empty()) return;
  const auto wait = thread.waits.back();
  thread.waits.pop_back();
  close_region(thread);
  if (joined && joined->member) {
    const auto waited = steady_now_ns() - wait.since_ns - (thread.task_ns - wait.tasks_before_ns);
    joined->member->wait_ns.fetch_add(std::max<std::int64_t>(waited, 0), std::memory_order_relaxed);
  }
}

void on_work(int kind, int endpoint, ompt_data*, ompt_data*, std::uint64_t, const void*) {
  if (inside_kairos) return;
  auto& thread = state_of_this_thread();
  if (endpoint == scope_begin) {
    if (openmp_recording()) open_region(thread, work_name(kind));
  } else if (!thread.open.empty() && thread.open.back() == work_name(kind)) {
    close_region(thread);
  }
}

void on_mutex_acquire(int kind, unsigned int, unsigned int, std::uint64_t, const void*) {
  if (inside_kairos || !openmp_recording()) return;
  if (kind != mutex_lock && kind != mutex_critical && kind != mutex_ordered) return;
  auto& thread = state_of_this_thread();
  thread.waits.push_back({steady_now_ns(), thread.task_ns});
  open_region(thread, mutex_wait_name(kind));
}

void on_mutex_acquired(int kind, std::uint64_t, const void*) {
  if (inside_kairos) return;
  if (kind != mutex_lock && kind != mutex_critical && kind != mutex_ordered) return;
  auto& thread = state_of_this_thread();
  if (thread.waits.empty() || thread.open.empty() || thread.open.back() != mutex_wait_name(kind)) return;
  const auto wait = thread.waits.back();
  thread.waits.pop_back();
  close_region(thread);
  if (auto* joined = current_team(thread); joined && joined->member)
    joined->member->wait_ns.fetch_add(steady_now_ns() - wait.since_ns, std::memory_order_relaxed);
}

void on_task_create(ompt_data*, const void*, ompt_data* task, int flags, int, const void* code) {
  if (inside_kairos || !openmp_recording() || (flags & task_explicit) == 0) return;
  task->ptr = const_cast<char*>(construct_name("omp task", code));
}

void on_task_schedule(ompt_data* prior, int prior_status, ompt_data* next) {
  if (inside_kairos) return;
  auto& thread = state_of_this_thread();
  const auto now = steady_now_ns();
  if (prior != nullptr && prior->ptr != nullptr && !thread.tasks.empty() && thread.tasks.back().first == prior) {
    const auto ran = now - thread.task_since_ns;
    thread.task_ns += ran;
    if (auto* joined = current_team(thread); joined && joined->arrived && joined->member)
      joined->member->tasks_after_arrival_ns.fetch_add(ran, std::memory_order_relaxed);
    const auto entry = thread.tasks.back().second;
    thread.tasks.pop_back();
    const bool finished = prior_status == task_complete || prior_status == task_cancel || prior_status == task_detach ||
                          prior_status == task_late_fulfill;
    if (!finished && thread.open.size() > entry + 1) {
      reentry_guard guard;
      std::lock_guard lock{names->mutex};
      names->suspended[prior].assign(thread.open.begin() + static_cast<std::ptrdiff_t>(entry) + 1, thread.open.end());
    }
    close_regions_down_to(thread, entry);
  }
  if (next != nullptr && next->ptr != nullptr && openmp_recording()) {
    thread.tasks.emplace_back(next, thread.open.size());
    thread.task_since_ns = now;
    open_region(thread, static_cast<const char*>(next->ptr));
    std::vector<const char*> above;
    {
      reentry_guard guard;
      std::lock_guard lock{names->mutex};
      if (const auto found = names->suspended.find(next); found != names->suspended.end()) {
        above = std::move(found->second);
        names->suspended.erase(found);
      }
    }
    for (const auto* name : above) open_region(thread, name);
  }
}

void on_target(int kind, int endpoint, int, ompt_data*, std::uint64_t, const void* code) {
  if (inside_kairos) return;
  auto& thread = state_of_this_thread();
  if (endpoint == scope_begin) {
    if (!openmp_recording()) return;
    const char* construct = kind == 2   ? "omp target enter data"
                            : kind == 3 ? "omp target exit data"
                            : kind == 4 ? "omp target update"
                                        : "omp target";
    open_region(thread, construct_name(construct, code));
  } else if (endpoint == scope_end) {
    close_region(thread);
  }
}

// --- registration -------------------------------------------------------------------------------

std::string refused_callbacks;  // written by initialize, read by the note at the end

template <class Callback>
void set(ompt_set_callback set_callback, ompt_event event, Callback* callback, const char* name) {
  const int result = set_callback(event, reinterpret_cast<ompt_callback>(callback));
  if (result <= set_never) refused_callbacks += std::string{refused_callbacks.empty() ? "" : ", "} + name;
}

int initialize(ompt_lookup lookup, int, ompt_data*) {
  reentry_guard guard;
  auto set_callback = reinterpret_cast<ompt_set_callback>(lookup("ompt_set_callback"));
  if (set_callback == nullptr) return 0;
  set(set_callback, event_parallel_begin, &on_parallel_begin, "parallel_begin");
  set(set_callback, event_parallel_end, &on_parallel_end, "parallel_end");
  set(set_callback, event_implicit_task, &on_implicit_task, "implicit_task");
  set(set_callback, event_sync_region_wait, &on_sync_region_wait, "sync_region_wait");
  set(set_callback, event_work, &on_work, "work");
  set(set_callback, event_mutex_acquire, &on_mutex_acquire, "mutex_acquire");
  set(set_callback, event_mutex_acquired, &on_mutex_acquired, "mutex_acquired");
  set(set_callback, event_task_create, &on_task_create, "task_create");
  set(set_callback, event_task_schedule, &on_task_schedule, "task_schedule");
  set(set_callback, event_target, &on_target, "target");
  set_openmp_runtime("libomp (OMPT)");
  if (!refused_callbacks.empty() && verbosity() > 0)
    report("OpenMP: the runtime refused the OMPT callbacks " + refused_callbacks + "; those events are not recorded");
  return 1;  // keep the tool
}

void finalize(ompt_data*) {}

ompt_start_tool_result kairos_tool{&initialize, &finalize, {0}};

// The library a function lives in, for a line that names another tool.
std::string library_of(const void* function) {
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "an unknown library";
  return info.dli_fname;
}

}  // namespace
}  // namespace kairos::runtime

// libomp's question, once, as it starts. Another tool keeps working: one that the program or a
// library after kairos exports is asked first, and tools OMP_TOOL_LIBRARIES names are left to
// libomp (it loads them when kairos declines); either way one line says kairos steps aside.
extern "C" [[gnu::visibility("default")]] void* ompt_start_tool(unsigned int omp_version, const char* runtime_version) {
  using namespace kairos::runtime;
  ompt_start_tool_result* other = nullptr;
  {
    reentry_guard guard;
    auto next = reinterpret_cast<ompt_start_tool_function>(dlsym(RTLD_NEXT, "ompt_start_tool"));
    if (next != nullptr) other = next(omp_version, runtime_version);
  }
  if (!openmp_recording()) return other;
  if (other != nullptr) {
    report("OpenMP: another OMPT tool (in " + library_of(reinterpret_cast<const void*>(other->initialize)) +
           ") is active; kairos records no OpenMP regions");
    return other;
  }
  if (const char* tools = std::getenv("OMP_TOOL_LIBRARIES"); tools != nullptr && *tools != '\0') {
    report(std::string{"OpenMP: OMP_TOOL_LIBRARIES names "} + tools +
           "; kairos leaves OpenMP's tool interface to it and records no OpenMP regions");
    return nullptr;
  }
  return &kairos_tool;
}
