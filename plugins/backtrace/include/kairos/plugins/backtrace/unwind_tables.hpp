#pragma once
// Unwind tables compiled per function, so that a sampling handler walks the interrupted thread's
// stack without interpreting DWARF and without entering the loader (x86-64, glibc 2.35 or later).
//
// Why: libgcc's _Unwind_Backtrace interprets every frame's call-frame instructions at every
// sample (docs/performance.md, "Backtrace capture": about ten times the walk of these tables),
// and libunwind's faster path can deadlock against dlclose (capture.hpp).
//
// How:
// * Off the sampling path, a function's FDE in .eh_frame is compiled once into rows, one per
//   address range: the frame's CFA is rsp or rbp plus an offset, the return address lies at
//   CFA - 8, and rbp was saved at CFA + n or is unchanged. What such a row cannot say (a CFA
//   expression, a signal frame, a PLT stub, a realigned stack, an unusual register rule) makes
//   the function one the walk cannot follow.
// * Only the functions samples pass through are compiled (tens in a run, against thousands of
//   FDEs in libkairos.so alone; compiling whole modules costs milliseconds).
//   A module is registered first: its eh_frame_hdr's sorted table of function starts is copied,
//   so that the handler never reads a module's memory, which dlclose may unmap meanwhile.
// * In the handler, glibc's _dl_find_object (lock-free and async-signal-safe; libgcc calls it
//   from signal handlers too) names the module of each frame; a binary search in the copied
//   starts names the function.
// * A module or function not compiled yet is queued as wanted, and that sample unwinds with
//   libgcc, whose frames then queue every function of the stack at once. build_unwind_tables(),
//   called from a thread of the caller's (the runtime's control thread), compiles the queue
//   inside dl_iterate_phdr, so no module can be unloaded meanwhile. Nothing is ever freed: a
//   module loaded again at the same address is found again.
// * The walk reads only the interrupted thread's stack, from the interrupted stack pointer up to
//   the top that the thread registered (unwind_tables_register_thread), when that pointer lies in
//   the registered stack at all, and the CFA must grow at every frame. Stale rows (another
//   module mapped where an unloaded one was, at the same eh_frame_hdr address) give wrong
//   frames, never a fault or a loop.
// * Code that no unwind table covers is a JIT's (node, LuaJIT, a JVM) or hand-written: outside
//   every module, or in a module between its FDEs (node's builtins, 1.6 MB of its .text,
//   have none). It keeps frame pointers: the walk steps through such a frame by its rbp chain, as perf
//   does (the return address at rbp + 8, the caller's rbp at rbp), while the chain stays on the
//   stack and grows; a function whose rows the walk cannot follow, reached that way, is stepped so
//   too. libgcc knows none of these, so such a walk counts as finished wherever it stops.
// * Anything else (an unknown function, a stack pointer off the registered stack) ends the walk
//   unfinished, and the caller unwinds with libgcc instead.
// * The same walk reads a copy of another thread's stack (walk_copied_stack: a perf sample's user
//   registers and stack copy), off that thread; what that copy holds bounds it instead.
//
// This header holds what a signal handler inlines: the registry's layout, the walk and the queue
// of what it missed. The compiler of rows (reading .eh_frame), the builder and the registry
// itself are compiled once, in the kairos::backtrace library (src/unwind_tables.cpp).
#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__linux__) && __has_include(<link.h>)
#include <dlfcn.h>
#include <link.h>
#endif

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define KAIROS_BACKTRACE_HAVE_UNWIND_TABLES 1
#include <algorithm>
#include <cstring>
#else
#define KAIROS_BACKTRACE_HAVE_UNWIND_TABLES 0
#endif

