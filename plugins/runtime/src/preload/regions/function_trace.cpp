#include "preload/regions/function_trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include <kairos/components/wall_clock.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>
#include <kairos/storage/stored.hpp>

#include "common/posix_regex.hpp"
#include "preload/regions/region_rules.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/support/ticks.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"
#include "xray/xray_api.h"

namespace kairos::runtime {
namespace {

// An enter or an exit: the exit bit is the ticks' top bit (a TSC or ns count never reaches it).
struct function_event {
  std::uint64_t ticks;
  std::uintptr_t function;
};
constexpr std::uint64_t exit_bit = 1ull << 63;
// An XRay function id in place of an address (user-space addresses never reach bit 63), and a
// user-API region's interned name (bit 62), with bit 0 set when it was pushed while collection was
// stopped and bit 1 for a stored region's row (regions.cpp keeps its statistics: no call-graph
// node here, and its pops were checked there) (names are std::strings: 8-byte aligned).
constexpr std::uintptr_t xray_tag = 1ull << 63;
constexpr std::uintptr_t region_tag = 1ull << 62;
constexpr std::uintptr_t not_collected_bit = 1;
constexpr std::uintptr_t row_only_bit = 2;
bool is_region(std::uintptr_t what) noexcept { return (what & region_tag) != 0 && (what & xray_tag) == 0; }
bool row_only(std::uintptr_t what) noexcept { return (what & row_only_bit) != 0; }
const std::string* region_name(std::uintptr_t what) noexcept {
  return reinterpret_cast<const std::string*>(what & ~(region_tag | not_collected_bit | row_only_bit));
}

// 8,192 events (128 KiB) a thread: a full ring is processed by its own thread, so the size only
// sets how often that happens, and a ring that fits in the core's cache is read back from it
// (larger rings, read back from memory, cost a call measurably more).
constexpr std::uint64_t ring_events = 1u << 13;
constexpr std::uint64_t ring_mask = ring_events - 1;

// Up to 262,144 rows (10 MiB) a thread waiting for the database: a recursion 100,000 deep returns
// all its calls in one batch.
constexpr std::uint32_t row_chunks = 256;

struct open_call {
  std::uintptr_t function;  // or a region's tagged name
  std::uint64_t enter_ticks;
  bool included;
  std::uint32_t node = 0;  // a region's node in the thread's core call graph
};

// A call entered, pushed field by field: a whole open_call built first went through the stack a
// byte and a word at a time and was read back as one 8-byte word, a store-forwarding stall that was
// two thirds of a batch's time.
void enter(std::vector<open_call>& stack, std::uintptr_t function, std::uint64_t ticks, bool included,
           std::uint32_t node = 0) {
  auto& call = stack.emplace_back();
  call.function = function;
  call.enter_ticks = ticks;
  call.included = included;
  call.node = node;
}

struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
};

struct traced_thread {
  explicit traced_thread(thread_record& owner)
      : thread{&owner}, ring{new function_event[ring_events]}, rows{row_chunks} {}
  thread_record* thread;
  std::unique_ptr<function_event[]> ring;
  // The thread's own: the next event's slot, and the last tail it read.
  std::atomic<std::uint64_t> head{0};
  std::uint64_t tail_seen = 0;
  // The rest belongs to whoever holds `processing`.
  std::atomic<bool> processing{false};
  std::atomic<std::uint64_t> tail{0};
  std::vector<open_call> stack;
  std::int32_t included_depth = 0;
  // Every included call counted, short ones too; the path of the open included calls' nodes.
  call_tree calls;
  std::vector<std::uint32_t> call_path;
  std::atomic<std::uint64_t> events{0};  // processed so far; written by the batch holder only
  // Likewise (a global counter cost a locked add a row): rows of instrumented calls and traced
  // regions, and how many of those the log dropped (a stored region's row is regions.cpp's to count).
  std::atomic<std::uint64_t> rows_made{0};
  std::atomic<std::uint64_t> rows_made_dropped{0};
  std::unordered_map<std::uintptr_t, bool> decided;  // this thread's copy of the verdicts
  std::uintptr_t last_decided = 0;
  bool last_verdict = false;
  region_log rows;
  // User-API regions. The thread's own: its region names, copied once per distinct name (set
  // nodes never move, so events and rows point at them), and the names it pushed last by pointer,
  // so that a push of a name seen before costs a compare, not a hash; whether it is disabled.
  std::unordered_set<std::string, name_hash, std::equal_to<>> names;
  struct recent_name {
    const char* given = nullptr;
    const std::string* interned = nullptr;
  };
  std::array<recent_name, 64> recent_names{};
  std::atomic<bool> disabled{false};
  call_graph* graph = nullptr;  // the thread's core call graph, fed by the batch holder
  // Keeps that graph alive: a fork child's first batch forgets the graphs of threads that ended,
  // and the main thread's counts as ended once exit() has run its thread_local destructors.
  std::shared_ptr<thread_graph> graph_owner;
};

struct trace_globals {
  std::mutex mutex;  // the list
  std::deque<traced_thread> list;
  std::mutex filter_mutex;  // the verdicts and the symbolizer
  std::unordered_map<std::uintptr_t, bool> verdicts;
  std::unique_ptr<backtrace_symbolizer> symbols;  // created by the first verdict
};
trace_globals& all() {
  static auto* globals = new trace_globals;  // never destroyed: hooks run until the process ends
  return *globals;
}

struct compiled_filters {
  std::unique_ptr<posix_regex> include, exclude, file_include, file_exclude;  // null: not set
  bool system = false;
  std::int64_t min_duration_ns = 0;
};
compiled_filters* filters = nullptr;  // set once by configure_function_trace
bool (*request_drain)() noexcept = nullptr;

bool configured = false;
bool hooks_on = false;
std::uint32_t wall_clock_id = 0;
std::atomic<bool> accepting{false};
// XRay's functions, handed over by a program built with XRay (kairos_xray.cpp); null otherwise.
std::atomic<const kairos_xray_api*> xray{nullptr};
std::mutex xray_mutex;  // patching

std::uintptr_t address_of(std::uintptr_t function) {
  if ((function & xray_tag) == 0) return function;
  return xray.load(std::memory_order_acquire)->function_address(static_cast<std::int32_t>(function & ~xray_tag));
}
std::atomic<bool> forget_parent{false};
[[gnu::tls_model("initial-exec")]] thread_local traced_thread* this_thread_trace = nullptr;

// Functions found excluded, by address, so that their later calls cost a load and a compare: a
// direct-mapped table (a collision only costs the loser its fast path).
// 16,384 slots (128 KiB): a header-heavy C++ program has thousands of excluded functions, and a
// colliding one pays a recorded call's cost (a quarter of the slots cost nlohmann_json's calls
// measurably more on average).
constexpr std::size_t excluded_slot_count = 16384;
std::atomic<std::uintptr_t> excluded_slots[excluded_slot_count];
std::size_t slot_of(std::uintptr_t function) noexcept { return (function >> 4) & (excluded_slot_count - 1); }

// "int* std::copy<int const*, int*>(int const*, ...)" -> "std::copy<int const*, int*>": the name
// without the return type a template function's demangled name starts with, and without arguments.
std::string_view qualified_name(std::string_view name) {
  int angle = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<')
      ++angle;
    else if (c == '>')
      --angle;
    else if (angle == 0 && c == ' ' && !name.substr(0, i).ends_with("operator"))
      start = i + 1;
    else if (angle == 0 && c == '(' && i > start)
      return name.substr(start, i - start);
  }
  return name.substr(start);
}

