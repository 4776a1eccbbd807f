// Code a JIT compiled, outside every loaded module, named by the map the JIT writes for perf
// (/tmp/perf-<pid>.map): read when an address needs it, again as it grows; malformed lines
// skipped and counted.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbolizer.hpp>

namespace {

// Anonymous memory, as a JIT's code lies in: no module holds it.
class jit_code {
 public:
  jit_code() : start_{mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)} {
    REQUIRE(start_ != MAP_FAILED);
  }
  ~jit_code() { munmap(start_, size); }
  jit_code(const jit_code&) = delete;
  jit_code& operator=(const jit_code&) = delete;
  std::uintptr_t at(std::uintptr_t offset) const { return reinterpret_cast<std::uintptr_t>(start_) + offset; }
  static constexpr std::size_t size = 4096;

 private:
  void* start_;
};

class map_file {
 public:
  map_file() : path_{fmt::format("/tmp/perf-{}.map", getpid())} { std::ofstream{path_, std::ios::trunc}; }
  ~map_file() { unlink(path_.c_str()); }
  map_file(const map_file&) = delete;
  map_file& operator=(const map_file&) = delete;
  void append(const std::string& text) { std::ofstream{path_, std::ios::app} << text; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("a JIT's perf map names code outside every module, as the map grows") {
  jit_code code;
  map_file map;
  map.append(fmt::format("{:x} 40 JS:*mixer\n", code.at(0)));
  map.append("not a line of a perf map\n");
  map.append(fmt::format("0x{:x} 0x20 py::solve:/tmp/solver.py\n", code.at(0x40)));
  kairos::backtrace_symbolizer symbolizer;

  const auto mixer = symbolizer.resolve_uncached(code.at(0x10));
  CHECK(mixer.function == "JS:*mixer");
  CHECK(mixer.function_offset == 0x10);
  CHECK(mixer.module == map.path());
  CHECK(symbolizer.resolve_uncached(code.at(0x45)).function == "py::solve:/tmp/solver.py");
  CHECK(symbolizer.resolve_uncached(code.at(0x70)).function.empty());  // between functions

  // Compiled later: the map is read again from where it was left; a line still being written
  // (no newline yet) waits.
  map.append(fmt::format("{:x} 10 LazyCompile:later\n{:x} 10 partial", code.at(0x80), code.at(0x100)));
  CHECK(symbolizer.resolve_uncached(code.at(0x85)).function == "LazyCompile:later");
  CHECK(symbolizer.resolve_uncached(code.at(0x105)).function.empty());
  map.append(" line\n");
  CHECK(symbolizer.resolve_uncached(code.at(0x105)).function == "partial line");

  const auto used = symbolizer.jit_map_used();
  CHECK(used.path == map.path());
  CHECK(used.functions == 4);
  CHECK(used.malformed_lines == 1);
}

TEST_CASE("without a perf map, code outside every module is named by its mapping only") {
  jit_code code;
  unlink(fmt::format("/tmp/perf-{}.map", getpid()).c_str());
  kairos::backtrace_symbolizer symbolizer;
  const auto symbol = symbolizer.resolve_uncached(code.at(8));
  CHECK(symbol.function.empty());
  // A nameless anonymous mapping, not executable ("[jit]" when it is, as a JIT's code).
  CHECK(symbol.module == "[anon]");
  CHECK(symbolizer.jit_map_used().functions == 0);
}
