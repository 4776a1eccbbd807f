// backtrace_symbolizer's work (see symbolizer.hpp): dladdr, libdw's symbol and line tables, and
// the per-address cache. Never called from a signal handler.
#include <kairos/plugins/backtrace/symbolizer.hpp>

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include <kairos/demangle.hpp>
#include <kairos/plugins/backtrace/dl_guard.hpp>

#include "perf_map.hpp"

#if KAIROS_BACKTRACE_HAVE_LIBDW
#include "libdw_functions.hpp"
#endif

namespace kairos {

class backtrace_symbolizer::implementation {
 public:
  implementation([[maybe_unused]] int (*keep_descriptor)(int), source_lines lines, const void* module_without_lines)
      : lines_{lines}, module_without_lines_{reinterpret_cast<std::uintptr_t>(module_without_lines)} {
#if KAIROS_BACKTRACE_HAVE_LIBDW
    if (dw_ == nullptr) return;
    kept_descriptor_policy() = keep_descriptor;
    if (keep_descriptor != nullptr) {
      callbacks_.find_elf = &find_elf_kept;
      callbacks_.find_debuginfo = &find_debuginfo_kept;
      callbacks_.debuginfo_path = nullptr;
      dwfl_ = dw_->dwfl_begin(&callbacks_);
      report_modules();
      return;
    }
    callbacks_.find_elf = dw_->dwfl_linux_proc_find_elf;
    // Separate debug files by build id (/usr/lib/debug/.build-id, where Debian's -dbgsym packages
    // put them), not dwfl_standard_find_debuginfo: that one falls back to debuginfod, which
    // dlopens libdebuginfod, libcurl, gnutls, Kerberos and LDAP (about 40 libraries, seen here)
    // into the profiled process, and may go to the network.
    callbacks_.find_debuginfo = dw_->dwfl_build_id_find_debuginfo;
    callbacks_.debuginfo_path = nullptr;
    dwfl_ = dw_->dwfl_begin(&callbacks_);
    report_modules();
#endif
  }
  ~implementation() {
#if KAIROS_BACKTRACE_HAVE_LIBDW
    if (dwfl_ != nullptr) dw_->dwfl_end(dwfl_);
#endif
  }

  const backtrace_symbol& resolve(std::uintptr_t address) {
    std::lock_guard lock(mutex_);
    if (auto found = cache_.find(address); found != cache_.end()) return found->second;
    return cache_.emplace(address, lookup(address)).first->second;
  }
  backtrace_symbol resolve_uncached(std::uintptr_t address) {
    std::lock_guard lock(mutex_);
    return lookup(address);
  }
  backtrace_symbol resolve_function_entry(std::uintptr_t address) {
    std::lock_guard lock(mutex_);
    return lookup(address, false);
  }
  symbol_table_reads symbol_tables_read() const {
    std::lock_guard lock(mutex_);
    return table_reads_;
  }

  jit_map_use jit_map_used() const {
    std::lock_guard lock(mutex_);
    if (!jit_map_) return {};
    return {jit_map_->path(), jit_map_->entries(), jit_map_->malformed_lines()};
  }

  std::size_t cached_addresses() const {
    std::lock_guard lock(mutex_);
    return cache_.size();
  }
  void clear_cache() {
    std::lock_guard lock(mutex_);
    cache_.clear();
  }

 private:
  // Code outside every module: a JIT's, named by its perf map when it writes one (a fork child
  // reads its own).
  void name_jit_code(std::uintptr_t address, backtrace_symbol& symbol) {
    if (!jit_map_ || jit_map_pid_ != getpid()) {
      jit_map_pid_ = getpid();
      jit_map_.emplace(jit_map_pid_);
    }
    const auto found = jit_map_->find(address);
    if (!found) {
      name_by_mapping(address, symbol);
      return;
    }
    symbol.module = jit_map_->path();
    symbol.function = found->name;
    symbol.function_offset = address - found->start;
    symbol.from_jit_map = true;
  }