bool in_system_library(std::string_view name, std::string_view file) {
  if (file.starts_with("/usr/include/")) return true;
  const auto qualified = qualified_name(name);
  for (std::string_view prefix :
       {"std::", "__gnu_cxx::", "__cxxabiv1::", "__gnu_debug::", "operator new", "operator delete"})
    if (qualified.starts_with(prefix)) return true;
  return false;
}

// Under filter_mutex: whether calls of `function` become rows. The symbolizer is the sink's kind
// (symbol tables, then the debug information the module carries), not dladdr, which sees only
// exported symbols: a program's own functions are seldom among them.
bool decide(std::uintptr_t function) {
  function = address_of(function);
  auto& globals = all();
  if (!globals.symbols) globals.symbols = std::make_unique<backtrace_symbolizer>(&move_above_floor, source_lines::own);
  const auto symbol = globals.symbols->resolve_function_entry(function);
  const auto& name = symbol.function;
  const auto& file = symbol.file;
  if (!filters->system && in_system_library(name, file)) return false;
  if (filters->include && !filters->include->search(name)) return false;
  if (filters->exclude && filters->exclude->search(name)) return false;
  if (filters->file_include && !filters->file_include->search(file)) return false;
  if (filters->file_exclude && filters->file_exclude->search(file)) return false;
  return true;
}

