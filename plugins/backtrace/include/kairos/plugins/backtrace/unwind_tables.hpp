#pragma once
// Unwind tables compiled per function, so that a sampling handler walks the interrupted thread's
// stack without interpreting DWARF and without entering the loader (x86-64, glibc 2.35 or later).
//
// Why: libgcc's _Unwind_Backtrace interprets every frame's call-frame instructions at every
// sample, ≈ 135 ns a frame (2.7 µs for 20 frames in bench_backtrace, 5.6 µs a sample in situ),
// and libunwind's faster path can deadlock against dlclose (capture.hpp).
//
// How:
// * Off the sampling path, a function's FDE in .eh_frame is compiled once into rows, one per
//   address range: the frame's CFA is rsp or rbp plus an offset, the return address lies at
//   CFA - 8, and rbp was saved at CFA + n or is unchanged. What such a row cannot say (a CFA
//   expression, a signal frame, a PLT stub, a realigned stack, an unusual register rule) makes
//   the function one the walk cannot follow.
// * Only the functions samples pass through are compiled (tens in a run, against 8,500 FDEs in
//   libkairos.so alone; compiling whole modules cost 3 ms for libc and libstdc++ here).
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
// * Anything else (no module, an unknown function, a stack pointer off the registered stack)
//   ends the walk unfinished, and the caller unwinds with libgcc instead.
// * The same walk reads a copy of another thread's stack (walk_copied_stack: a perf sample's user
//   registers and stack copy), off that thread; what that copy holds bounds it instead.
#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__linux__) && __has_include(<link.h>)
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#endif

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define KAIROS_BACKTRACE_HAVE_UNWIND_TABLES 1
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include <unistd.h>
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
  std::uintptr_t map_start = 0;     // _dl_find_object's dlfo_map_start
  std::uintptr_t eh_frame_hdr = 0;  // and dlfo_eh_frame: together, the module's key
  std::uintptr_t bias = 0;          // the load bias: starts and rows are offsets from it
  std::uint32_t count = 0;          // functions (FDEs)
  const std::uint32_t* starts = nullptr;           // sorted, a copy of eh_frame_hdr's
  std::atomic<const function_rows*>* functions = nullptr;  // null until compiled
};

// Modules are filled once and published by `published`; functions by their pointer. One builder
// at a time (under `building`), handlers read without a lock.
struct unwind_registry {
  static constexpr int capacity = 256;
  static constexpr int wanted_modules_capacity = 32;
  static constexpr int wanted_functions_capacity = 1024;
  module_entry modules[capacity];
  std::atomic<int> published{0};
  std::atomic<bool> in_use{false};   // someone builds tables: walks are worth trying
  std::atomic<bool> wanted{false};   // something was queued since the last build
  std::atomic<std::uintptr_t> wanted_modules[wanted_modules_capacity] = {};   // eh_frame_hdr
  std::atomic<std::uint64_t> wanted_functions[wanted_functions_capacity] = {}; // module + 1 << 32 | function
  std::mutex building;
  unwind_table_counts counts;  // under `building`
};
inline unwind_registry unwind_tables;

// The registered thread's stack, [lowest, top); top 0: not registered, libgcc unwinds. A stack
// pointer outside it (a sigaltstack, a coroutine's stack) may have unmapped memory above it.
[[gnu::tls_model("initial-exec")]] inline thread_local std::uintptr_t thread_stack_lowest = 0;
[[gnu::tls_model("initial-exec")]] inline thread_local std::uintptr_t thread_stack_top = 0;

// --- compiling (not async-signal-safe) -------------------------------------------------------

// Reads DWARF's encodings from a bounded range; a read past `end` clears `ok` and returns 0.
struct cfi_reader {
  const std::uint8_t* at;
  const std::uint8_t* end;
  bool ok = true;

