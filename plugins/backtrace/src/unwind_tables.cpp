// The unwind tables' compiler and builder (see unwind_tables.hpp): not async-signal-safe, called
// from build_unwind_tables and walk_copied_stack, never from a signal handler.
#include <kairos/plugins/backtrace/unwind_tables.hpp>

#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>
#endif

namespace kairos {

namespace backtrace_detail {

#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
constinit unwind_registry unwind_tables;

namespace {

std::mutex building;        // one builder at a time
unwind_table_counts built;  // under `building`

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
      case 0x00:
        value = fixed<std::uint64_t>();
        break;  // absptr
      case 0x01:
        value = uleb();
        break;  // uleb128
      case 0x02:
        value = fixed<std::uint16_t>();
        break;  // udata2
      case 0x03:
        value = fixed<std::uint32_t>();
        break;  // udata4
      case 0x04:
        value = fixed<std::uint64_t>();
        break;  // udata8
      case 0x09:
        value = static_cast<std::uintptr_t>(sleb());
        break;  // sleb128
      case 0x0a:
        value = static_cast<std::uintptr_t>(fixed<std::int16_t>());
        break;  // sdata2
      case 0x0b:
        value = static_cast<std::uintptr_t>(fixed<std::int32_t>());
        break;  // sdata4
      case 0x0c:
        value = static_cast<std::uintptr_t>(fixed<std::int64_t>());
        break;  // sdata8
      default:
        return fail<std::uintptr_t>();
    }
    switch (encoding & 0x70) {
      case 0x00:
        break;  // absolute
      case 0x10:
        value += field;
        break;  // pcrel
      case 0x30:
        value += data_base;
        break;  // datarel (eh_frame_hdr's table)
      default:
        return fail<std::uintptr_t>();
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
    const bool cfa_known =
        !cfa_is_expression && (cfa_register == 6 || cfa_register == 7) && cfa_offset >= 0 && cfa_offset <= INT16_MAX;
    const bool return_address_known = return_address == saved::at_offset && return_address_offset == -8;
    const bool rbp_known = rbp == saved::unchanged || (rbp == saved::at_offset && rbp_offset != 0 &&
                                                       rbp_offset >= INT8_MIN && rbp_offset <= INT8_MAX);
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
bool read_cie(const std::uint8_t* at, const std::uint8_t* section_end, common_information_entry& cie) {
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
        case 'R':
          cie.pointer_encoding = reader.fixed<std::uint8_t>();
          break;
        case 'L':
          reader.fixed<std::uint8_t>();
          break;
        case 'P':
          reader.encoded(reader.fixed<std::uint8_t>() & 0x7f);
          break;  // skipped, never dereferenced
        case 'S':
          cie.signal_frame = true;
          break;
        case 'B':
          break;
        default:
          return false;
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
// called as emit(address, state) for the state that holds from `address` on. It stays long because
// it is one switch over DWARF's call-frame opcodes, a few lines each, all acting on the same state
// and remembered-state stack: split, each piece would take them all as arguments.
template <class Emit>
bool run_cfa_program(cfi_reader& reader, const common_information_entry& cie, cfi_state& state,
                     const cfi_state& initial, std::uintptr_t& location, Emit&& emit) {
  constexpr int stack_depth = 16;
  cfi_state remembered[stack_depth];
  int remembered_count = 0;
  auto set_offset = [&](std::uint64_t reg, std::int64_t offset) {
    if (reg == 6) state.rbp = cfi_state::saved::at_offset, state.rbp_offset = offset;
    if (reg == cie.return_address_register)
      state.return_address = cfi_state::saved::at_offset, state.return_address_offset = offset;
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
      case 1:
        advance(operand);
        continue;  // advance_loc
      case 2:
        set_offset(operand, static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment);
        continue;  // offset
      case 3:
        restore(operand);
        continue;  // restore
      default:
        break;
    }
    switch (opcode) {
      case 0x00:
        break;      // nop
      case 0x01: {  // set_loc
        emit(location, state);
        location = reader.encoded(cie.pointer_encoding);
        break;
      }
      case 0x02:
        advance(reader.fixed<std::uint8_t>());
        break;  // advance_loc1
      case 0x03:
        advance(reader.fixed<std::uint16_t>());
        break;  // advance_loc2
      case 0x04:
        advance(reader.fixed<std::uint32_t>());
        break;      // advance_loc4
      case 0x05: {  // offset_extended
        const auto reg = reader.uleb();
        set_offset(reg, static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment);
        break;
      }
      case 0x06:
        restore(reader.uleb());
        break;  // restore_extended
      case 0x07:
        set_rule(reader.uleb(), cfi_state::saved::undefined);
        break;  // undefined
      case 0x08:
        set_rule(reader.uleb(), cfi_state::saved::unchanged);
        break;      // same_value
      case 0x09: {  // register
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
      case 0x0d:
        state.cfa_register = reader.uleb();
        state.cfa_is_expression = false;
        break;  // def_cfa_register
      case 0x0e:
        state.cfa_offset = static_cast<std::int64_t>(reader.uleb());
        break;  // def_cfa_offset
      case 0x0f:
        state.cfa_is_expression = true;
        reader.skip(reader.uleb());
        break;      // def_cfa_expression
      case 0x10:    // expression
      case 0x16: {  // val_expression
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
      case 0x13:
        state.cfa_offset = reader.sleb() * cie.data_alignment;
        break;    // def_cfa_offset_sf
      case 0x14:  // val_offset
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.uleb();
        break;
      case 0x15:  // val_offset_sf
        set_rule(reader.uleb(), cfi_state::saved::other);
        reader.sleb();
        break;
      case 0x2e:
        reader.uleb();
        break;      // GNU_args_size
      case 0x2f: {  // GNU_negative_offset_extended
        const auto reg = reader.uleb();
        set_offset(reg, -static_cast<std::int64_t>(reader.uleb()) * cie.data_alignment);
        break;
      }
      default:
        return false;  // an opcode of another architecture or a newer DWARF
    }
  }
  return reader.ok;
}

// Compiles the FDE at `at` into `rows` (cleared first). Returns the function's end, an offset
// from `bias`; `rows` is left empty when the walk cannot follow the function, and the end is 0
// when the FDE cannot be read at all.
std::uint32_t compile_fde(const std::uint8_t* at, const std::uint8_t* section_begin, const std::uint8_t* section_end,
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
  const std::uint8_t* fde(std::uintptr_t i) const {
    return reinterpret_cast<const std::uint8_t*>(data_base + entry(i, 1));
  }

 private:
  std::uintptr_t entry(std::uintptr_t i, int field) const {
    std::int32_t value;
    std::memcpy(&value, entries + i * 8 + static_cast<std::uintptr_t>(field) * 4, sizeof value);
    return static_cast<std::uintptr_t>(static_cast<std::intptr_t>(value));
  }
};
frame_table read_frame_table(const dl_phdr_info& module, const ElfW(Phdr) & eh_frame_header) {
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

std::uintptr_t module_map_start(const dl_phdr_info& module) {
  std::uintptr_t lowest = UINTPTR_MAX;
  for (int i = 0; i < module.dlpi_phnum; ++i)
    if (module.dlpi_phdr[i].p_type == PT_LOAD) lowest = std::min<std::uintptr_t>(lowest, module.dlpi_phdr[i].p_vaddr);
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return module.dlpi_addr + (lowest & ~(page - 1));
}

// Registers a module: its function starts copied, nothing compiled. False when it has no
// searchable table or the registry is full. Under `building`.
bool register_module(const dl_phdr_info& module, const frame_table& table, std::uintptr_t map_start,
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
  ++built.modules;
  return true;
}

// Compiles one function of a registered module (never again once compiled). Under `building`.
void compile_function(const module_entry& entry, const frame_table& table, std::uint32_t index,
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
  ++built.functions;
  built.rows += static_cast<std::int64_t>(scratch.size());
}

// Registers the wanted modules and compiles the wanted functions (every function of every
// module when `everything`), inside dl_iterate_phdr. Under `building`.
void build_wanted(bool everything) {
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
            if (slot.load(std::memory_order_relaxed) == eh_frame_hdr)
              wanted = true, slot.store(0, std::memory_order_relaxed);
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

}  // namespace
#endif

}  // namespace backtrace_detail

void unwind_tables_register_thread() noexcept {
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

void build_unwind_tables(bool everything) {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  auto& registry = backtrace_detail::unwind_tables;
  std::lock_guard lock{backtrace_detail::building};
  if (everything)
    registry.in_use.store(true, std::memory_order_relaxed);
  else if (!registry.wanted.load(std::memory_order_relaxed))
    return;
  backtrace_detail::build_wanted(everything);
#else
  (void)everything;
#endif
}

#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
namespace {
// The index in `chain` of the return address beside the rbp link `wanted`: the links are followed
// from `bp` through the copy (chain[k + 1] lies beside link k), and each return address the copy
// holds must be the chain's (else the chain is not this stack's); 0 when `wanted` is no link.
std::size_t chain_index_of(const backtrace_detail::stack_memory& stack, std::uintptr_t bp, std::uintptr_t wanted,
                           const std::uint64_t* chain, std::size_t length) {
  for (std::size_t k = 0; k + 1 < length; ++k) {
    if (bp == wanted) return k + 1;
    if (!stack.holds(bp) || !stack.holds(bp + sizeof(std::uintptr_t))) return 0;
    if (stack.word(bp + sizeof(std::uintptr_t)) != chain[k + 1]) return 0;
    const std::uintptr_t next = stack.word(bp);
    if (next <= bp) return 0;
    bp = next;
  }
  return 0;
}
}  // namespace
#endif

copied_stack_walk walk_copied_stack(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t bp, const void* stack_copy,
                                    std::size_t copy_size, std::uintptr_t* frames, int capacity,
                                    const std::uint64_t* frame_pointer_chain, std::size_t chain_length,
                                    std::size_t chain_limit) {
  const backtrace_detail::stack_memory stack{sp, sp + copy_size, static_cast<const unsigned char*>(stack_copy)};
  auto walk = backtrace_detail::walk_stack(pc, sp, bp, stack, frames, capacity);
  // Each build compiles the function (or module) the walk stopped at, so the walk gets further
  // each time; a stack's first sample pays for all of it, later ones find it compiled.
  for (int builds = 0; walk.end == backtrace_detail::walk_end::missing && builds < 2 * capacity; ++builds) {
    build_unwind_tables();
    walk = backtrace_detail::walk_stack(pc, sp, bp, stack, frames, capacity);
  }
  copied_stack_walk result{walk.count, walk.outermost || walk.truncated, !walk.outermost, walk.beyond_top, false, 0};
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  if (walk.outermost || walk.truncated || walk.count == 0 || chain_length < 2 || frame_pointer_chain[0] != pc)
    return result;
  const std::size_t first = chain_index_of(stack, bp, walk.last_bp, frame_pointer_chain, chain_length);
  if (first == 0) return result;
  for (std::size_t k = first; k < chain_length && result.count < capacity; ++k, ++result.chained)
    frames[result.count++] = static_cast<std::uintptr_t>(frame_pointer_chain[k]);
  // A chain the kernel ended before its limit ended where the frame pointers do: as far as perf
  // sees, the outermost frame.
  result.chain_ended = result.count < capacity && (chain_limit == 0 || chain_length < chain_limit);
  result.finished = result.chain_ended || result.count == capacity;
  result.truncated = !result.chain_ended;
#else
  (void)frame_pointer_chain, (void)chain_length, (void)chain_limit;
#endif
  return result;
}

backtrace_detail::unwind_table_counts unwind_table_counts() {
#if KAIROS_BACKTRACE_HAVE_UNWIND_TABLES
  std::lock_guard lock{backtrace_detail::building};
  return backtrace_detail::built;
#else
  return {};
#endif
}

}  // namespace kairos