bool included(traced_thread& trace, std::uintptr_t function) {
  // A recursion or a loop calls one function again and again: its verdict is kept at hand.
  if (function == trace.last_decided) return trace.last_verdict;
  trace.last_decided = function;
  if (const auto found = trace.decided.find(function); found != trace.decided.end())
    return trace.last_verdict = found->second;
  auto& globals = all();
  bool verdict;
  {
    std::lock_guard lock{globals.filter_mutex};
    const auto found = globals.verdicts.find(function);
    verdict = found != globals.verdicts.end() ? found->second
                                              : globals.verdicts.emplace(function, decide(function)).first->second;
  }
  if (!verdict && (function & xray_tag) != 0) {
    // XRay: the function's sleds go back to nops, so its calls cost what they cost without kairos.
    std::lock_guard lock{xray_mutex};
    xray.load(std::memory_order_acquire)->unpatch_function(static_cast<std::int32_t>(function & ~xray_tag));
  } else if (!verdict) {
    excluded_slots[slot_of(function)].store(function, std::memory_order_relaxed);
  }
  trace.decided.emplace(function, verdict);
  return trace.last_verdict = verdict;
}

// Returns whether any row was made (none outside every time window).
bool append_row(traced_thread& trace, std::uintptr_t what, std::int64_t start_ns, std::int64_t end_ns,
                std::int32_t clipped) {
  const auto depth = trace.included_depth;
  const std::string* name = is_region(what) ? region_name(what) : nullptr;
  const auto function = name != nullptr ? 0 : address_of(what);
  // Each row counted and written in its slot field by field (region_log::append_with says why).
  const bool counted = !row_only(what);  // a stored region is counted by regions.cpp
  const auto add = [&](std::int64_t from_ns, std::int64_t to_ns, std::int32_t window, std::int32_t cut) {
    const bool kept = trace.rows.append_with([&](region_row& row) {
      row.name = name;
      row.start_ns = from_ns;
      row.end_ns = to_ns;
      row.depth = depth;
      row.window = window;
      row.clipped = cut;
      row.function = function;
    });
    if (!counted) return;
    trace.rows_made.store(trace.rows_made.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (!kept)
      trace.rows_made_dropped.store(trace.rows_made_dropped.load(std::memory_order_relaxed) + 1,
                                    std::memory_order_relaxed);
  };
  if (!windows_govern()) {
    add(start_ns, end_ns, 0, clipped);
    return true;
  }
  // Under time windows, a row per window the call overlapped, cut to it; none outside them.
  bool any = false;
  for_each_window_between(start_ns, end_ns, [&](const window_span& window) {
    any = true;
    add(std::max(start_ns, window.open_ns), std::min(end_ns, window.close_ns), window.ordinal,
        clipped | (window.open_ns > start_ns ? 1 : 0) | (window.close_ns < end_ns ? 2 : 0));
  });
  return any;
}

// An included call that ran from `start_ns` to `end_ns`, counted in its path's node: in the window
// it ran in, or under time windows in each it overlapped, cut to it (as its rows are).
void count_call(traced_thread& trace, std::uint32_t node, std::int64_t start_ns, std::int64_t end_ns) {
  if (!windows_govern()) {
    trace.calls.add(node, 0, end_ns - start_ns);
    return;
  }
  for_each_window_between(start_ns, end_ns, [&](const window_span& window) {
    trace.calls.add(node, window.ordinal, std::min(end_ns, window.close_ns) - std::max(start_ns, window.open_ns));
  });
}

// An included call entered: its path's node, below the innermost included call's. `what` as the
// event gave it (an included region's has no not_collected_bit; an XRay id's bit 0 is the id's).
[[gnu::always_inline]] inline void enter_included(traced_thread& trace, std::uintptr_t what) {
  ++trace.included_depth;
  const auto parent = trace.call_path.empty() ? call_tree::root : trace.call_path.back();
  trace.call_path.push_back(trace.calls.child(parent, what));
}

// The innermost open call ends at `end_ticks`.
void close_innermost(traced_thread& trace, const tick_converter& ticks, std::uint64_t end_ticks, std::int32_t clipped) {
  // Field by field, as enter() wrote them (see there): a copy of the whole call would read its
  // `included` and `node` as one word.
  const auto& innermost = trace.stack.back();
  const bool included = innermost.included;
  const auto what = innermost.function;
  const auto enter_ticks = innermost.enter_ticks;
  const auto node = innermost.node;
  trace.stack.pop_back();
  if (!included) return;
  --trace.included_depth;
  const auto counted_node = trace.call_path.back();
  trace.call_path.pop_back();
  const auto start_ns = ticks.to_ns(enter_ticks), end_ns = ticks.to_ns(end_ticks);
  count_call(trace, counted_node, start_ns, end_ns);
  if (is_region(what)) {
    const bool any_row = append_row(trace, what, start_ns, end_ns, clipped);
    if (row_only(what)) return;
    if (any_row) trace.graph->record(node, wall_clock_id, 0, static_cast<double>(end_ns - start_ns) * 1e-6);
    trace.graph->pop(node);
    return;
  }
  if (end_ns - start_ns < filters->min_duration_ns) return;  // counted, with no row
  append_row(trace, what, start_ns, end_ns, clipped);
}

// A user-API region's push or pop. A pop must name the innermost open region, or it is reported and
// ignored; functions still open above that region close with it.
void process_region_event(traced_thread& trace, const tick_converter& ticks, const function_event& event) {
  const auto* name = region_name(event.function);
  if ((event.ticks & exit_bit) == 0) {
    const bool collected = (event.function & not_collected_bit) == 0;
    std::uint32_t node = 0;
    if (collected) {
      if (!row_only(event.function)) node = trace.graph->push(*name, default_storage_mode());
      enter_included(trace, event.function);
    }
    enter(trace.stack, event.function, event.ticks, collected, node);
    return;
  }
  const auto innermost = std::find_if(trace.stack.rbegin(), trace.stack.rend(),
                                      [](const open_call& call) { return is_region(call.function); });
  if (innermost == trace.stack.rend() || region_name(innermost->function) != name) {
    // A stored region's pop was checked and reported by regions.cpp: one missed here (its push
    // came while the trace did not record) is no second mistake of the program's.
    if (!row_only(event.function))
      report_mismatched_pop(*trace.thread, *name,
                            innermost == trace.stack.rend() ? nullptr : region_name(innermost->function));
    return;
  }
  const auto keep = trace.stack.size() - static_cast<std::size_t>(innermost - trace.stack.rbegin()) - 1;
  while (trace.stack.size() > keep) close_innermost(trace, ticks, event.ticks & ~exit_bit, 0);
}

// Holding trace.processing.
void process(traced_thread& trace, const tick_converter& ticks) {
  const auto head = trace.head.load(std::memory_order_acquire);
  auto tail = trace.tail.load(std::memory_order_relaxed);
  trace.events.store(trace.events.load(std::memory_order_relaxed) + (head - tail), std::memory_order_relaxed);
  for (; tail != head; ++tail) {
    const auto event = trace.ring[tail & ring_mask];
    if (is_region(event.function)) {
      process_region_event(trace, ticks, event);
      continue;
    }
    if ((event.ticks & exit_bit) == 0) {
      const bool wanted = included(trace, event.function);
      enter(trace.stack, event.function, event.ticks, wanted);
      if (wanted) enter_included(trace, event.function);
      continue;
    }
    // The exit closes its call and any call above it whose exit never came (left by an exception
    // or a longjmp where the compiler emits exits only at returns, as clang does). An exit whose
    // enter was never seen (the call began before kairos did) closes nothing.
    const auto match = std::find_if(trace.stack.rbegin(), trace.stack.rend(),
                                    [&](const open_call& call) { return call.function == event.function; });
    if (match == trace.stack.rend()) continue;
    const auto keep = trace.stack.size() - static_cast<std::size_t>(match - trace.stack.rbegin()) - 1;
    while (trace.stack.size() > keep) close_innermost(trace, ticks, event.ticks & ~exit_bit, 0);
  }
  trace.tail.store(tail, std::memory_order_release);
}

bool try_process(traced_thread& trace, const tick_converter& ticks) {
  if (trace.processing.exchange(true, std::memory_order_acquire)) return false;
  process(trace, ticks);
  trace.processing.store(false, std::memory_order_release);
  return true;
}

// The thread's ring is full: it processes its own events (or waits for the thread doing so).
[[gnu::noinline]] void make_room(traced_thread& trace) {
  trace.tail_seen = trace.tail.load(std::memory_order_acquire);
  if (trace.head.load(std::memory_order_relaxed) - trace.tail_seen < ring_events) return;
  reentry_guard guard;
  const auto ticks = current_tick_converter();
  while (!try_process(trace, ticks)) __builtin_ia32_pause();
  trace.tail_seen = trace.tail.load(std::memory_order_acquire);
  // Rows piling up faster than the consumer's ticks take them: it drains now, and this thread
  // waits for it (bounded: a consumer that is gone leaves the bound to drop rows, counted).
  if (request_drain != nullptr && trace.rows.unread_chunks() > trace.rows.max_chunks() / 2 && request_drain()) {
    wait_until([&] { return trace.rows.unread_chunks() <= trace.rows.max_chunks() / 4; }, std::chrono::seconds{2},
               std::chrono::microseconds{100});
  }
}

[[gnu::noinline]] traced_thread* start_tracing_this_thread() {
  if (!accepting.load(std::memory_order_acquire) || inside_kairos) return nullptr;
  reentry_guard guard;
  // The tick clock is calibrated (a fraction of a millisecond) by the first thread that traces,
  // before its first event:
  // a run that never calls an instrumented function nor pushes a region pays nothing at start-up.
  static std::once_flag calibrated;
  std::call_once(calibrated, calibrate_ticks);
  auto& record = current_thread();
  auto& graph = this_thread_graph();
  std::shared_ptr<thread_graph> owner;
  for (auto& candidate : thread_graphs::instance().all())
    if (&candidate->graph == &graph) owner = candidate;
  std::lock_guard lock{all().mutex};
  this_thread_trace = &all().list.emplace_back(record);
  this_thread_trace->graph = &graph;
  this_thread_trace->graph_owner = std::move(owner);
  return this_thread_trace;
}

// In a followed fork child, at its first traced call: what the parent's rows and region report held.
void forget_parent_now() {
  for (auto& trace : all().list) {
    trace.rows.clear();
    trace.calls.clear();
  }
  thread_graphs::instance().clear();
}

// A followed fork child's first traced call: forgets what the parent traced, then traces again.
[[gnu::noinline]] bool resume_in_fork_child() {
  if (inside_kairos || !forget_parent.exchange(false)) return false;
  reentry_guard guard;
  {
    std::lock_guard lock{all().mutex};
    forget_parent_now();
  }
  accepting.store(true);
  return true;
}

[[gnu::always_inline]] inline traced_thread* tracing_thread() {
  auto* trace = this_thread_trace;
  if (!accepting.load(std::memory_order_relaxed) || inside_kairos) [[unlikely]] {
    if (!resume_in_fork_child()) return nullptr;
  }
  if (trace == nullptr) [[unlikely]]
    return start_tracing_this_thread();
  return trace;
}

[[gnu::always_inline]] inline void append_event(traced_thread* trace, std::uintptr_t what, std::uint64_t exit) {
  const auto head = trace->head.load(std::memory_order_relaxed);
  if (head - trace->tail_seen == ring_events) [[unlikely]]
    make_room(*trace);
  trace->ring[head & ring_mask] = {read_ticks() | exit, what};
  trace->head.store(head + 1, std::memory_order_release);
}

// An instrumented function's entry or exit (the hooks and XRay's handler).
[[gnu::always_inline]] inline void record(std::uintptr_t function, std::uint64_t exit) {
  if (excluded_slots[slot_of(function)].load(std::memory_order_relaxed) == function || !hooks_on) return;
  if (auto* trace = tracing_thread()) append_event(trace, function, exit);
}

// A name (or a pointer) this thread has not pushed lately: looked up, copied when new.
[[gnu::noinline]] const std::string* intern_new(traced_thread& trace, const char* name,
                                                traced_thread::recent_name& recent) {
  reentry_guard guard;  // copying a name allocates
  const std::string_view text{name};
  auto found = trace.names.find(text);
  const std::string* interned = found != trace.names.end() ? &*found : &*trace.names.emplace(text).first;
  recent = {name, interned};
  return interned;
}

// The region's name as this thread interned it: a compare when the same pointer came last time.
[[gnu::always_inline]] inline const std::string* intern(traced_thread& trace, const char* name) {
  auto& recent = trace.recent_names[(reinterpret_cast<std::uintptr_t>(name) >> 3) % trace.recent_names.size()];
  if (recent.given == name && std::strcmp(recent.interned->c_str(), name) == 0) [[likely]]
    return recent.interned;
  return intern_new(trace, name, recent);
}

void traced_region_event(const char* name, std::uint64_t exit, std::uintptr_t kind = 0) {
  auto* trace = tracing_thread();
  if (trace == nullptr || trace->disabled.load(std::memory_order_relaxed)) return;
  const auto* interned = intern(*trace, name != nullptr ? name : "(null)");
  const auto collected = exit != 0 || regions_collecting() ? 0 : not_collected_bit;
  append_event(trace, region_tag | reinterpret_cast<std::uintptr_t>(interned) | collected | kind, exit);
}

// XRay's sleds: patched while kairos records (and, under time windows, while a window is open),
// nops otherwise. Under xray_mutex.
void patch_sleds_now() {
  const auto* api = xray.load(std::memory_order_acquire);
  if (api == nullptr) return;
  if (accepting.load() && hooks_on && inside_window()) {
    api->patch();
    // Functions already found excluded stay unpatched.
    std::lock_guard lock{all().filter_mutex};
    for (const auto& [function, verdict] : all().verdicts)
      if (!verdict && (function & xray_tag) != 0)
        api->unpatch_function(static_cast<std::int32_t>(function & ~xray_tag));
  } else {
    api->unpatch();
  }
}

// XRay's handler: entries and exits (a tail call's exit is an exit) become the same events as
// -finstrument-functions' hooks give, the function id in place of the address.
void xray_event(std::int32_t function_id, int entry_type) {
  constexpr int entry = 0, exit = 1, tail = 2, entry_with_argument = 3;
  const auto function = xray_tag | static_cast<std::uint32_t>(function_id);
  if (entry_type == entry || entry_type == entry_with_argument)
    record(function, 0);
  else if (entry_type == exit || entry_type == tail)
    record(function, exit_bit);
}

}  // namespace