  template <class T>
  T fixed() {
    if (static_cast<std::size_t>(end - at) < sizeof(T)) return fail<T>();
    T value;
    std::memcpy(&value, at, sizeof(T));
    at += sizeof(T);
    return value;
  }
  std::uint64_t uleb() {
    std::uint64_t value = 0;
    for (int shift = 0; at < end && shift < 64; shift += 7) {
      const std::uint8_t byte = *at++;
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return fail<std::uint64_t>();
  }
  std::int64_t sleb() {
    std::int64_t value = 0;
    int shift = 0;
    while (at < end && shift < 64) {
      const std::uint8_t byte = *at++;
      value |= static_cast<std::int64_t>(byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) {
        if (shift < 64 && (byte & 0x40) != 0) value |= -(std::int64_t{1} << shift);
        return value;
      }
    }
    return fail<std::int64_t>();
  }
  void skip(std::uint64_t bytes) {
    if (static_cast<std::uint64_t>(end - at) < bytes) {
      ok = false;
      at = end;
    } else {
      at += bytes;
    }
  }
  // A pointer in DW_EH_PE encoding: the value format in the low nibble, what it is relative to
  // in the high one. Text- and function-relative encodings are not used on x86-64 Linux.
  std::uintptr_t encoded(std::uint8_t encoding, std::uintptr_t data_base = 0) {
    if (encoding == 0xff) return 0;  // DW_EH_PE_omit
    const auto field = reinterpret_cast<std::uintptr_t>(at);
    std::uintptr_t value = 0;
    switch (encoding & 0x0f) {
      case 0x00: value = fixed<std::uint64_t>(); break;                               // absptr
      case 0x01: value = uleb(); break;                                               // uleb128
      case 0x02: value = fixed<std::uint16_t>(); break;                               // udata2
      case 0x03: value = fixed<std::uint32_t>(); break;                               // udata4
      case 0x04: value = fixed<std::uint64_t>(); break;                               // udata8
      case 0x09: value = static_cast<std::uintptr_t>(sleb()); break;                  // sleb128
      case 0x0a: value = static_cast<std::uintptr_t>(fixed<std::int16_t>()); break;  // sdata2
      case 0x0b: value = static_cast<std::uintptr_t>(fixed<std::int32_t>()); break;  // sdata4
      case 0x0c: value = static_cast<std::uintptr_t>(fixed<std::int64_t>()); break;  // sdata8
      default: return fail<std::uintptr_t>();
    }
    switch (encoding & 0x70) {
      case 0x00: break;                         // absolute
      case 0x10: value += field; break;         // pcrel
      case 0x30: value += data_base; break;     // datarel (eh_frame_hdr's table)
      default: return fail<std::uintptr_t>();
    }
    return value;  // DW_EH_PE_indirect (0x80) is only used for personality routines, never read
  }

 private:
  template <class T>
  T fail() {
    ok = false;
    at = end;
    return T{};
  }
};

// What the call-frame instructions say at one address, for the registers the walk needs.
struct cfi_state {
  enum class saved : std::uint8_t { unchanged, at_offset, undefined, other };
  std::uint64_t cfa_register = 7;
  std::int64_t cfa_offset = 8;
  bool cfa_is_expression = false;
  saved rbp = saved::unchanged;
  std::int64_t rbp_offset = 0;
  saved return_address = saved::other;
  std::int64_t return_address_offset = 0;