  // Code outside every module that no perf map names (a JIT's stubs, one that writes no map): its
  // mapping's name in /proc/self/maps (a file, "[anon:NAME]"), or "[jit]" for nameless anonymous
  // code, as perf's "//anon". The maps are read again when an address is in none of those read.
  void name_by_mapping(std::uintptr_t address, backtrace_symbol& symbol) {
    auto holding = [&]() -> const std::pair<const std::uintptr_t, mapping>* {
      auto after = mappings_.upper_bound(address);
      if (after == mappings_.begin()) return nullptr;
      const auto& found = *std::prev(after);
      return address < found.second.end ? &found : nullptr;
    };
    const auto* found = holding();
    if (found == nullptr) {
      read_mappings();
      found = holding();
    }
    if (found == nullptr) return;
    symbol.module = found->second.name;
    symbol.module_offset = address - found->first;
  }
  struct mapping {
    std::uintptr_t end = 0;
    std::string name;
  };
  void read_mappings() {
    mappings_.clear();
    FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) return;
    char line[4096];
    while (std::fgets(line, sizeof line, maps) != nullptr) {
      unsigned long start = 0, end = 0;
      char permissions[8] = {};
      int name_at = 0;
      if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &start, &end, permissions, &name_at) < 3) continue;
      std::string name{line + name_at};
      while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
      if (name.empty()) name = permissions[2] == 'x' ? "[jit]" : "[anon]";
      mappings_[start] = mapping{end, std::move(name)};
    }
    std::fclose(maps);
  }

  backtrace_symbol lookup(std::uintptr_t address, [[maybe_unused]] bool inlined_call_sites = true) {
    dl_guard inside_loader;  // dladdr and libdw's module scan: a sample here must not use libunwind
    backtrace_symbol symbol;
    symbol.address = address;
    symbol.module = "[unknown]";
    symbol.module_offset = address;

    Dl_info info{};
    link_map* object = nullptr;
    const bool in_object =
        dladdr1(reinterpret_cast<void*>(address), &info, reinterpret_cast<void**>(&object), RTLD_DL_LINKMAP) != 0 &&
        object != nullptr;
    if (in_object) {
      symbol.module =
          object->l_name != nullptr && object->l_name[0] != '\0' ? std::string{object->l_name} : main_program_path();
      symbol.module_offset = address - static_cast<std::uintptr_t>(object->l_addr);
      if (info.dli_sname != nullptr) {
        symbol.function = kairos::demangle(info.dli_sname);
        symbol.function_offset = address - reinterpret_cast<std::uintptr_t>(info.dli_saddr);
      }
    } else {
      name_jit_code(address, symbol);
    }
#if KAIROS_BACKTRACE_HAVE_LIBDW
    if (dwfl_ != nullptr && in_object) {
      Dwfl_Module* module = dw_->dwfl_addrmodule(dwfl_, address);
      if (module == nullptr) {  // loaded after the last scan of /proc/self/maps
        report_modules();
        module = dw_->dwfl_addrmodule(dwfl_, address);
      }
      if (module != nullptr) {
        name_function(module, address, symbol);
        const char* debug_file = nullptr;
        dw_->dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
        symbol.separate_debug_file_read = debug_file != nullptr;
        if (wants_lines(module)) {
          if (Dwfl_Line* line = dw_->dwfl_module_getsrc(module, address)) {
            int line_number = 0;
            if (const char* file = dw_->dwfl_lineinfo(line, nullptr, &line_number, nullptr, nullptr, nullptr)) {
              symbol.file = file;
              symbol.line = line_number;
            }
          } else {
            line_without_address_ranges(module, address, symbol);
          }
          if (inlined_call_sites) use_call_site_of_inlined_code(module, address, symbol);
          // Each address has its own file:line, unless the module has no DWARF to give any.
          Dwarf_Addr bias = 0;
          if (symbol.has_source() || dw_->dwfl_module_getdwarf(module, &bias) != nullptr)
            symbol.same_answer_begin = symbol.same_answer_end = 0;
        }
      }
    }
#endif
    return symbol;
  }

#if KAIROS_BACKTRACE_HAVE_LIBDW
  // After the symbol lookup, which opens a stripped module's separate debug file for its symbol
  // table: a module whose debug file libdw found keeps its DWARF there.
  bool wants_lines(Dwfl_Module* module) const {
    if (module_without_lines_ != 0 && dw_->dwfl_addrmodule(dwfl_, module_without_lines_) == module) return false;
    if (lines_ != source_lines::own) return lines_ == source_lines::all;
    const char* debug_file = nullptr;
    dw_->dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
    return debug_file == nullptr;
  }
#endif

