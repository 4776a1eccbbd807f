#pragma once
// The symbols a JIT compiler writes for perf: /tmp/perf-<pid>.map, one line per compiled function,
// "START SIZE NAME" (START and SIZE in hex, an optional 0x), appended as code is compiled (node
// --perf-basic-prof, Python 3.12's -X perf, LuaJIT, Java's perf-map-agent). The symbolizer asks
// it for addresses that no loaded module holds. Never called from a signal handler.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kairos::backtrace_detail {

class perf_map {
 public:
  struct function {
    std::string name;
    std::uintptr_t start = 0;
  };

  explicit perf_map(pid_t pid);

  // The function whose code holds `address`. A miss reads what was appended to the file since the
  // last read (a line the JIT is still writing waits for its newline); a file that shrank was
  // written anew and is read again from the start.
  std::optional<function> find(std::uintptr_t address);

  const std::string& path() const noexcept { return path_; }
  std::size_t entries() const noexcept { return functions_.size(); }
  std::size_t malformed_lines() const noexcept { return malformed_; }

 private:
  struct range {
    std::uintptr_t size = 0;
    std::string name;
  };
  std::optional<function> lookup(std::uintptr_t address) const;
  void read_appended();
  void parse_line(const std::string& line);

  std::string path_;
  std::map<std::uintptr_t, range> functions_;  // by start; a later line for a start replaces it
  std::uintmax_t read_offset_ = 0;
  std::size_t malformed_ = 0;
};

}  // namespace kairos::backtrace_detail