  unwind_row row(std::uint32_t start) const {
    unwind_row result;
    result.start = start;
    if (return_address == saved::undefined) {
      result.rule = unwind_rule::end_of_stack;
      return result;
    }
    const bool cfa_known = !cfa_is_expression && (cfa_register == 6 || cfa_register == 7) && cfa_offset >= 0 &&
                           cfa_offset <= INT16_MAX;
    const bool return_address_known = return_address == saved::at_offset && return_address_offset == -8;
    const bool rbp_known = rbp == saved::unchanged ||
                           (rbp == saved::at_offset && rbp_offset != 0 && rbp_offset >= INT8_MIN && rbp_offset <= INT8_MAX);
    if (!cfa_known || !return_address_known || !rbp_known) return result;
    result.rule = cfa_register == 7 ? unwind_rule::cfa_from_rsp : unwind_rule::cfa_from_rbp;
    result.cfa_offset = static_cast<std::int16_t>(cfa_offset);
    result.rbp_offset = rbp == saved::at_offset ? static_cast<std::int8_t>(rbp_offset) : std::int8_t{0};
    return result;
  }
};

struct common_information_entry {
  std::uint64_t code_alignment = 1;
  std::int64_t data_alignment = -8;
  std::uint64_t return_address_register = 16;
  std::uint8_t pointer_encoding = 0;  // DW_EH_PE_absptr unless 'R' says otherwise
  bool has_augmentation_data = false;
  bool signal_frame = false;
  const std::uint8_t* instructions = nullptr;
  const std::uint8_t* end = nullptr;
};

// Parses the CIE at `at` (its length field). False for what this reader does not know.
inline bool read_cie(const std::uint8_t* at, const std::uint8_t* section_end, common_information_entry& cie) {
  cfi_reader reader{at, section_end};
  std::uint64_t length = reader.fixed<std::uint32_t>();
  if (length == 0xffffffff) length = reader.fixed<std::uint64_t>();
  if (!reader.ok || length > static_cast<std::uint64_t>(section_end - reader.at)) return false;
  reader.end = reader.at + length;
  if (reader.fixed<std::uint32_t>() != 0) return false;  // a CIE's id is 0 in .eh_frame
  const auto version = reader.fixed<std::uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* augmentation = reinterpret_cast<const char*>(reader.at);
  const auto augmentation_length = strnlen(augmentation, static_cast<std::size_t>(reader.end - reader.at));
  reader.skip(augmentation_length + 1);
  cie.code_alignment = reader.uleb();
  cie.data_alignment = reader.sleb();
  cie.return_address_register = version == 1 ? reader.fixed<std::uint8_t>() : reader.uleb();
  if (augmentation[0] == 'z') {
    cie.has_augmentation_data = true;
    const auto data_length = reader.uleb();
    const std::uint8_t* data_end = reader.at + data_length;
    for (std::size_t i = 1; i < augmentation_length && reader.ok; ++i) {
      switch (augmentation[i]) {
        case 'R': cie.pointer_encoding = reader.fixed<std::uint8_t>(); break;
        case 'L': reader.fixed<std::uint8_t>(); break;
        case 'P': reader.encoded(reader.fixed<std::uint8_t>() & 0x7f); break;  // skipped, never dereferenced
        case 'S': cie.signal_frame = true; break;
        case 'B': break;
        default: return false;
      }
    }
    if (!reader.ok || data_end > reader.end) return false;
    reader.at = data_end;
  } else if (augmentation[0] != '\0') {
    return false;  // "eh" and older forms: not emitted by current compilers
  }
  cie.instructions = reader.at;
  cie.end = reader.end;
  return reader.ok;
}

// Runs call-frame instructions up to the end of `reader`, appending a row at every address where
// the state changes. `initial` is the CIE's state (what DW_CFA_restore returns to); `emit` is
// called as emit(address, state) for the state that holds from `address` on.
template <class Emit>
bool run_cfa_program(cfi_reader& reader, const common_information_entry& cie, cfi_state& state,
                     const cfi_state& initial, std::uintptr_t& location, Emit&& emit) {
  constexpr int stack_depth = 16;
  cfi_state remembered[stack_depth];
  int remembered_count = 0;
  auto set_offset = [&](std::uint64_t reg, std::int64_t offset) {
    if (reg == 6) state.rbp = cfi_state::saved::at_offset, state.rbp_offset = offset;
    if (reg == cie.return_address_register) state.return_address = cfi_state::saved::at_offset, state.return_address_offset = offset;
  };
  auto set_rule = [&](std::uint64_t reg, cfi_state::saved rule) {
    if (reg == 6) state.rbp = rule;
    if (reg == cie.return_address_register) state.return_address = rule;
  };
  auto restore = [&](std::uint64_t reg) {
    if (reg == 6) state.rbp = initial.rbp, state.rbp_offset = initial.rbp_offset;
    if (reg == cie.return_address_register)
      state.return_address = initial.return_address, state.return_address_offset = initial.return_address_offset;
  };
  auto advance = [&](std::uint64_t delta) {
    emit(location, state);
    location += delta * cie.code_alignment;
  };
  while (reader.at < reader.end && reader.ok) {
    const std::uint8_t opcode = reader.fixed<std::uint8_t>();
    const std::uint8_t operand = opcode & 0x3f;
    switch (opcode >> 6) {
      case 1: advance(operand); continue;                                                  // advance_loc
      case 2: set_offset(operand, static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment); continue;  // offset
      case 3: restore(operand); continue;                                                  // restore
      default: break;
    }
    switch (opcode) {
      case 0x00: break;                                                                    // nop
      case 0x01: {                                                                         // set_loc
        emit(location, state);
        location = reader.encoded(cie.pointer_encoding);
        break;
      }
      case 0x02: advance(reader.fixed<std::uint8_t>()); break;   // advance_loc1
      case 0x03: advance(reader.fixed<std::uint16_t>()); break;  // advance_loc2
      case 0x04: advance(reader.fixed<std::uint32_t>()); break;  // advance_loc4
      case 0x05: {                                               // offset_extended
        const auto reg = reader.uleb();
        set_offset(reg, static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment);
        break;
      }
      case 0x06: restore(reader.uleb()); break;                                 // restore_extended
      case 0x07: set_rule(reader.uleb(), cfi_state::saved::undefined); break;   // undefined
      case 0x08: set_rule(reader.uleb(), cfi_state::saved::unchanged); break;   // same_value
      case 0x09: {                                                              // register
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.uleb();
        break;
      }
      case 0x0a:  // remember_state
        if (remembered_count == stack_depth) return false;
        remembered[remembered_count++] = state;
        break;
      case 0x0b: {  // restore_state: the CFA rule comes back too, as GCC's output expects
        if (remembered_count == 0) return false;
        state = remembered[--remembered_count];
        break;
      }
      case 0x0c:  // def_cfa
        state.cfa_register = reader.uleb();
        state.cfa_offset = static_cast<std::int64_t>(reader.uleb());
        state.cfa_is_expression = false;
        break;
      case 0x0d: state.cfa_register = reader.uleb(); state.cfa_is_expression = false; break;  // def_cfa_register
      case 0x0e: state.cfa_offset = static_cast<std::int64_t>(reader.uleb()); break;         // def_cfa_offset
      case 0x0f: state.cfa_is_expression = true; reader.skip(reader.uleb()); break;          // def_cfa_expression
      case 0x10:                                                                              // expression
      case 0x16: {                                                                            // val_expression
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.skip(reader.uleb());
        break;
      }
      case 0x11: {  // offset_extended_sf
        const auto reg = reader.uleb();
        set_offset(reg, reader.sleb() * cie.data_alignment);
        break;
      }
      case 0x12:  // def_cfa_sf
        state.cfa_register = reader.uleb();
        state.cfa_offset = reader.sleb() * cie.data_alignment;
        state.cfa_is_expression = false;
        break;
      case 0x13: state.cfa_offset = reader.sleb() * cie.data_alignment; break;  // def_cfa_offset_sf
      case 0x14:                                                                 // val_offset
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.uleb();
        break;
      case 0x15:  // val_offset_sf
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.sleb();
        break;
      case 0x2e: reader.uleb(); break;  // GNU_args_size
      case 0x2f: {                      // GNU_negative_offset_extended
        const auto reg = reader.uleb();
        set_offset(reg, -static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment);
        break;
      }
      default: return false;  // an opcode of another architecture or a newer DWARF
    }
  }
  return reader.ok;
}


// Compiles the FDE at `at` into `rows` (cleared first). Returns the function's end, an offset
// from `bias`; `rows` is left empty when the walk cannot follow the function, and the end is 0
// when the FDE cannot be read at all.
inline std::uint32_t compile_fde(const std::uint8_t* at, const std::uint8_t* section_begin, const std::uint8_t* section_end,
                                 std::uintptr_t bias, std::vector<unwind_row>& rows) {
  rows.clear();
  cfi_reader reader{at, section_end};
  std::uint64_t length = reader.fixed<std::uint32_t>();
  if (length == 0xffffffff) length = reader.fixed<std::uint64_t>();
  if (!reader.ok || length == 0 || length > static_cast<std::uint64_t>(section_end - reader.at)) return 0;
  reader.end = reader.at + length;
  const std::uint8_t* id_field = reader.at;
  const auto cie_offset = reader.fixed<std::uint32_t>();
  if (cie_offset == 0 || cie_offset > static_cast<std::uintptr_t>(id_field - section_begin)) return 0;
  common_information_entry cie;
  if (!read_cie(id_field - cie_offset, section_end, cie)) return 0;
  const std::uintptr_t begin = reader.encoded(cie.pointer_encoding);
  const std::uintptr_t range = reader.encoded(cie.pointer_encoding & 0x0f);
  if (cie.has_augmentation_data) reader.skip(reader.uleb());
  if (!reader.ok || begin < bias || begin + range - bias > UINT32_MAX) return 0;
  const std::uintptr_t end = begin + range;
  if (cie.signal_frame) return static_cast<std::uint32_t>(end - bias);  // its caller is in a saved context

  auto push = [&](std::uintptr_t address, const unwind_row& row) {
    const auto start = static_cast<std::uint32_t>(address - bias);
    if (!rows.empty() && rows.back().start == start) rows.pop_back();
    if (!rows.empty() && rows.back().rule == row.rule && rows.back().cfa_offset == row.cfa_offset &&
        rows.back().rbp_offset == row.rbp_offset)
      return;  // the same rule goes on
    auto kept = row;
    kept.start = start;
    rows.push_back(kept);
  };
  cfi_state state;
  std::uintptr_t location = begin;
  auto nothing = [](std::uintptr_t, const cfi_state&) {};
  cfi_reader initial_program{cie.instructions, cie.end};
  bool readable = run_cfa_program(initial_program, cie, state, state, location, nothing);
  const cfi_state initial = state;
  location = begin;
  auto emit = [&](std::uintptr_t address, const cfi_state& now) {
    if (address >= begin && address < end) push(address, now.row(0));
  };
  readable = readable && run_cfa_program(reader, cie, state, initial, location, emit);
  if (readable && location < end) emit(location, state);
  // A function with one unknown row is libgcc's whole: fewer cases for the walk to tell apart.
  const bool followable = readable && std::none_of(rows.begin(), rows.end(), [](const unwind_row& row) {
                            return row.rule == unwind_rule::unknown;
                          });
  if (!followable) rows.clear();
  return static_cast<std::uint32_t>(end - bias);
}

// A module's eh_frame_hdr: where .eh_frame begins and its sorted table of FDEs (count 0 when the
// header is missing, unsearchable, or in an encoding this reader does not know).
struct frame_table {
  const std::uint8_t* section_begin = nullptr;
  const std::uint8_t* section_end = nullptr;  // the end of the loaded segment that holds .eh_frame
  const std::uint8_t* entries = nullptr;      // count pairs of int32: function start, FDE address
  std::uintptr_t data_base = 0;               // what the entries are relative to
  std::uintptr_t count = 0;