#if KAIROS_BACKTRACE_HAVE_LIBDW
  static int (*&kept_descriptor_policy())(int) {
    static int (*policy)(int) = nullptr;
    return policy;
  }
  static int keep(int fd) { return fd >= 0 && kept_descriptor_policy() ? kept_descriptor_policy()(fd) : fd; }
  static int find_elf_kept(Dwfl_Module* module, void** user_data, const char* name, Dwarf_Addr base, char** file_name,
                           Elf** elf) {
    return keep(backtrace_detail::libdw()->dwfl_linux_proc_find_elf(module, user_data, name, base, file_name, elf));
  }
  static int find_debuginfo_kept(Dwfl_Module* module, void** user_data, const char* name, Dwarf_Addr base,
                                 const char* file_name, const char* debuglink, GElf_Word crc,
                                 char** debuginfo_file_name) {
    return keep(backtrace_detail::libdw()->dwfl_build_id_find_debuginfo(module, user_data, name, base, file_name,
                                                                        debuglink, crc, debuginfo_file_name));
  }

  // The compilation unit holding `address`. libdw finds it through .debug_aranges, which clang
  // does not write unless asked (-gdwarf-aranges): then libdw 0.188 finds no unit, so no line, for
  // any address of a clang-built module. The fallback asks each unit of the module whether it
  // covers the address (its DW_AT_ranges or low/high pc), the units listed once per module.
  Dwarf_Die* unit_of(Dwfl_Module* module, std::uintptr_t address, Dwarf_Addr& bias) {
    if (Dwarf_Die* unit = dw_->dwfl_module_addrdie(module, address, &bias)) return unit;
    auto [entry, fresh] = units_without_ranges_.try_emplace(module);
    if (fresh) {
      Dwarf_Addr unit_bias = 0;
      for (Dwarf_Die* unit = dw_->dwfl_module_nextcu(module, nullptr, &unit_bias); unit != nullptr;
           unit = dw_->dwfl_module_nextcu(module, unit, &unit_bias))
        entry->second.emplace_back(unit, unit_bias);
    }
    for (const auto& [unit, unit_bias] : entry->second)
      if (dw_->dwarf_haspc(unit, address - unit_bias) == 1) {
        bias = unit_bias;
        return unit;
      }
    return nullptr;
  }

  void line_without_address_ranges(Dwfl_Module* module, std::uintptr_t address, backtrace_symbol& symbol) {
    Dwarf_Addr bias = 0;
    Dwarf_Die* unit = unit_of(module, address, bias);
    if (unit == nullptr) return;
    Dwarf_Line* line = dw_->dwarf_getsrc_die(unit, address - bias);
    int line_number = 0;
    if (line == nullptr || dw_->dwarf_lineno(line, &line_number) != 0) return;
    if (const char* file = dw_->dwarf_linesrc(line, nullptr, nullptr)) {
      symbol.file = file;
      symbol.line = line_number;
    }
  }

  // The line table names the innermost inlined code; the symbol names the function it was inlined
  // into. Keep them consistent: for inlined code, file:line is the call site of the outermost
  // inlined call, a line of `symbol.function` itself.
  void use_call_site_of_inlined_code(Dwfl_Module* module, std::uintptr_t address, backtrace_symbol& symbol) {
    Dwarf_Addr bias = 0;
    Dwarf_Die* unit = unit_of(module, address, bias);
    if (unit == nullptr) return;
    Dwarf_Die function;
    Dwarf_Die outermost_inlined;
    if (!function_holding(unit, address - bias, function) ||
        !find_outermost_inlined(&function, address - bias, outermost_inlined))
      return;
    Dwarf_Attribute attribute;
    Dwarf_Word call_file = 0;
    Dwarf_Word call_line = 0;
    Dwarf_Files* files = nullptr;
    std::size_t file_count = 0;
    if (dw_->dwarf_formudata(dw_->dwarf_attr(&outermost_inlined, DW_AT_call_file, &attribute), &call_file) == 0 &&
        dw_->dwarf_formudata(dw_->dwarf_attr(&outermost_inlined, DW_AT_call_line, &attribute), &call_line) == 0 &&
        dw_->dwarf_getsrcfiles(unit, &files, &file_count) == 0 && call_file < file_count) {
      if (const char* file = dw_->dwarf_filesrc(files, call_file, nullptr, nullptr)) {
        symbol.file = file;
        symbol.line = static_cast<int>(call_line);
      }
    }
  }

  // A unit's functions by address: the physical DIE tree (dwarf_getscopes follows abstract origins
  // instead), its subprograms at the top and in namespaces (class bodies are skipped: GCC puts
  // member definitions outside them), each range of each. Listed once a unit: the walk over every
  // DIE at the unit's top for each address was most of a lookup's time in template-heavy C++.
  struct function_range {
    Dwarf_Addr low = 0, high = 0;
    std::size_t order = 0;  // in the DIE tree: the first one holding an address wins, as before
    Dwarf_Die die{};
  };
  void collect_functions(Dwarf_Die* parent, std::vector<function_range>& functions) {
    Dwarf_Die child;
    if (dw_->dwarf_child(parent, &child) != 0) return;
    do {
      const int tag = dw_->dwarf_tag(&child);
      if (tag == DW_TAG_namespace) {
        collect_functions(&child, functions);
      } else if (tag == DW_TAG_subprogram) {
        Dwarf_Addr base = 0, low = 0, high = 0;
        const std::size_t order = functions.size();
        for (std::ptrdiff_t offset = 0; (offset = dw_->dwarf_ranges(&child, offset, &base, &low, &high)) > 0;)
          functions.push_back({low, high, order, child});
      }
    } while (dw_->dwarf_siblingof(&child, &child) == 0);
  }
  bool function_holding(Dwarf_Die* unit, Dwarf_Addr pc, Dwarf_Die& found) {
    auto [entry, fresh] = unit_functions_.try_emplace(unit->addr);
    auto& functions = entry->second;
    if (fresh) {
      collect_functions(unit, functions);
      std::sort(functions.begin(), functions.end(),
                [](const function_range& a, const function_range& b) { return a.low < b.low; });
    }
    const auto after = std::upper_bound(functions.begin(), functions.end(), pc,
                                        [](Dwarf_Addr a, const function_range& f) { return a < f.low; });
    const function_range* holding = nullptr;
    // Ranges do not overlap but in odd DWARF: the few before are checked, the first in the tree kept.
    for (auto it = after; it != functions.begin() && after - it < 8;) {
      --it;
      if (pc < it->high && (holding == nullptr || it->order < holding->order)) holding = &*it;
    }
    if (holding != nullptr) found = holding->die;
    return holding != nullptr;
  }
  // Inside a function: the first inlined call that contains `pc`, through lexical blocks.
  bool find_outermost_inlined(Dwarf_Die* parent, Dwarf_Addr pc, Dwarf_Die& found) {
    Dwarf_Die child;
    if (dw_->dwarf_child(parent, &child) != 0) return false;
    do {
      switch (dw_->dwarf_tag(&child)) {
        case DW_TAG_lexical_block:
          if (dw_->dwarf_haspc(&child, pc) == 1 && find_outermost_inlined(&child, pc, found)) return true;
          break;
        case DW_TAG_inlined_subroutine:
          if (dw_->dwarf_haspc(&child, pc) == 1) {
            found = child;
            return true;
          }
          break;
        default:
          break;
      }
    } while (dw_->dwarf_siblingof(&child, &child) == 0);
    return false;
  }

  // libdwfl's dwfl_module_addrinfo scans the module's whole symbol table at every call (libc's
  // separate debug file lists ten thousand symbols). A module's table is read once instead, sorted
  // by address, and searched: the cost of about three scans. Scanning a module's first few
  // addresses before indexing it made no difference to a short run, so every module is indexed on
  // its first address (figures: docs/performance-log.md, "Measured reasons in the code").
  void name_function(Dwfl_Module* module, std::uintptr_t address, backtrace_symbol& symbol) {
    auto& index = symbols_[module];
    if (!index) index = index_symbols(module);
    const auto& table = index->table;
    symbol.symbol_table_read = index->read;
    const auto after = std::upper_bound(table.begin(), table.end(), address,
                                        [](std::uintptr_t a, const indexed_symbol& s) { return a < s.start; });
    if (const auto* found = symbol_containing(table, address)) {
      symbol.function = kairos::demangle(found->name);  // a .symtab spells versions: "hypot@@GLIBC_2.35"
      if (found->plt_entry) symbol.function += "@plt";
      symbol.function_offset = address - found->start;
      // Up to the symbol's end or the next symbol's start, whichever comes first: over that
      // span symbol_containing finds this one. Not for an enclosing symbol found past the
      // nearest one's end (the span would not hold the address), nor for an unsized one whose
      // section is not known (it holds every address up to the next symbol, wherever that is).
      const auto* next = found + 1;
      const auto claimed = found->end != unknown_end ? found->end - found->start : 0;
      const auto to_next = next != table.data() + table.size() ? next->start - found->start : claimed;
      const auto extent = std::min<std::uintptr_t>(claimed, to_next);
      if (symbol.function_offset < extent) {
        symbol.same_answer_begin = found->start;
        symbol.same_answer_end = found->start + extent;
      }
    } else if (symbol.function.empty()) {
      // No symbol holds it: neither does one hold any address from the end of those
      // symbol_containing looked at (or the module's start) to the next symbol's start (or the
      // module's end), for none starts in between.
      Dwarf_Addr module_start = 0, module_end = 0;
      dw_->dwfl_module_info(module, nullptr, &module_start, &module_end, nullptr, nullptr, nullptr, nullptr);
      std::uintptr_t gap_begin = module_start;
      for (auto it = after; it != table.begin() && after - it < 9;) {
        --it;
        gap_begin = std::max<std::uintptr_t>(gap_begin, it->end != unknown_end ? it->end : it->start);
      }
      const std::uintptr_t gap_end = after != table.end() ? after->start : module_end;
      if (gap_begin <= address && address < gap_end) {
        symbol.same_answer_begin = gap_begin;
        symbol.same_answer_end = gap_end;
      }
    }
  }

  // A module's symbols sorted by address, read once.
  static constexpr GElf_Addr unknown_end = 0;
  struct indexed_symbol {
    GElf_Addr start = 0;         // in the process
    GElf_Xword size = 0;         // 0: unknown (extends to the next symbol, within its section)
    GElf_Addr end = 0;           // the end of what it may hold: start + size, or an unsized one's section's end
    bool exported = false;       // global or weak binding, not local
    bool plt_entry = false;      // a PLT entry, named by the function it jumps to: "name@plt"
    int index = 0;               // in the table
    const char* name = nullptr;  // in libdw's copy of the string table, valid while the module is
  };
  // Where each loaded section of one ELF file ends in the process, by section index.
  struct section_ends {
    std::vector<GElf_Addr> ends;  // unknown_end: not loaded, or no such section
    GElf_Addr end_of(GElf_Word section) const { return section < ends.size() ? ends[section] : unknown_end; }
  };
  section_ends sections_of(Elf* elf, Dwarf_Addr bias) const {
    section_ends found;
    found.ends.push_back(unknown_end);  // section 0, which elf_nextscn skips
    for (Elf_Scn* section = nullptr; (section = dw_->elf_nextscn(elf, section)) != nullptr;) {
      GElf_Shdr header{};
      const bool loaded = dw_->gelf_getshdr(section, &header) != nullptr && (header.sh_flags & SHF_ALLOC) != 0;
      found.ends.push_back(loaded ? header.sh_addr + header.sh_size + bias : unknown_end);
    }
    return found;
  }
  // The name's bytes are not read here: touching every name faults in the whole string table (a
  // megabyte of mangled names in a C++ library), the larger part of building the index.
  static bool indexed(const GElf_Sym& elf_symbol, GElf_Word section) {
    const int type = GELF_ST_TYPE(elf_symbol.st_info);
    return elf_symbol.st_name != 0 && section != SHN_UNDEF && section != SHN_ABS && type != STT_SECTION &&
           type != STT_FILE && type != STT_TLS;
  }
  // An unsized symbol (_init, hand-written assembly) holds the addresses up to the next symbol, but
  // never past its section's end: _init, the last symbol of .init, claimed the PLT stubs after it.
  static indexed_symbol index_entry(const GElf_Sym& elf_symbol, GElf_Addr start, int index, const char* name,
                                    const section_ends& ends, GElf_Word section) {
    const GElf_Addr end = elf_symbol.st_size != 0 ? start + elf_symbol.st_size : ends.end_of(section);
    return {start, elf_symbol.st_size, end, GELF_ST_BIND(elf_symbol.st_info) != STB_LOCAL, false, index, name};
  }
  // libdwfl's dwfl_module_getsym_info looks up each symbol's section and file; read straight from
  // the ELF data the same symbols cost a fifth of that, page faults included (figures:
  // docs/performance-log.md, "Measured reasons in the code"). Only where the table is
  // plainly the one libdwfl reads: a .symtab or .dynsym with exactly `count` entries in the file
  // holding the module's last symbol, whose first and last symbols kept have libdwfl's
  // addresses; else false.
  bool read_symbol_table(Dwfl_Module* module, int count, std::vector<indexed_symbol>& table) {
    if (count < 2) return false;
    GElf_Sym elf_symbol{};
    GElf_Addr start = 0;
    Elf* elf = nullptr;
    Dwarf_Addr bias = 0;
    if (dw_->dwfl_module_getsym_info(module, count - 1, &elf_symbol, &start, nullptr, &elf, &bias) == nullptr ||
        elf == nullptr)
      return false;
    Elf_Scn* symbols = nullptr;
    GElf_Shdr header{};
    for (Elf_Scn* section_entry = nullptr; (section_entry = dw_->elf_nextscn(elf, section_entry)) != nullptr;) {
      GElf_Shdr candidate{};
      if (dw_->gelf_getshdr(section_entry, &candidate) == nullptr || candidate.sh_entsize == 0 ||
          (candidate.sh_type != SHT_SYMTAB && candidate.sh_type != SHT_DYNSYM) ||
          candidate.sh_size / candidate.sh_entsize != static_cast<GElf_Xword>(count))
        continue;
      if (symbols == nullptr || candidate.sh_type == SHT_SYMTAB) {
        symbols = section_entry;
        header = candidate;
      }
    }
    if (symbols == nullptr) return false;
    Elf_Data* data = dw_->elf_getdata(symbols, nullptr);
    Elf_Scn* strings = dw_->elf_getscn(elf, header.sh_link);
    Elf_Data* names = strings != nullptr ? dw_->elf_getdata(strings, nullptr) : nullptr;
    if (data == nullptr || names == nullptr || names->d_buf == nullptr) return false;
    const auto* name_bytes = static_cast<const char*>(names->d_buf);
    const auto ends = sections_of(elf, bias);
    for (int i = 1; i < count; ++i) {
      if (dw_->gelf_getsym(data, i, &elf_symbol) == nullptr || elf_symbol.st_shndx == SHN_XINDEX) return false;
      if (elf_symbol.st_name < names->d_size && indexed(elf_symbol, elf_symbol.st_shndx))
        table.push_back(index_entry(elf_symbol, elf_symbol.st_value + bias, i, name_bytes + elf_symbol.st_name, ends,
                                    elf_symbol.st_shndx));
    }
    if (table.empty()) return true;
    // The first and last symbols kept, as libdwfl reads them: same file, same address.
    for (const auto* kept : {&table.front(), &table.back()}) {
      Elf* kept_elf = nullptr;
      if (dw_->dwfl_module_getsym_info(module, kept->index, &elf_symbol, &start, nullptr, &kept_elf, nullptr) ==
              nullptr ||
          kept_elf != elf || start != kept->start)
        return false;
    }
    return true;
  }
  // PLT entries named as perf and objdump name them, "callee@plt". Without them a sample in a
  // stub went to the nearest symbol before it: _init in an executable (the demo showed it at 2.3%).
  // An entry is decoded rather than counted, for the order of .plt.got's entries follows no table:
  // its jump goes through a GOT slot, which a relocation names (R_X86_64_JUMP_SLOT in .rela.plt
  // for .plt and IBT's .plt.sec; R_X86_64_GLOB_DAT in .rela.dyn for .plt.got, the entries of
  // functions whose address is also taken). IBT's lazy .plt entries jump to PLT0, through no slot:
  // they push their .rela.plt index. PLT0, lazy binding's call into the loader, matches neither
  // and stays unnamed. Entry sizes are the sections' own (8 or 16 bytes in .plt.got). x86-64 only:
  // elsewhere PLT stubs stay unnamed, and no symbol claims them (index_entry).
  void add_plt_entries([[maybe_unused]] Dwfl_Module* module, [[maybe_unused]] int first_index,
                       [[maybe_unused]] std::vector<indexed_symbol>& table) {
#if defined(__x86_64__)
    Dwarf_Addr bias = 0;
    Elf* elf = dw_->dwfl_module_getelf(module, &bias);
    std::size_t names_section = 0;
    if (elf == nullptr || dw_->elf_getshdrstrndx(elf, &names_section) != 0) return;
    const Elf_Data* section_names = data_of(elf, names_section);
    if (section_names == nullptr) return;
    auto name_of = [&](const GElf_Shdr& header) -> std::string_view {
      if (header.sh_name >= section_names->d_size) return {};
      const auto* names = static_cast<const char*>(section_names->d_buf);
      return {names + header.sh_name, strnlen(names + header.sh_name, section_names->d_size - header.sh_name)};
    };
    std::unordered_map<GElf_Addr, const char*> callee_by_slot;
    std::vector<const char*> lazy_callees;  // by .rela.plt index
    std::vector<std::pair<GElf_Shdr, const Elf_Data*>> stub_sections;
    for (Elf_Scn* section = nullptr; (section = dw_->elf_nextscn(elf, section)) != nullptr;) {
      GElf_Shdr header{};
      if (dw_->gelf_getshdr(section, &header) == nullptr) continue;
      const auto name = name_of(header);
      if (header.sh_type == SHT_RELA) {
        add_relocated_callees(elf, section, header, name == ".rela.plt" ? &lazy_callees : nullptr, callee_by_slot);
      } else if (header.sh_type == SHT_PROGBITS && header.sh_entsize != 0 &&
                 (name == ".plt" || name == ".plt.sec" || name == ".plt.got")) {
        if (const Elf_Data* code = dw_->elf_getdata(section, nullptr); code != nullptr && code->d_buf != nullptr)
          stub_sections.emplace_back(header, code);
      }
    }
    int index = first_index;
    for (const auto& [header, code] : stub_sections) {
      const auto* bytes = static_cast<const unsigned char*>(code->d_buf);
      const std::size_t size = std::min<std::size_t>(code->d_size, header.sh_size);
      for (std::size_t offset = 0; offset + header.sh_entsize <= size; offset += header.sh_entsize) {
        const GElf_Addr entry = header.sh_addr + offset;
        const char* callee = plt_entry_callee(bytes + offset, header.sh_entsize, entry, callee_by_slot, lazy_callees);
        if (callee == nullptr) continue;
        const GElf_Addr start = entry + bias;
        table.push_back({start, header.sh_entsize, start + header.sh_entsize, false, true, index++, callee});
      }
    }
#endif
  }
