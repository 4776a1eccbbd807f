#pragma once
// kairos::backtrace_symbolizer: turns captured addresses into module + offset, a demangled function
// name and, where DWARF exists, file:line. Deferred work, never called from the capture path: it
// allocates, reads files and takes locks. Results are cached per address; one instance may be
// shared between threads (a mutex guards it).
//
//   module + offset  dladdr1(RTLD_DL_LINKMAP): always, for any address inside a loaded object;
//                    the offset is the ELF virtual address (address - load bias), what
//                    `addr2line -e <module> <offset>` takes. Outside every object: "[unknown]".
//   function         the module's symbol table as libdwfl reads it (.symtab, also of separate
//                    debug files, else .dynsym and MiniDebugInfo's .gnu_debugdata), indexed
//                    once per module; else dladdr's dynamic symbol. Among aliases, the name a
//                    user searches for (preferred_alias); demangled, never with a version.
//   file:line        libdw (elfutils) line tables, found through build-id / .gnu_debuglink as
//                    well (Debian's -dbgsym packages); for inlined code, the call site inside the
//                    named function. Without libdw at build time: left empty.
//
// The work is compiled once, in the kairos::backtrace library (src/symbolizer.cpp); this header
// declares what callers use.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#ifndef KAIROS_BACKTRACE_HAVE_LIBDW
#if __has_include(<elfutils/libdwfl.h>)
#define KAIROS_BACKTRACE_HAVE_LIBDW 1
#else
#define KAIROS_BACKTRACE_HAVE_LIBDW 0
#endif
#endif

namespace kairos {

struct backtrace_symbol {
  std::uintptr_t address = 0;        // the address looked up
  std::string module;                // path of the object, or "[unknown]"
  std::uintptr_t module_offset = 0;  // ELF virtual address inside `module` (absolute if unknown)
  std::string function;              // demangled; empty if no symbol covers the address
  std::uintptr_t function_offset = 0;
  // Where file:line is not looked up in the module (or it has no DWARF): the addresses, in the
  // process, over which every address gets this same answer but for its own offsets. For a named
  // address its function's start up to its end or the next symbol, whichever is first; for an
  // unnamed one the gap between the symbols around it. Empty (begin == end) where unknown. What
  // lets symbol_cache answer addresses never seen.
  std::uintptr_t same_answer_begin = 0, same_answer_end = 0;
  bool has_same_answer_span() const noexcept { return same_answer_begin < same_answer_end; }
  // How the answer was made: libdw read the module's symbol table (false without libdw, for a
  // module libdw does not know, or when its files could not be opened, as in a program that holds
  // every descriptor it may), and found a separate debug file for it. symbol_cache keeps only
  // answers made with the table, and with the debug file where one exists.
  bool symbol_table_read = false, separate_debug_file_read = false;
  std::string file;  // empty without debug info
  int line = 0;
  bool from_jit_map = false;  // named by a JIT's perf map (/tmp/perf-<pid>.map), not by a module

  bool has_function() const noexcept { return !function.empty(); }
  bool has_source() const noexcept { return !file.empty() && line > 0; }
};

// Where file:line may come from. A separate debug file (under /usr/lib/debug: Debian's -dbgsym
// packages, libc6-dbg) has compressed DWARF sections that libdw inflates whole at the first line
// looked up in its library: a tenth of a second for libc's (docs/performance-log.md, "Measured
// reasons in the code"). Its symbol table is read either way.
enum class source_lines {
  all,  // the debug information of every module, separate debug files included
  own,  // only what a module carries itself (what a -g build has); none from separate files
  off,  // none: functions only
};

class backtrace_symbolizer {
 public:
  static constexpr bool file_line_available_at_build = KAIROS_BACKTRACE_HAVE_LIBDW != 0;

  // `keep_descriptor`: applied to every file descriptor libdw opens and keeps (the ELF and debug
  // files it reads), e.g. to move it out of the profiled program's way; nullptr keeps them as
  // opened. One policy per process (libdw's callbacks are plain functions).
  // `module_without_lines`: an address inside a module whose file:line is never looked up, only
  // its names (a profiler's own library, whose frames are not the user's code, and whose DWARF
  // was a noticeable part of a short run under kairos-run).
  explicit backtrace_symbolizer(int (*keep_descriptor)(int) = nullptr, source_lines lines = source_lines::all,
                                const void* module_without_lines = nullptr);
  ~backtrace_symbolizer();
  // Why file:line is not resolved here ("" when it is, or when libdw was not built in).
  static std::string file_line_problem();
  backtrace_symbolizer(const backtrace_symbolizer&) = delete;
  backtrace_symbolizer& operator=(const backtrace_symbolizer&) = delete;

  // Cached: the first lookup of an address does the work, later ones return the stored answer.
  // The reference stays valid until clear_cache() or the symbolizer's destruction.
  const backtrace_symbol& resolve(std::uintptr_t address);
  // Bypasses the per-address cache (libdw still keeps the line tables it already parsed).
  backtrace_symbol resolve_uncached(std::uintptr_t address);
  // A function's entry address (an instrumented function's): uncached, and without the search for
  // inlined code around the address, which an entry never lies in and which walks the whole
  // compilation unit's DIEs (most of the time of a lookup in template-heavy C++).
  backtrace_symbol resolve_function_entry(std::uintptr_t address);
  // Every frame of a capture, innermost first; return addresses are looked up one byte back.
  template <class Backtrace>
  std::vector<backtrace_symbol> resolve_all(const Backtrace& stack) {
    std::vector<backtrace_symbol> symbols;
    symbols.reserve(stack.size());
    for (std::size_t i = 0; i < stack.size(); ++i) symbols.push_back(resolve(stack.lookup_address(i)));
    return symbols;
  }

  // How many modules' symbol tables were read straight from their ELF data, and how many through
  // libdwfl, symbol by symbol (a table whose layout kairos does not recognize).
  struct symbol_table_reads {
    std::size_t direct = 0, through_libdwfl = 0;
  };
  symbol_table_reads symbol_tables_read() const;

  std::size_t cached_addresses() const;

  // The JIT symbol map (/tmp/perf-<pid>.map) read for addresses outside every loaded module: its
  // path, the functions it named, and the lines skipped as malformed (empty path: never needed).
  struct jit_map_use {
    std::string path;
    std::size_t functions = 0, malformed_lines = 0;
  };
  jit_map_use jit_map_used() const;
  void clear_cache();

  // How a module is named when the loader gives it no name: the program's own file.
  static std::string main_program_path();

  // Among aliases (symbols at one address), whether `a`'s name is the one a user searches for
  // rather than `b`'s. In order: a name exported from the module (global or weak alike: glibc
  // makes the documented name weak and its internal one global: write, __write) over a local
  // one (__cbrt, __wrap_scalbn); a default or unversioned name over a compatibility one, which
  // no program links anew (hypot@@GLIBC_2.35, not __hypot_finite@GLIBC_2.15); fewer leading
  // underscores (malloc, not __libc_malloc); the shorter name, without its version (cbrt, not
  // cbrtf64 or cbrtf32x; ldexp, not scalbn or ldexpf32x); then the first in byte order, so the
  // choice never depends on the table's order. perf's choice (non-weak first, then global, then
  // underscores, then the longest name) picks __cbrt, __wrap_scalbn and __libc_pwrite in glibc.
  static bool preferred_alias(std::string_view a, bool a_exported, std::string_view b, bool b_exported);

 private:
  class implementation;  // the cache, its mutex and libdw's session (src/symbolizer.cpp)
  std::unique_ptr<implementation> implementation_;
};

}  // namespace kairos