  std::uintptr_t function_start(std::uintptr_t i) const { return data_base + entry(i, 0); }
  const std::uint8_t* fde(std::uintptr_t i) const { return reinterpret_cast<const std::uint8_t*>(data_base + entry(i, 1)); }

 private:
  std::uintptr_t entry(std::uintptr_t i, int field) const {
    std::int32_t value;
    std::memcpy(&value, entries + i * 8 + static_cast<std::uintptr_t>(field) * 4, sizeof value);
    return static_cast<std::uintptr_t>(static_cast<std::intptr_t>(value));
  }
};
inline frame_table read_frame_table(const dl_phdr_info& module, const ElfW(Phdr) & eh_frame_header) {
  frame_table table;
  const auto* header = reinterpret_cast<const std::uint8_t*>(module.dlpi_addr + eh_frame_header.p_vaddr);
  const auto* header_end = header + eh_frame_header.p_memsz;
  constexpr std::uint8_t datarel_sdata4 = 0x3b;  // what every linker writes for a searchable table
  if (eh_frame_header.p_memsz < 4 || header[0] != 1 || header[3] != datarel_sdata4) return table;
  cfi_reader reader{header + 4, header_end};
  const auto data_base = reinterpret_cast<std::uintptr_t>(header);
  const auto* section_begin = reinterpret_cast<const std::uint8_t*>(reader.encoded(header[1], data_base));
  const auto count = reader.encoded(header[2], data_base);
  if (!reader.ok || count > static_cast<std::uintptr_t>(header_end - reader.at) / 8) return table;
  // .eh_frame's end is not in the header: reads stay inside the loaded segment that holds it.
  for (int i = 0; i < module.dlpi_phnum; ++i) {
    const auto& segment = module.dlpi_phdr[i];
    const auto* segment_begin = reinterpret_cast<const std::uint8_t*>(module.dlpi_addr + segment.p_vaddr);
    if (segment.p_type == PT_LOAD && section_begin >= segment_begin && section_begin < segment_begin + segment.p_filesz)
      table.section_end = segment_begin + segment.p_filesz;
  }
  if (table.section_end == nullptr) return table;
  table.section_begin = section_begin;
  table.entries = reader.at;
  table.data_base = data_base;
  table.count = count;
  return table;
}

inline std::uintptr_t module_map_start(const dl_phdr_info& module) {
  std::uintptr_t lowest = UINTPTR_MAX;
  for (int i = 0; i < module.dlpi_phnum; ++i)
    if (module.dlpi_phdr[i].p_type == PT_LOAD) lowest = std::min<std::uintptr_t>(lowest, module.dlpi_phdr[i].p_vaddr);
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return module.dlpi_addr + (lowest & ~(page - 1));
}

inline int registered_index(std::uintptr_t map_start, std::uintptr_t eh_frame_hdr) noexcept {
  const int published = unwind_tables.published.load(std::memory_order_acquire);
  for (int i = 0; i < published; ++i) {
    const auto& module = unwind_tables.modules[i];
    if (module.eh_frame_hdr == eh_frame_hdr && module.map_start == map_start) return i;
  }
  return -1;
}

// Registers a module: its function starts copied, nothing compiled. False when it has no
// searchable table or the registry is full. Under `building`.
inline bool register_module(const dl_phdr_info& module, const frame_table& table, std::uintptr_t map_start,
                            std::uintptr_t eh_frame_hdr) {
  auto& registry = unwind_tables;
  const int index = registry.published.load(std::memory_order_relaxed);
  if (index == unwind_registry::capacity || table.count == 0 || table.count > UINT32_MAX) return false;
  auto* starts = new std::uint32_t[table.count];
  for (std::uintptr_t i = 0; i < table.count; ++i) {
    const auto start = table.function_start(i);
    if (start < module.dlpi_addr || start - module.dlpi_addr > UINT32_MAX) {
      delete[] starts;
      return false;
    }
    starts[i] = static_cast<std::uint32_t>(start - module.dlpi_addr);
  }
  auto* functions = new std::atomic<const function_rows*>[table.count];
  for (std::uintptr_t i = 0; i < table.count; ++i) functions[i].store(nullptr, std::memory_order_relaxed);
  auto& entry = registry.modules[index];
  entry.map_start = map_start;
  entry.eh_frame_hdr = eh_frame_hdr;
  entry.bias = module.dlpi_addr;
  entry.count = static_cast<std::uint32_t>(table.count);
  entry.starts = starts;
  entry.functions = functions;
  registry.published.store(index + 1, std::memory_order_release);
  ++registry.counts.modules;
  return true;
}

// Compiles one function of a registered module (never again once compiled). Under `building`.
inline void compile_function(const module_entry& entry, const frame_table& table, std::uint32_t index,
                             std::vector<unwind_row>& scratch) {
  if (index >= entry.count || entry.functions[index].load(std::memory_order_relaxed) != nullptr) return;
  const auto* fde = table.fde(index);
  std::uint32_t end = 0;
  if (fde >= table.section_begin && fde < table.section_end)
    end = compile_fde(fde, table.section_begin, table.section_end, entry.bias, scratch);
  if (end == 0 || scratch.empty() || scratch.front().start != entry.starts[index]) scratch.clear();
  auto* rows = scratch.empty() ? nullptr : new unwind_row[scratch.size()];
  std::copy(scratch.begin(), scratch.end(), rows);
  entry.functions[index].store(new function_rows{end, static_cast<std::uint32_t>(scratch.size()), rows},
                               std::memory_order_release);
  auto& counts = unwind_tables.counts;
  ++counts.functions;
  counts.rows += static_cast<std::int64_t>(scratch.size());
}

// Registers the wanted modules and compiles the wanted functions (every function of every
// module when `everything`), inside dl_iterate_phdr. Under `building`.
inline void build_wanted(bool everything) {
  auto& registry = unwind_tables;
  registry.wanted.store(false, std::memory_order_relaxed);
  struct pass {
    bool everything;
    std::vector<unwind_row> scratch;
  } state{everything, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* module, std::size_t, void* argument) -> int {
        auto& pass_state = *static_cast<pass*>(argument);
        auto& registry = unwind_tables;
        const ElfW(Phdr)* header = nullptr;
        for (int i = 0; i < module->dlpi_phnum; ++i)
          if (module->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) header = &module->dlpi_phdr[i];
        if (header == nullptr) return 0;
        const std::uintptr_t eh_frame_hdr = module->dlpi_addr + header->p_vaddr;
        const std::uintptr_t map_start = module_map_start(*module);
        int index = registered_index(map_start, eh_frame_hdr);
        const auto table = read_frame_table(*module, *header);
        if (index < 0) {
          bool wanted = pass_state.everything;
          for (auto& slot : registry.wanted_modules)
            if (slot.load(std::memory_order_relaxed) == eh_frame_hdr) wanted = true, slot.store(0, std::memory_order_relaxed);
          if (!wanted || !register_module(*module, table, map_start, eh_frame_hdr)) return 0;
          index = registry.published.load(std::memory_order_relaxed) - 1;
        }
        const auto& entry = registry.modules[index];
        if (pass_state.everything) {
          for (std::uint32_t i = 0; i < entry.count; ++i) compile_function(entry, table, i, pass_state.scratch);
          return 0;
        }
        for (auto& slot : registry.wanted_functions) {
          const auto wanted = slot.load(std::memory_order_relaxed);
          if (wanted == 0 || static_cast<int>(wanted >> 32) != index + 1) continue;
          compile_function(entry, table, static_cast<std::uint32_t>(wanted), pass_state.scratch);
          slot.store(0, std::memory_order_relaxed);
        }
        return 0;
      },
      &state);
  // What is left was queued for modules unloaded since.
  for (auto& slot : registry.wanted_modules) slot.store(0, std::memory_order_relaxed);
  for (auto& slot : registry.wanted_functions) slot.store(0, std::memory_order_relaxed);
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
  int index = -1;            // registered module, or -1
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
// for when it gives up.
inline table_walk walk_stack(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp, const stack_memory& stack,
                             std::uintptr_t* frames, int capacity) noexcept {
  table_walk walk;
  if (!unwind_tables.in_use.load(std::memory_order_relaxed)) return walk;
  module_lookup module;
  for (bool first = true;; first = false) {
    if (walk.count == capacity) {
      walk.truncated = true;
      walk.end = walk_end::finished;
      return walk;
    }
    frames[walk.count++] = pc;
    const std::uintptr_t lookup = first ? pc : pc - 1;  // a return address's call lies before it
    if (!module.find(lookup)) return walk;
    if (module.index < 0) {
      if (module.eh_frame_hdr == 0) return walk;
      want_module(module.eh_frame_hdr);
      walk.end = walk_end::missing;
      return walk;
    }
    const auto& entry = unwind_tables.modules[module.index];
    std::uint32_t index = 0;
    if (!function_index(entry, lookup, index)) return walk;
    const function_rows* function = entry.functions[index].load(std::memory_order_acquire);
    if (function == nullptr) {
      want_function(module.index, index);
      walk.end = walk_end::missing;
      return walk;
    }
    const auto offset = static_cast<std::uint32_t>(lookup - entry.bias);
    if (function->count == 0 || offset >= function->end) return walk;
    const unwind_row* row = function->rows + function->count - 1;
    while (row->start > offset) --row;  // rows[0] starts at the function's start, at or before offset
    if (row->rule == unwind_rule::end_of_stack) {
      walk.end = walk_end::finished;
      return walk;
    }
    const std::uintptr_t cfa = (row->rule == unwind_rule::cfa_from_rsp ? sp : bp) + static_cast<std::uintptr_t>(row->cfa_offset);
    const std::uintptr_t return_address_at = cfa - sizeof(std::uintptr_t);
    if (cfa <= sp || !stack.holds(return_address_at)) return walk;
    if (row->rbp_offset != 0) {
      const std::uintptr_t rbp_at = cfa + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(row->rbp_offset));
      if (!stack.holds(rbp_at)) return walk;
      bp = stack.word(rbp_at);
    }
    pc = stack.word(return_address_at);
    sp = cfa;
    if (pc == 0) {  // some thread starts end with a zero return address instead of CFI
      walk.end = walk_end::finished;
      return walk;
    }
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
inline void unwind_tables_register_thread() noexcept {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  if (backtrace_detail::thread_stack_top != 0) return;
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return;
  void* lowest = nullptr;
  std::size_t size = 0;
  if (pthread_attr_getstack(&attributes, &lowest, &size) == 0) {
    backtrace_detail::thread_stack_lowest = reinterpret_cast<std::uintptr_t>(lowest);
    backtrace_detail::thread_stack_top = reinterpret_cast<std::uintptr_t>(lowest) + size;
  }
  pthread_attr_destroy(&attributes);
#endif
}

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
// tests and benchmarks: 3 ms for libc and libstdc++ here), and uses the tables from then on.
// Not async-signal-safe; any thread.
inline void build_unwind_tables(bool everything = false) {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  auto& registry = backtrace_detail::unwind_tables;
  std::lock_guard lock{registry.building};
  if (everything) registry.in_use.store(true, std::memory_order_relaxed);
  else if (!registry.wanted.load(std::memory_order_relaxed)) return;
  backtrace_detail::build_wanted(everything);
#else
  (void)everything;
#endif
}

// Another thread's stack, walked off that thread: its user registers and a copy of the top of its
// stack as the kernel took them at a sample (perf's PERF_SAMPLE_REGS_USER and STACK_USER), so a
// thread that blocks every signal can still be sampled. The same tables and walk as a signal
// handler's; what the tables lack is compiled here (this is no signal handler) and the walk
// tried until it goes no further. Frames beyond the copy are cut off: `truncated` says so. Return addresses from
// frame 1 on, as capture's: look them up one byte back. Not async-signal-safe.
struct copied_stack_walk {
  int count = 0;
  bool finished = false;   // reached the outermost frame or filled `frames`
  bool truncated = false;  // the copy or `frames` ended before the outermost frame
};
inline copied_stack_walk walk_copied_stack(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp,
                                           const void* stack_copy, std::size_t copy_size, std::uintptr_t* frames,
                                           int capacity) {
  const backtrace_detail::stack_memory stack{sp, sp + copy_size, static_cast<const unsigned char*>(stack_copy)};
  auto walk = backtrace_detail::walk_stack(pc, sp, bp, stack, frames, capacity);
  // Each build compiles the function (or module) the walk stopped at, so the walk gets further
  // each time; a stack's first sample pays for all of it, later ones find it compiled.
  for (int builds = 0; walk.end == backtrace_detail::walk_end::missing && builds < 2 * capacity; ++builds) {
    build_unwind_tables();
    walk = backtrace_detail::walk_stack(pc, sp, bp, stack, frames, capacity);
  }
  // Unfinished: most often the copy ended (the kernel copies a fixed size).
  return {walk.count, walk.finished(), walk.truncated || !walk.finished()};
}

// What has been compiled so far.
inline backtrace_detail::unwind_table_counts unwind_table_counts() {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  std::lock_guard lock{backtrace_detail::unwind_tables.building};
  return backtrace_detail::unwind_tables.counts;
#else
  return {};
#endif
}

}  // namespace kairos