#if defined(__x86_64__)
  const Elf_Data* data_of(Elf* elf, std::size_t section_index) const {
    Elf_Scn* section = dw_->elf_getscn(elf, section_index);
    const Elf_Data* data = section != nullptr ? dw_->elf_getdata(section, nullptr) : nullptr;
    return data != nullptr && data->d_buf != nullptr ? data : nullptr;
  }
  // The functions a relocation section's jump slots and GOT entries are for, by slot address.
  void add_relocated_callees(Elf* elf, Elf_Scn* section, const GElf_Shdr& header, std::vector<const char*>* in_order,
                             std::unordered_map<GElf_Addr, const char*>& callee_by_slot) const {
    Elf_Data* relocations = dw_->elf_getdata(section, nullptr);
    Elf_Scn* symbols_section = dw_->elf_getscn(elf, header.sh_link);
    GElf_Shdr symbols_header{};
    if (relocations == nullptr || symbols_section == nullptr ||
        dw_->gelf_getshdr(symbols_section, &symbols_header) == nullptr || header.sh_entsize == 0)
      return;
    Elf_Data* symbols = dw_->elf_getdata(symbols_section, nullptr);
    const Elf_Data* names = data_of(elf, symbols_header.sh_link);
    if (symbols == nullptr || names == nullptr) return;
    const auto count = static_cast<int>(relocations->d_size / header.sh_entsize);
    for (int i = 0; i < count; ++i) {
      GElf_Rela relocation{};
      GElf_Sym symbol{};
      const char* callee = nullptr;
      if (dw_->gelf_getrela(relocations, i, &relocation) != nullptr &&
          dw_->gelf_getsym(symbols, static_cast<int>(GELF_R_SYM(relocation.r_info)), &symbol) != nullptr &&
          symbol.st_name != 0 && symbol.st_name < names->d_size)
        callee = static_cast<const char*>(names->d_buf) + symbol.st_name;
      const auto type = GELF_R_TYPE(relocation.r_info);
      if (in_order != nullptr) in_order->push_back(type == R_X86_64_JUMP_SLOT ? callee : nullptr);
      if (callee != nullptr && (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT))
        callee_by_slot.emplace(relocation.r_offset, callee);
    }
  }
  // An entry's callee, from its code: [endbr64] [bnd] jmp *slot(%rip), or IBT's lazy entry,
  // endbr64; push $index; bnd jmp PLT0. Null for PLT0 and anything else.
  static const char* plt_entry_callee(const unsigned char* entry, std::size_t size, GElf_Addr address,
                                      const std::unordered_map<GElf_Addr, const char*>& callee_by_slot,
                                      const std::vector<const char*>& lazy_callees) {
    static constexpr unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    std::size_t at = size >= sizeof endbr64 && std::memcmp(entry, endbr64, sizeof endbr64) == 0 ? sizeof endbr64 : 0;
    if (at < size && entry[at] == 0xf2) ++at;  // bnd
    if (at + 6 <= size && entry[at] == 0xff && entry[at + 1] == 0x25) {
      std::int32_t displacement = 0;
      std::memcpy(&displacement, entry + at + 2, sizeof displacement);
      const auto found = callee_by_slot.find(address + at + 6 + static_cast<GElf_Sxword>(displacement));
      return found != callee_by_slot.end() ? found->second : nullptr;
    }
    if (at + 5 <= size && entry[at] == 0x68) {
      std::uint32_t index = 0;
      std::memcpy(&index, entry + at + 1, sizeof index);
      return index < lazy_callees.size() ? lazy_callees[index] : nullptr;
    }
    return nullptr;
  }
