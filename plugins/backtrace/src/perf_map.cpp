#include "perf_map.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace kairos::backtrace_detail {
namespace {

// A hexadecimal field, with or without 0x; nullopt unless the whole field is hex digits.
std::optional<std::uintptr_t> hex_field(const std::string& text, std::size_t& at) {
  while (at < text.size() && text[at] == ' ') ++at;
  if (text.compare(at, 2, "0x") == 0 || text.compare(at, 2, "0X") == 0) at += 2;
  const char* begin = text.c_str() + at;
  char* end = nullptr;
  const auto value = std::strtoull(begin, &end, 16);
  if (end == begin || (*end != ' ' && *end != '\0')) return std::nullopt;
  at += static_cast<std::size_t>(end - begin);
  return static_cast<std::uintptr_t>(value);
}

}  // namespace

perf_map::perf_map(pid_t pid) : path_{"/tmp/perf-" + std::to_string(pid) + ".map"} {}

std::optional<perf_map::function> perf_map::find(std::uintptr_t address) {
  if (auto found = lookup(address)) return found;
  read_appended();
  return lookup(address);
}

std::optional<perf_map::function> perf_map::lookup(std::uintptr_t address) const {
  auto after = functions_.upper_bound(address);
  if (after == functions_.begin()) return std::nullopt;
  const auto& [start, code] = *std::prev(after);
  if (address - start >= code.size) return std::nullopt;
  return function{code.name, start};
}

void perf_map::read_appended() {
  struct stat status {};
  if (::stat(path_.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return;
  const auto size = static_cast<std::uintmax_t>(status.st_size);
  if (size == read_offset_) return;
  if (size < read_offset_) {  // written anew
    functions_.clear();
    read_offset_ = 0;
  }
  std::ifstream file{path_, std::ios::binary};
  if (!file.seekg(static_cast<std::streamoff>(read_offset_))) return;
  std::string line;
  while (std::getline(file, line)) {
    if (file.eof()) break;  // no newline yet: the JIT is still writing it
    read_offset_ += line.size() + 1;
    parse_line(line);
  }
}

void perf_map::parse_line(const std::string& line) {
  std::size_t at = 0;
  const auto start = hex_field(line, at);
  const auto size = start ? hex_field(line, at) : std::nullopt;
  while (at < line.size() && line[at] == ' ') ++at;
  if (!start || !size || *size == 0 || at == line.size()) {
    ++malformed_;
    return;
  }
  functions_[*start] = range{*size, line.substr(at)};
}

}  // namespace kairos::backtrace_detail