namespace kairos {

namespace backtrace_detail {

// One address range of a function with the same unwinding rule, from `start` (an offset from the
// module's load bias) to the next row's start or the function's end.
enum class unwind_rule : std::uint8_t {
  unknown,       // the walk cannot follow this frame: libgcc must
  cfa_from_rsp,  // CFA = rsp + cfa_offset
  cfa_from_rbp,  // CFA = rbp + cfa_offset
  end_of_stack,  // the return address is undefined: the outermost frame (_start, a thread's start)
};
// 8 bytes; a frame bigger than 32 KiB or an rbp saved further than 128 bytes below the CFA makes
// an unknown row.
struct unwind_row {
  std::uint32_t start = 0;
  std::int16_t cfa_offset = 0;
  std::int8_t rbp_offset = 0;  // where the caller's rbp was saved, from the CFA; 0: rbp unchanged
  unwind_rule rule = unwind_rule::unknown;
};
static_assert(sizeof(unwind_row) == 8);

// How a walk ended.
enum class walk_end : std::uint8_t {
  finished,    // the outermost frame, or the buffer full
  missing,     // a module or function not compiled yet (now queued)
  unfollowed,  // a frame the rows cannot follow, or off the stack: libgcc's
};
struct table_walk {
  int count = 0;
  walk_end end = walk_end::unfollowed;
  bool truncated = false;  // the buffer filled before the outermost frame
  bool outermost = false;  // reached the outermost frame (a thread's start, _start)
  // The walk needed a word at or above the stack's top (a copy's end, for a copied stack), with
  // the frame pointer the last frame walked had then (stitching a kernel's frame-pointer chain on).
  bool beyond_top = false;
  std::uintptr_t last_bp = 0;
  bool finished() const noexcept { return end == walk_end::finished; }
};

struct unwind_table_counts {
  int modules = 0;             // modules registered
  std::int64_t functions = 0;  // functions compiled
  std::int64_t rows = 0;       // their rows
};

#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
inline constexpr bool unwind_tables_at_build = true;

// A function's rows, from its first row's start to `end`; no rows: the walk cannot follow it.
struct function_rows {
  std::uint32_t end = 0;
  std::uint32_t count = 0;
  const unwind_row* rows = nullptr;
};

struct module_entry {
  std::uintptr_t map_start = 0;                            // _dl_find_object's dlfo_map_start
  std::uintptr_t eh_frame_hdr = 0;                         // and dlfo_eh_frame: together, the module's key
  std::uintptr_t bias = 0;                                 // the load bias: starts and rows are offsets from it
  std::uint32_t count = 0;                                 // functions (FDEs)
  const std::uint32_t* starts = nullptr;                   // sorted, a copy of eh_frame_hdr's
  std::atomic<const function_rows*>* functions = nullptr;  // null until compiled
};

// Modules are filled once and published by `published`; functions by their pointer. One builder
// at a time (under a mutex of src/unwind_tables.cpp's), handlers read without a lock.
struct unwind_registry {
  static constexpr int capacity = 256;
  static constexpr int wanted_modules_capacity = 32;
  static constexpr int wanted_functions_capacity = 1024;
  module_entry modules[capacity];
  std::atomic<int> published{0};
  std::atomic<bool> in_use{false};  // someone builds tables: walks are worth trying
  std::atomic<bool> wanted{false};  // something was queued since the last build
  std::atomic<std::uintptr_t> wanted_modules[wanted_modules_capacity] = {};     // eh_frame_hdr
  std::atomic<std::uint64_t> wanted_functions[wanted_functions_capacity] = {};  // module + 1 << 32 | function
};
// One per linked image (defined in src/unwind_tables.cpp); handlers read it in place.
extern unwind_registry unwind_tables;

// The registered thread's stack, [lowest, top); top 0: not registered, libgcc unwinds. A stack
// pointer outside it (a sigaltstack, a coroutine's stack) may have unmapped memory above it.
[[gnu::tls_model("initial-exec")]] inline thread_local std::uintptr_t thread_stack_lowest = 0;
[[gnu::tls_model("initial-exec")]] inline thread_local std::uintptr_t thread_stack_top = 0;

// The registered module with this key, or -1 (the walk's lookups and the builder's).
inline int registered_index(std::uintptr_t map_start, std::uintptr_t eh_frame_hdr) noexcept {
  const int published = unwind_tables.published.load(std::memory_order_acquire);
  for (int i = 0; i < published; ++i) {
    const auto& module = unwind_tables.modules[i];
    if (module.eh_frame_hdr == eh_frame_hdr && module.map_start == map_start) return i;
  }
  return -1;
}

// --- the walk (async-signal-safe) ------------------------------------------------------------

inline void want_module(std::uintptr_t eh_frame_hdr) noexcept {
  for (auto& slot : unwind_tables.wanted_modules) {
    std::uintptr_t current = slot.load(std::memory_order_relaxed);
    if (current == 0 && slot.compare_exchange_strong(current, eh_frame_hdr, std::memory_order_relaxed))
      current = eh_frame_hdr;
    if (current == eh_frame_hdr) break;
  }
  unwind_tables.wanted.store(true, std::memory_order_relaxed);
}

inline void want_function(int module, std::uint32_t function) noexcept {
  const std::uint64_t key = (static_cast<std::uint64_t>(module + 1) << 32) | function;
  constexpr auto capacity = static_cast<std::uint64_t>(unwind_registry::wanted_functions_capacity);
  for (std::uint64_t probe = 0; probe < 8; ++probe) {  // full: the next sample queues it again
    auto& slot = unwind_tables.wanted_functions[(key * 0x9e3779b97f4a7c15u + probe) % capacity];
    std::uint64_t current = slot.load(std::memory_order_relaxed);
    if (current == 0 && slot.compare_exchange_strong(current, key, std::memory_order_relaxed)) current = key;
    if (current == key) break;
  }
  unwind_tables.wanted.store(true, std::memory_order_relaxed);
}

// Which function of a module holds `address`: the index of the last start at or before it.
inline bool function_index(const module_entry& module, std::uintptr_t address, std::uint32_t& index) noexcept {
  if (address < module.bias || address - module.bias > UINT32_MAX) return false;
  const auto offset = static_cast<std::uint32_t>(address - module.bias);
  const std::uint32_t* after = std::upper_bound(module.starts, module.starts + module.count, offset);
  if (after == module.starts) return false;
  index = static_cast<std::uint32_t>(after - module.starts - 1);
  return true;
}

// The module holding `address`, from the last one looked up when it still covers it.
struct module_lookup {
  std::uintptr_t start = 0, end = 0;
  int index = -1;  // registered module, or -1
  std::uintptr_t eh_frame_hdr = 0;