#endif
  struct symbol_index {
    std::vector<indexed_symbol> table;
    bool read = false;  // the module's table was found and read (else the table is empty)
  };
  symbol_index index_symbols(Dwfl_Module* module) {
    std::vector<indexed_symbol> table;
    const int count = dw_->dwfl_module_getsymtab(module);
    table.reserve(count > 0 ? static_cast<std::size_t>(count) : 0);
    if (read_symbol_table(module, count, table)) {
      ++table_reads_.direct;
    } else {
      ++table_reads_.through_libdwfl;
      table.clear();
      std::unordered_map<Elf*, section_ends> ends;  // symbols may come from two files (MiniDebugInfo)
      for (int i = 1; i < count; ++i) {             // entry 0 is the null symbol
        GElf_Sym elf_symbol{};
        GElf_Addr start = 0;
        GElf_Word section = 0;
        Elf* elf = nullptr;
        Dwarf_Addr bias = 0;
        const char* name = dw_->dwfl_module_getsym_info(module, i, &elf_symbol, &start, &section, &elf, &bias);
        if (name == nullptr || !indexed(elf_symbol, section)) continue;
        auto [file_ends, fresh] = ends.try_emplace(elf);
        if (fresh && elf != nullptr) file_ends->second = sections_of(elf, bias);
        table.push_back(index_entry(elf_symbol, start, i, name, file_ends->second, section));
      }
    }
    add_plt_entries(module, count, table);
    // One symbol per address: a sized one, then the name users search for (preferred_alias).
    // Sorted by address alone; names are compared only among aliases.
    std::sort(table.begin(), table.end(), [](const indexed_symbol& a, const indexed_symbol& b) {
      return a.start != b.start ? a.start < b.start : a.index < b.index;
    });
    auto better = [](const indexed_symbol& a, const indexed_symbol& b) {
      if (a.plt_entry != b.plt_entry) return !a.plt_entry;  // a symbol the file names itself first
      if ((a.size != 0) != (b.size != 0)) return a.size != 0;
      return preferred_alias(a.name, a.exported, b.name, b.exported);
    };
    std::size_t kept = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (kept > 0 && table[kept - 1].start == table[i].start) {
        if (better(table[i], table[kept - 1])) table[kept - 1] = table[i];
      } else {
        table[kept++] = table[i];
      }
    }
    table.resize(kept);
    return {std::move(table), count > 0};
  }

  // The symbol whose extent holds `address`; else the nearest unsized one before it, within its
  // section; else none.
  static const indexed_symbol* symbol_containing(const std::vector<indexed_symbol>& table, std::uintptr_t address) {
    auto after = std::upper_bound(table.begin(), table.end(), address,
                                  [](std::uintptr_t a, const indexed_symbol& s) { return a < s.start; });
    if (after == table.begin()) return nullptr;
    const auto& nearest = *(after - 1);
    if (nearest.end == unknown_end || address < nearest.end) return &nearest;
    // Past the nearest symbol's end: inside an enclosing one that starts earlier, if any (rare:
    // a few steps back cover the nestings compilers emit).
    for (auto it = after - 1; it != table.begin() && (after - it) <= 8;) {
      --it;
      if (it->size != 0 && address < it->end) return &*it;
    }
    return nullptr;
  }

  void report_modules() {
    if (dwfl_ == nullptr) return;
    // A module dropped by the new report may leave its address (and its Dwfl_Module*) to another.
    units_without_ranges_.clear();
    unit_functions_.clear();
    symbols_.clear();
    dw_->dwfl_report_begin(dwfl_);
    std::string maps = loaded_object_mappings();
    if (FILE* text = fmemopen(maps.data(), maps.size(), "r")) {
      dw_->dwfl_linux_proc_maps_report(dwfl_, text);
      std::fclose(text);
    }
    dw_->dwfl_report_end(dwfl_, nullptr, nullptr);
  }

  // The lines of /proc/self/maps that lie inside a loaded object's segments. libdw maps the ELF
  // and debug files it reads (privately, the whole file): to libdwfl's scan of the maps those
  // look like more segments of the same object, and one that lands right below the object's
  // first segment moves the module's start and bias, and its file:line is lost (1 run in 4 here,
  // with a second symbolizer, as ASLR placed the mapping).
  static std::string loaded_object_mappings() {
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> segments;
    dl_iterate_phdr(
        [](dl_phdr_info* object, std::size_t, void* argument) -> int {
          auto& found = *static_cast<std::vector<std::pair<std::uintptr_t, std::uintptr_t>>*>(argument);
          const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
          for (int i = 0; i < object->dlpi_phnum; ++i) {
            const auto& segment = object->dlpi_phdr[i];
            if (segment.p_type != PT_LOAD) continue;
            const std::uintptr_t start = object->dlpi_addr + segment.p_vaddr;
            found.emplace_back(start & ~(page - 1), (start + segment.p_memsz + page - 1) & ~(page - 1));
          }
          return 0;
        },
        &segments);
    std::string kept;
    FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) return kept;
    char* line = nullptr;
    std::size_t capacity = 0;
    while (getline(&line, &capacity, maps) > 0) {
      char* end = nullptr;
      const auto low = static_cast<std::uintptr_t>(std::strtoull(line, &end, 16));
      const auto high = static_cast<std::uintptr_t>(std::strtoull(end + 1, nullptr, 16));
      for (const auto& [start, stop] : segments)
        if (low >= start && high <= stop) {
          kept += line;
          break;
        }
    }
    std::free(line);
    std::fclose(maps);
    return kept;
  }
  const backtrace_detail::libdw_functions* dw_ = backtrace_detail::libdw();
  Dwfl_Callbacks callbacks_{};
  Dwfl* dwfl_ = nullptr;
  std::unordered_map<Dwfl_Module*, std::vector<std::pair<Dwarf_Die*, Dwarf_Addr>>> units_without_ranges_;
  std::unordered_map<const void*, std::vector<function_range>> unit_functions_;  // by the unit DIE's address
  std::unordered_map<Dwfl_Module*, std::optional<symbol_index>> symbols_;        // built on first use