problem configure_function_trace(const function_trace_options& options) {
  auto compiled = std::make_unique<compiled_filters>();
  compiled->system = options.system;
  compiled->min_duration_ns = options.min_duration_ns;
  hooks_on = options.hooks;
  request_drain = options.request_drain;
  problem failure;
  const std::pair<const std::string*, std::unique_ptr<posix_regex>*> expressions[] = {
      {&options.include, &compiled->include},
      {&options.exclude, &compiled->exclude},
      {&options.file_include, &compiled->file_include},
      {&options.file_exclude, &compiled->file_exclude}};
  for (const auto& [text, target] : expressions) {
    if (text->empty() || failure) continue;
    *target = std::make_unique<posix_regex>(*text);
    if (!(*target)->failure()) continue;
    // The hooks stay off; user-API regions are still traced.
    hooks_on = false;
    failure =
        problem{fmt::format("\"{}\" is not a POSIX extended regular expression: {}; instrumented "
                            "functions are not recorded in this run",
                            *text, (*target)->failure().text())};
  }
  filters = compiled.release();  // read by every batch until the process ends
  wall_clock_id = component_id<wall_clock>();
  configured = true;
  return failure;
}

bool traced_regions_available() noexcept { return configured; }
void push_traced_region(const char* name) { traced_region_event(name, 0); }
void pop_traced_region(const char* name) { traced_region_event(name, exit_bit); }
void push_region_row(const char* name) { traced_region_event(name, 0, row_only_bit); }
void pop_region_row(const char* name) { traced_region_event(name, exit_bit, row_only_bit); }