  // False when the address is in no module at all.
  bool find(std::uintptr_t address) noexcept {
    if (address >= start && address < end) return true;
    dl_find_object found;
    if (_dl_find_object(reinterpret_cast<void*>(address), &found) != 0) return false;
    start = reinterpret_cast<std::uintptr_t>(found.dlfo_map_start);
    end = reinterpret_cast<std::uintptr_t>(found.dlfo_map_end);
    eh_frame_hdr = reinterpret_cast<std::uintptr_t>(found.dlfo_eh_frame);
    index = registered_index(start, eh_frame_hdr);
    return true;
  }
};

// The stack words a walk may read, [bottom, top) of the walked thread's address space: the
// calling thread's own stack, read in place (`copy` null), or a copy of another thread's taken
// at a sample (a perf ring buffer's PERF_SAMPLE_STACK_USER), whose byte i is bottom + i's.
struct stack_memory {
  std::uintptr_t bottom = 0, top = 0;
  const unsigned char* copy = nullptr;

  bool holds(std::uintptr_t address) const noexcept {
    return address >= bottom && top - bottom >= sizeof(std::uintptr_t) && address <= top - sizeof(std::uintptr_t) &&
           address % sizeof(std::uintptr_t) == 0;
  }
  std::uintptr_t word(std::uintptr_t address) const noexcept {
    if (copy == nullptr) return *reinterpret_cast<const std::uintptr_t*>(address);
    std::uintptr_t value;
    std::memcpy(&value, copy + (address - bottom), sizeof value);
    return value;
  }
};

// Walks from a frame's registers (frame 0 is `pc` itself) over `stack`; see the header comment
// for when it gives up. It stays long because it runs in the signal handler: its steps are lambdas
// over the walk's registers (pc, sp, bp), inlined into one loop, where functions would pass them all
// by reference at every frame.
inline table_walk walk_stack(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp, const stack_memory& stack,
                             std::uintptr_t* frames, int capacity) noexcept {
  table_walk walk;
  if (!unwind_tables.in_use.load(std::memory_order_relaxed)) return walk;
  module_lookup module;
  bool through_jit = false;  // a frame was stepped by its frame pointer
  auto readable = [&](std::uintptr_t address) noexcept {
    if (stack.holds(address)) return true;
    if (address >= stack.top - sizeof(std::uintptr_t) + 1 && address > sp) walk.beyond_top = true;
    return false;
  };
  // A frame without rows (JIT code): its caller by the rbp chain, while it stays on the stack.
  auto step_by_frame_pointer = [&]() noexcept {
    if (bp < sp || !readable(bp) || !readable(bp + sizeof(std::uintptr_t))) return false;
    const std::uintptr_t caller_pc = stack.word(bp + sizeof(std::uintptr_t));
    const std::uintptr_t caller_bp = stack.word(bp);
    if (caller_pc == 0) return false;
    sp = bp + 2 * sizeof(std::uintptr_t);
    bp = caller_bp;
    pc = caller_pc;
    through_jit = true;
    return true;
  };
  auto stop = [&](walk_end end) noexcept {
    walk.end = through_jit ? walk_end::finished : end;
    walk.last_bp = bp;
    return walk;
  };
  auto reached_outermost = [&]() noexcept {
    walk.end = walk_end::finished;
    walk.outermost = true;
    return walk;
  };
  for (bool first = true;; first = false) {
    if (walk.count == capacity) {
      walk.truncated = true;
      walk.end = walk_end::finished;
      return walk;
    }
    frames[walk.count++] = pc;
    const std::uintptr_t lookup = first ? pc : pc - 1;  // a return address's call lies before it
    // Code that no unwind table covers (outside every module, a module without .eh_frame_hdr, or
    // between a module's FDEs: node's builtins, JIT code) keeps frame pointers, as perf assumes.
    if (!module.find(lookup)) {
      if (step_by_frame_pointer()) continue;
      return stop(walk_end::unfollowed);
    }
    if (module.index < 0) {
      if (module.eh_frame_hdr == 0) {
        if (step_by_frame_pointer()) continue;
        return stop(walk_end::unfollowed);
      }
      want_module(module.eh_frame_hdr);
      return stop(walk_end::missing);
    }
    const auto& entry = unwind_tables.modules[module.index];
    std::uint32_t index = 0;
    if (!function_index(entry, lookup, index)) {
      if (step_by_frame_pointer()) continue;
      return stop(walk_end::unfollowed);
    }
    const function_rows* function = entry.functions[index].load(std::memory_order_acquire);
    if (function == nullptr) {
      want_function(module.index, index);
      return stop(walk_end::missing);
    }
    const auto offset = static_cast<std::uint32_t>(lookup - entry.bias);
    if (offset >= function->end) {
      if (step_by_frame_pointer()) continue;
      return stop(walk_end::unfollowed);
    }
    // Rows the walk cannot follow (libgcc can): by the frame pointer only past JIT code.
    if (function->count == 0) {
      if (through_jit && step_by_frame_pointer()) continue;
      return stop(walk_end::unfollowed);
    }
    const unwind_row* row = function->rows + function->count - 1;
    while (row->start > offset) --row;  // rows[0] starts at the function's start, at or before offset
    if (row->rule == unwind_rule::end_of_stack) return reached_outermost();
    const std::uintptr_t cfa =
        (row->rule == unwind_rule::cfa_from_rsp ? sp : bp) + static_cast<std::uintptr_t>(row->cfa_offset);
    const std::uintptr_t return_address_at = cfa - sizeof(std::uintptr_t);
    if (cfa <= sp || !readable(return_address_at)) return stop(walk_end::unfollowed);
    if (row->rbp_offset != 0) {
      const std::uintptr_t rbp_at = cfa + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(row->rbp_offset));
      if (!readable(rbp_at)) return stop(walk_end::unfollowed);
      bp = stack.word(rbp_at);
    }
    pc = stack.word(return_address_at);
    sp = cfa;
    if (pc == 0) return reached_outermost();  // some thread starts end with a zero return address instead of CFI
  }
}

// Walks the calling thread's own stack, from `sp` up to the top it registered.
inline table_walk walk_with_tables(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp, std::uintptr_t* frames,
                                   int capacity) noexcept {
  const std::uintptr_t stack_top = thread_stack_top;
  if (stack_top == 0 || sp < thread_stack_lowest || sp >= stack_top) return {};
  return walk_stack(pc, sp, bp, stack_memory{sp, stack_top, nullptr}, frames, capacity);
}

inline table_walk walk_with_tables(const ucontext_t& interrupted, std::uintptr_t* frames, int capacity) noexcept {
  return walk_with_tables(static_cast<std::uintptr_t>(interrupted.uc_mcontext.gregs[REG_RIP]),
                          static_cast<std::uintptr_t>(interrupted.uc_mcontext.gregs[REG_RSP]),
                          static_cast<std::uintptr_t>(interrupted.uc_mcontext.gregs[REG_RBP]), frames, capacity);
}

// Walks from the registers of the function this is inlined into (its frame is frame 0): the
// instruction address and the stack pointer are read at the same point, so the rows for that
// address describe that stack pointer.
[[gnu::always_inline]] inline table_walk walk_from_here(std::uintptr_t* frames, int capacity) noexcept {
  std::uintptr_t pc, sp, bp;
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
  return walk_with_tables(pc, sp, bp, frames, capacity);
}

// After a walk that missed something, queues every module and function of the stack another
// unwinder captured (return addresses; frames[0] an interrupted instruction when
// `first_is_exact`), so one build covers it all.
inline void want_tables_for(const std::uintptr_t* frames, int count, bool first_is_exact) noexcept {
  module_lookup module;
  for (int i = 0; i < count; ++i) {
    const std::uintptr_t lookup = i == 0 && first_is_exact ? frames[0] : frames[i] - 1;
    if (!module.find(lookup)) continue;
    if (module.index < 0) {
      if (module.eh_frame_hdr != 0) want_module(module.eh_frame_hdr);
      continue;
    }
    const auto& entry = unwind_tables.modules[module.index];
    std::uint32_t index = 0;
    if (function_index(entry, lookup, index) && entry.functions[index].load(std::memory_order_relaxed) == nullptr)
      want_function(module.index, index);
  }
}

#else
inline constexpr bool unwind_tables_at_build = false;
struct stack_memory {
  std::uintptr_t bottom = 0, top = 0;
  const unsigned char* copy = nullptr;
};
inline table_walk walk_stack(std::uintptr_t, std::uintptr_t, std::uintptr_t, const stack_memory&, std::uintptr_t*,
                             int) noexcept {
  return {};
}
inline table_walk walk_with_tables(std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t*, int) noexcept {
  return {};
}
inline table_walk walk_with_tables(const ucontext_t&, std::uintptr_t*, int) noexcept { return {}; }
inline table_walk walk_from_here(std::uintptr_t*, int) noexcept { return {}; }
inline void want_tables_for(const std::uintptr_t*, int, bool) noexcept {}
#endif

}  // namespace backtrace_detail