#endif
  symbol_table_reads table_reads_;
  source_lines lines_;
  std::uintptr_t module_without_lines_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uintptr_t, backtrace_symbol> cache_;
  std::optional<backtrace_detail::perf_map> jit_map_;  // made at the first address outside every module
  pid_t jit_map_pid_ = 0;
  std::map<std::uintptr_t, mapping> mappings_;  // /proc/self/maps by start, read at the first address no map names
};

backtrace_symbolizer::backtrace_symbolizer(int (*keep_descriptor)(int), source_lines lines,
                                           const void* module_without_lines)
    : implementation_{std::make_unique<implementation>(keep_descriptor, lines, module_without_lines)} {}
backtrace_symbolizer::~backtrace_symbolizer() = default;

std::string backtrace_symbolizer::file_line_problem() {
#if KAIROS_BACKTRACE_HAVE_LIBDW
  return backtrace_detail::libdw_problem().text();
#else
  return {};
#endif
}

const backtrace_symbol& backtrace_symbolizer::resolve(std::uintptr_t address) {
  return implementation_->resolve(address);
}
backtrace_symbol backtrace_symbolizer::resolve_uncached(std::uintptr_t address) {
  return implementation_->resolve_uncached(address);
}
backtrace_symbol backtrace_symbolizer::resolve_function_entry(std::uintptr_t address) {
  return implementation_->resolve_function_entry(address);
}
backtrace_symbolizer::symbol_table_reads backtrace_symbolizer::symbol_tables_read() const {
  return implementation_->symbol_tables_read();
}
std::size_t backtrace_symbolizer::cached_addresses() const { return implementation_->cached_addresses(); }
backtrace_symbolizer::jit_map_use backtrace_symbolizer::jit_map_used() const { return implementation_->jit_map_used(); }
void backtrace_symbolizer::clear_cache() { implementation_->clear_cache(); }

std::string backtrace_symbolizer::main_program_path() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string{"[main program]"} : path.string();
}

bool backtrace_symbolizer::preferred_alias(std::string_view a, bool a_exported, std::string_view b, bool b_exported) {
  if (a_exported != b_exported) return a_exported;
  auto compatibility_only = [](std::string_view name) {
    const auto at = name.find('@');
    return at != std::string_view::npos && name.substr(at, 2) != "@@";
  };
  if (compatibility_only(a) != compatibility_only(b)) return !compatibility_only(a);
  a = a.substr(0, a.find('@'));
  b = b.substr(0, b.find('@'));
  const auto a_underscores = a.find_first_not_of('_'), b_underscores = b.find_first_not_of('_');
  if (a_underscores != b_underscores) return a_underscores < b_underscores;
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace kairos