namespace {
void set_traced_thread_disabled(bool disabled) {
  if (auto* trace = tracing_thread()) trace->disabled.store(disabled, std::memory_order_relaxed);
}
}  // namespace
void disable_traced_thread() { set_traced_thread_disabled(true); }
void enable_traced_thread() { set_traced_thread_disabled(false); }

void set_function_trace_accepting(bool on) noexcept {
  accepting.store(on && configured, std::memory_order_seq_cst);
  std::lock_guard lock{xray_mutex};
  patch_sleds_now();
}

void function_trace_windows_changed() noexcept {
  std::lock_guard lock{xray_mutex};
  patch_sleds_now();
}

// This process's traced threads: the list's lock is held only to copy them (the deque never moves
// an element), so a thread starting to trace never waits for a batch or a database insert.
std::vector<traced_thread*> traced_threads() {
  std::lock_guard lock{all().mutex};
  std::vector<traced_thread*> list;
  for (auto& trace : all().list)
    if (trace.thread->pid == getpid()) list.push_back(&trace);
  return list;
}

void process_function_events(bool closing) {
  if (!configured) return;
  const auto ticks = current_tick_converter();
  for (auto* traced : traced_threads()) {
    auto& trace = *traced;
    if (!closing) {
      try_process(trace, ticks);  // a thread busy with its own ring is left to it
      continue;
    }
    wait_until([&] { return try_process(trace, ticks); }, std::chrono::milliseconds{100},
               std::chrono::microseconds{50});
    if (trace.processing.exchange(true, std::memory_order_acquire)) continue;
    const auto now = read_ticks();
    while (!trace.stack.empty()) close_innermost(trace, ticks, now, 2);
    trace.processing.store(false, std::memory_order_release);
  }
}

