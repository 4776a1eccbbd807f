#pragma once
// kairos::symbol_cache: backtrace_symbolizer's answers kept on disk from one run to the next, one
// file per module, so that a run whose addresses were all seen before never loads libdw (into its
// own namespace) nor reads a symbol table or a line table, each milliseconds of a short run's
// start (docs/performance-log.md, "Measured reasons in the code"). perf keeps its build-id cache
// for the same reason.
//
// Key: the module's GNU build id, read from its note in memory, and the symbolizer's variant (its
// source_lines choice). A file also records the module file's and its separate debug file's size
// and modification time (/usr/lib/debug/.build-id/xx/yyyy.debug, where the symbolizer finds
// it): `strip` keeps the build id of what it strips, and a -dbgsym package installed since gives
// names and lines the file lacks; either makes the file stale, and it is rewritten. A module with
// no build id is never cached. Module paths are not stored: the same build may load from anywhere.
//
// A file is text: a header line, one line per address (module offset, function offset, the span
// of its answer as begin and end module offsets, line, function, file; tab-separated,
// hexadecimal offsets), and an "end <count>" line. An answer with a span (where no file:line is
// looked up: a named function, or a gap no symbol covers) also answers every other address in
// it: after one sample in a library function, or in a stripped library's unnamed code, the next
// ones there are known. A file that does not read back whole is ignored. Writers write a
// temporary file and rename it over the old one, so processes sharing a directory (MPI ranks)
// never see half a file; the last rename wins.
// Not thread-safe: one owner (the profile database's writer) calls it under its own lock.
// Compiled once, in the kairos::backtrace library (src/symbol_cache.cpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <kairos/plugins/backtrace/symbolizer.hpp>
#include <kairos/problem.hpp>

namespace kairos {
class symbol_cache {
 public:
  // Bumped whenever the symbolizer's answers for the same module change: older files are stale.
  static constexpr int format_version = 5;
  // Files kept in the directory; beyond this the least recently written go (each is a few KiB).
  static constexpr std::size_t max_files = 2000;
  // Addresses kept per module file; beyond this a file keeps the newest run's only.
  static constexpr std::size_t max_addresses_per_module = 100'000;

  // `directory`: where the files are ("": no cache, every find misses). `variant`: names what
  // else decides the symbolizer's answers (its source_lines choice), e.g. "own".
  symbol_cache(std::filesystem::path directory, std::string variant);
  ~symbol_cache();
  symbol_cache(symbol_cache&&) noexcept;
  symbol_cache& operator=(symbol_cache&&) noexcept;

  bool enabled() const;
  const std::filesystem::path& directory() const;

  // The stored answer for `address`, as the symbolizer gave it then (its own, or its span's);
  // nullopt when the address's module has no build id or nothing stored answers it. What this run
  // remembered answers too: a second address in a span learnt this run costs no symbolizer.
  std::optional<backtrace_symbol> find(std::uintptr_t address);

  // Keeps the symbolizer's answer for a later save(). Answers it cannot key (no module, no build
  // id, text with a tab or a newline) are not kept, nor answers made without the module's symbol
  // table or without its separate debug file where one exists: the next run, able to read them,
  // would answer better.
  void remember(const backtrace_symbol& symbol);

  // Writes every module file that gained answers. Empty when done, else the first thing that
  // failed (the cache is then only incomplete: nothing else depends on it).
  problem save();

  // Addresses answered by what an earlier run saved; by what this run remembered; by neither.
  std::size_t hits() const;
  std::size_t hits_learnt_this_run() const;
  std::size_t misses() const;

  // Where a run keeps its cache by default: $XDG_CACHE_HOME/kairos/symbols, else
  // ~/.cache/kairos/symbols; "" when neither is an absolute path.
  static std::filesystem::path default_directory();

 private:
  class implementation;  // the modules, their answers and files (src/symbol_cache.cpp)
  std::unique_ptr<implementation> implementation_;
};

}  // namespace kairos