// Records the calling thread's stack bounds, so that samples of it can take the table walk.
// Not async-signal-safe (the main thread's bounds come from /proc/self/maps); call it on the
// thread, before sampling it. Repeated calls are harmless.
void unwind_tables_register_thread() noexcept;

// From now on, walks from a signal context try the tables and queue what they miss. Whoever
// calls it promises to call build_unwind_tables from time to time.
inline void use_unwind_tables() noexcept {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  backtrace_detail::unwind_tables.in_use.store(true, std::memory_order_relaxed);
#endif
}

// Whether walks queued something since the last build (cheap: one relaxed load).
inline bool unwind_tables_wanted() noexcept {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  return backtrace_detail::unwind_tables.wanted.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Compiles what walks queued; with `everything`, every function of every loaded module (for
// tests and benchmarks: milliseconds for libc and libstdc++), and uses the tables from then on.
// Not async-signal-safe; any thread.
void build_unwind_tables(bool everything = false);

// Another thread's stack, walked off that thread: its user registers and a copy of the top of its
// stack as the kernel took them at a sample (perf's PERF_SAMPLE_REGS_USER and STACK_USER), so a
// thread that blocks every signal can still be sampled. The same tables and walk as a signal
// handler's; what the tables lack is compiled here (this is no signal handler) and the walk
// tried until it goes no further. Return addresses from frame 1 on, as capture's: look them up one
// byte back. Not async-signal-safe.
//
// Where the walk stops short of the outermost frame (the copy ended, or a frame the tables cannot
// follow) and `frame_pointer_chain` is given (perf's PERF_SAMPLE_CALLCHAIN user part: the
// interrupted ip, then the return address beside each link of the rbp chain, which the kernel
// reads from the live stack, unbounded by the copy), the stack goes on with that chain from the
// link the walk stopped at: the frame pointer it held then, found among the links the copy holds
// or the first one beyond it.
struct copied_stack_walk {
  int count = 0;
  bool finished = false;     // reached the outermost frame or filled `frames`
  bool truncated = false;    // ended before the outermost frame (the copy, a frame, or `frames` ended)
  bool copy_ended = false;   // the walk needed words beyond the copy
  bool chain_ended = false;  // went on with the frame-pointer chain, which ended before the kernel's limit
  int chained = 0;           // frames from the frame-pointer chain
};
copied_stack_walk walk_copied_stack(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp, const void* stack_copy,
                                    std::size_t copy_size, std::uintptr_t* frames, int capacity,
                                    const std::uint64_t* frame_pointer_chain = nullptr, std::size_t chain_length = 0,
                                    std::size_t chain_limit = 0);

// What has been compiled so far.
backtrace_detail::unwind_table_counts unwind_table_counts();

}  // namespace kairos