namespace {
std::uint64_t rows_made() {
  std::uint64_t count = 0;
  for (const auto* trace : traced_threads()) count += trace->rows_made.load(std::memory_order_relaxed);
  return count;
}
}  // namespace

std::uint64_t function_calls_recorded() {
  std::uint64_t count = 0;
  for (const auto* trace : traced_threads())
    count +=
        trace->rows_made.load(std::memory_order_relaxed) - trace->rows_made_dropped.load(std::memory_order_relaxed);
  return count;
}

bool traced_anything() {
  if (rows_made() > 0) return true;
  for (const auto* trace : traced_threads())
    if (trace->head.load(std::memory_order_acquire) != trace->tail.load(std::memory_order_acquire)) return true;
  return false;
}

std::uint64_t traced_events() {
  std::uint64_t count = 0;
  for (const auto* trace : traced_threads()) count += trace->events.load(std::memory_order_relaxed);
  return count;
}

std::uint64_t traced_rows_dropped() {
  std::uint64_t dropped = 0;
  for (const auto* trace : traced_threads()) dropped += trace->rows.dropped();
  return dropped;
}

void for_each_function_log(const std::function<void(thread_record&, region_log&)>& visit) {
  for (auto* trace : traced_threads()) visit(*trace->thread, trace->rows);
}

void for_each_call_tree(const std::function<void(thread_record&, std::span<const call_tree_row>)>& visit) {
  std::vector<call_tree_row> rows;
  for (auto* traced : traced_threads()) {
    auto& trace = *traced;
    // The tree is the batch holder's: a thread still inside its own batch is waited for, bounded.
    if (!wait_until([&] { return !trace.processing.exchange(true, std::memory_order_acquire); },
                    std::chrono::milliseconds{100}, std::chrono::microseconds{50}))
      continue;
    rows.clear();
    const auto& nodes = trace.calls.nodes();
    for (std::uint32_t index = 1; index < nodes.size(); ++index) {
      const auto& node = nodes[index];
      const bool region = is_region(node.key);
      for (const auto& stats : node.windows)
        rows.push_back({index, node.parent, region ? std::string_view{*region_name(node.key)} : std::string_view{},
                        region ? 0 : address_of(node.key), stats});
    }
    trace.processing.store(false, std::memory_order_release);
    if (!rows.empty()) visit(*trace.thread, rows);
  }
}

void function_trace_lock_for_fork() { all().mutex.lock(); }
void function_trace_unlock_after_fork() noexcept { all().mutex.unlock(); }
void function_trace_off_in_child() noexcept {
  forget_parent.store(false);
  accepting.store(false);
}

void function_trace_forget_after_fork_in_child() noexcept {
  accepting.store(false);  // until the child's first traced call has forgotten the parent
  // Only stores here (no memory is freed in a fork handler): the parent's events are skipped, its
  // open calls forgotten, and a batch another thread of the parent was running is over.
  for (auto& trace : all().list) {
    trace.tail.store(trace.head.load());
    trace.stack.clear();
    trace.call_path.clear();
    trace.included_depth = 0;
    trace.events.store(0);
    trace.rows_made.store(0);
    trace.rows_made_dropped.store(0);
    trace.processing.store(false);
  }
  forget_parent.store(true);
}

}  // namespace kairos::runtime

// A program built with XRay hands over XRay's functions (kairos_xray.cpp, in the program, from its
// constructor: after libkairos.so's own start-up). Exported (see exports.map).
extern "C" __attribute__((visibility("default"))) void kairos_xray_attach(const kairos_xray_api* api) {
  using namespace kairos::runtime;
  if (api == nullptr || api->version != KAIROS_XRAY_API_VERSION || !configured || !hooks_on) return;
  std::lock_guard lock{xray_mutex};
  if (xray.load() != nullptr) return;
  xray.store(api, std::memory_order_release);
  api->set_handler(&xray_event);
  patch_sleds_now();
}

// The hooks -finstrument-functions calls around every instrumented function. Exported (see
// exports.map); the program finds them in libkairos.so, preloaded, before libkairos-user.so's
// do-nothing ones.
extern "C" {
__attribute__((visibility("default"))) void __cyg_profile_func_enter(void* function, void*) {
  kairos::runtime::record(reinterpret_cast<std::uintptr_t>(function), 0);
}
__attribute__((visibility("default"))) void __cyg_profile_func_exit(void* function, void*) {
  kairos::runtime::record(reinterpret_cast<std::uintptr_t>(function), kairos::runtime::exit_bit);
}
}
