// symbol_cache's work (see symbol_cache.hpp): the loaded modules' build ids, reading and writing
// the cache's files.
#include <kairos/plugins/backtrace/symbol_cache.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kairos {

class symbol_cache::implementation {
 public:
  implementation(std::filesystem::path directory, std::string variant)
      : directory_{std::move(directory)}, variant_{std::move(variant)} {}

  bool enabled() const { return !directory_.empty(); }

  std::optional<backtrace_symbol> find(std::uintptr_t address) {
    if (!enabled()) return std::nullopt;
    module_entry* module = module_of(address);
    if (module == nullptr) {
      ++misses_;
      return std::nullopt;
    }
    const auto offset = address - module->bias;
    load(*module);
    backtrace_symbol symbol;
    symbol.address = address;
    symbol.module = module->path;
    symbol.module_offset = offset;
    bool saved_by_earlier_run = false;
    if (const auto found = module->answers.find(offset); found != module->answers.end()) {
      saved_by_earlier_run = found->second.saved_by_earlier_run;
      symbol.function = found->second.function;
      symbol.function_offset = found->second.function_offset;
      symbol.file = found->second.file;
      symbol.line = found->second.line;
      if (found->second.span_begin < found->second.span_end) {
        symbol.same_answer_begin = found->second.span_begin + module->bias;
        symbol.same_answer_end = found->second.span_end + module->bias;
      }
    } else if (const auto* holding = span_holding(*module, offset)) {
      saved_by_earlier_run = holding->saved_by_earlier_run;
      symbol.function = holding->function;
      symbol.function_offset = holding->function.empty() ? 0 : offset - holding->begin;
      symbol.same_answer_begin = holding->begin + module->bias;
      symbol.same_answer_end = holding->end + module->bias;
    } else {
      ++misses_;
      return std::nullopt;
    }
    ++(saved_by_earlier_run ? hits_ : hits_learnt_this_run_);
    return symbol;
  }

  void remember(const backtrace_symbol& symbol) {
    if (!enabled() || !symbol.symbol_table_read) return;
    module_entry* module = module_of(symbol.address);
    if (module == nullptr || symbol.module_offset != symbol.address - module->bias) return;
    if (!storable(symbol.function) || !storable(symbol.file)) return;
    load(*module);
    if (module->separate_debug_file && !symbol.separate_debug_file_read) return;
    answer stored{symbol.function, symbol.function_offset, 0, 0, symbol.file, symbol.line};
    if (symbol.has_same_answer_span() && symbol.same_answer_begin >= module->bias &&
        symbol.same_answer_begin <= symbol.address && symbol.address < symbol.same_answer_end) {
      stored.span_begin = symbol.same_answer_begin - module->bias;
      stored.span_end = symbol.same_answer_end - module->bias;
    }
    auto [entry, added] = module->answers.try_emplace(symbol.module_offset, std::move(stored));
    if (added) {
      add_span(*module, entry->second);
      module->changed = true;
      module->added.push_back(symbol.module_offset);
    }
  }

  problem save() {
    if (!enabled()) return {};
    problem failure;
    bool created = false;
    bool directory_made = false;
    for (auto& [start, module] : modules_) {
      if (!module.changed) continue;
      if (!directory_made) {
        std::error_code unmade;  // a directory that cannot be made shows in the write's failure
        std::filesystem::create_directories(directory_, unmade);
        directory_made = true;
      }
      if (problem not_written = write(module, created); not_written && !failure) failure = std::move(not_written);
      module.changed = false;
      module.added.clear();
    }
    if (created) prune();
    return failure;
  }

  // Addresses answered by what an earlier run saved; by what this run remembered; by neither.
  std::size_t hits() const { return hits_; }
  std::size_t hits_learnt_this_run() const { return hits_learnt_this_run_; }
  std::size_t misses() const { return misses_; }

  std::filesystem::path directory_;

 private:
  struct answer {
    std::string function;
    std::uintptr_t function_offset = 0;
    std::uintptr_t span_begin = 0, span_end = 0;  // module offsets; empty: none
    std::string file;
    int line = 0;
    bool saved_by_earlier_run = false;  // read from the module's file, not remembered this run
  };
  // Module offsets over which the symbolizer gives one answer: a function's name (or none), no
  // file:line (backtrace_symbol's same-answer span).
  struct answer_span {
    std::uintptr_t begin = 0, end = 0;
    std::string function;
    bool saved_by_earlier_run = false;
  };
  struct module_entry {
    // Its loaded segments' span, in the process, holes included: dladdr places an address in a
    // hole inside the object too (the loader maps the span whole).
    std::uintptr_t start = 0, end = 0;
    std::uintptr_t bias = 0;  // load bias: address - bias is the module offset
    std::string path;         // as the symbolizer names it
    std::string build_id;     // hexadecimal
    bool loaded = false, changed = false;
    std::string stamp;                 // the header line this module's file must carry
    bool separate_debug_file = false;  // one exists where the symbolizer looks
    std::unordered_map<std::uintptr_t, answer> answers;
    std::map<std::uintptr_t, answer_span> spans;  // by begin; from answers with a span
    std::vector<std::uintptr_t> added;            // this run's, in order
  };

  static void add_span(module_entry& module, const answer& stored) {
    if (stored.span_begin < stored.span_end)
      module.spans.try_emplace(stored.span_begin, answer_span{stored.span_begin, stored.span_end, stored.function,
                                                              stored.saved_by_earlier_run});
  }
  static const answer_span* span_holding(const module_entry& module, std::uintptr_t offset) {
    auto after = module.spans.upper_bound(offset);
    if (after == module.spans.begin()) return nullptr;
    const auto& span = std::prev(after)->second;
    return offset < span.end ? &span : nullptr;
  }

  static bool storable(std::string_view text) { return text.find_first_of("\t\n") == std::string_view::npos; }

  // The module holding `address`, with a build id; the table is read again when the loader's
  // list changed since (dlopen, dlclose).
  module_entry* module_of(std::uintptr_t address) {
    refresh_if_changed();
    auto after = modules_.upper_bound(address);
    if (after == modules_.begin()) return nullptr;
    auto& module = std::prev(after)->second;
    return address < module.end && !module.build_id.empty() ? &module : nullptr;
  }

  void refresh_if_changed() {
    struct counters {
      unsigned long long adds = 0, subs = 0;
    } now;
    dl_iterate_phdr(
        [](dl_phdr_info* object, std::size_t size, void* argument) -> int {
          auto& found = *static_cast<counters*>(argument);
          if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof object->dlpi_subs) {
            found.adds = object->dlpi_adds;
            found.subs = object->dlpi_subs;
          }
          return 1;  // the counters are the loader's, the same in every entry
        },
        &now);
    if (listed_ && now.adds == loader_adds_ && now.subs == loader_subs_) return;
    listed_ = true;
    loader_adds_ = now.adds;
    loader_subs_ = now.subs;
    std::map<std::uintptr_t, module_entry> listed;
    dl_iterate_phdr(
        [](dl_phdr_info* object, std::size_t, void* argument) -> int {
          module_entry module;
          module.bias = object->dlpi_addr;
          module.start = UINTPTR_MAX;
          for (int i = 0; i < object->dlpi_phnum; ++i) {
            const auto& segment = object->dlpi_phdr[i];
            if (segment.p_type != PT_LOAD) continue;
            const std::uintptr_t low = object->dlpi_addr + segment.p_vaddr;
            module.start = std::min(module.start, low);
            module.end = std::max<std::uintptr_t>(module.end, low + segment.p_memsz);
          }
          if (module.start >= module.end) return 0;
          module.build_id = build_id_of(*object);
          module.path = object->dlpi_name != nullptr && object->dlpi_name[0] != '\0'
                            ? std::string{object->dlpi_name}
                            : backtrace_symbolizer::main_program_path();
          static_cast<std::map<std::uintptr_t, module_entry>*>(argument)->emplace(module.start, std::move(module));
          return 0;
        },
        &listed);
    // What was already read or learnt stays with a module that is still loaded where it was.
    for (auto& [start, module] : listed) {
      const auto kept = modules_.find(start);
      if (kept != modules_.end() && kept->second.build_id == module.build_id && kept->second.end == module.end)
        module = std::move(kept->second);
    }
    // A module gone keeps what it learnt only if it is saved now.
    for (auto& [start, module] : modules_)
      if (module.changed && !listed.contains(start)) {
        bool created = false;
        write(module, created);
      }
    modules_ = std::move(listed);
  }

  // The GNU build id from the module's PT_NOTE segments, as loaded: "" when it has none.
  static std::string build_id_of(const dl_phdr_info& object) {
    for (int i = 0; i < object.dlpi_phnum; ++i) {
      const auto& segment = object.dlpi_phdr[i];
      if (segment.p_type != PT_NOTE || !inside_loaded_segment(object, segment)) continue;
      const std::size_t align = segment.p_align == 8 ? 8 : 4;
      const auto* at = reinterpret_cast<const unsigned char*>(object.dlpi_addr + segment.p_vaddr);
      const auto* end = at + segment.p_memsz;
      auto padded = [align](std::size_t size) { return (size + align - 1) & ~(align - 1); };
      while (static_cast<std::size_t>(end - at) >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) note;
        std::memcpy(&note, at, sizeof note);
        const auto* name = at + sizeof note;
        const auto* description = name + padded(note.n_namesz);
        if (description > end || static_cast<std::size_t>(end - description) < note.n_descsz) break;
        if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
            note.n_descsz > 0) {
          static constexpr char digits[] = "0123456789abcdef";
          std::string hex;
          for (std::size_t j = 0; j < note.n_descsz; ++j) {
            hex += digits[description[j] >> 4];
            hex += digits[description[j] & 15];
          }
          return hex;
        }
        at = description + padded(note.n_descsz);
      }
    }
    return {};
  }
  static bool inside_loaded_segment(const dl_phdr_info& object, const ElfW(Phdr) & note) {
    for (int i = 0; i < object.dlpi_phnum; ++i) {
      const auto& segment = object.dlpi_phdr[i];
      if (segment.p_type == PT_LOAD && note.p_vaddr >= segment.p_vaddr &&
          note.p_vaddr + note.p_memsz <= segment.p_vaddr + segment.p_filesz)
        return true;
    }
    return false;
  }

  // "size mtime" of a file, "- -" when there is none.
  static std::string file_stamp(const std::string& path) {
    struct stat status {};
    if (path.empty() || path[0] != '/' || stat(path.c_str(), &status) != 0) return "- -";
    return std::to_string(status.st_size) + " " +
           std::to_string(static_cast<long long>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec);
  }
  void set_stamp(module_entry& module) const {
    const auto debug_file = file_stamp("/usr/lib/debug/.build-id/" + module.build_id.substr(0, 2) + "/" +
                                       module.build_id.substr(2) + ".debug");
    module.separate_debug_file = debug_file != "- -";
    module.stamp = "kairos symbol cache " + std::to_string(format_version) + " " + variant_ + " " +
                   file_stamp(module.path) + " " + debug_file;
  }
  std::filesystem::path file_of(const module_entry& module) const {
    return directory_ / (module.build_id + "-" + variant_);
  }

  // The module's file, if it reads back whole and its stamp is the module's now.
  void load(module_entry& module) {
    if (module.loaded) return;
    module.loaded = true;
    set_stamp(module);
    std::string text;
    if (!read_file(file_of(module), text)) return;
    std::unordered_map<std::uintptr_t, answer> answers;
    if (!parse(text, module.stamp, answers)) return;
    module.answers = std::move(answers);
    for (const auto& [offset, stored] : module.answers) add_span(module, stored);
  }

  static bool read_file(const std::filesystem::path& path, std::string& text) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat status {};
    bool whole = fstat(fd, &status) == 0 && status.st_size > 0 && status.st_size < (64 << 20);
    if (whole) {
      text.resize(static_cast<std::size_t>(status.st_size));
      std::size_t done = 0;
      while (done < text.size()) {
        const auto got = ::read(fd, text.data() + done, text.size() - done);
        if (got <= 0) break;
        done += static_cast<std::size_t>(got);
      }
      whole = done == text.size();
    }
    ::close(fd);
    return whole;
  }

  template <class Number>
  static bool number(std::string_view text, Number& value, int base) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
    return error == std::errc{} && end == text.data() + text.size();
  }

  static bool parse(std::string_view text, std::string_view stamp,
                    std::unordered_map<std::uintptr_t, answer>& answers) {
    auto next_line = [&text](std::string_view& line) {
      const auto newline = text.find('\n');
      if (newline == std::string_view::npos) return false;
      line = text.substr(0, newline);
      text.remove_prefix(newline + 1);
      return true;
    };
    std::string_view line;
    if (!next_line(line) || line != stamp) return false;
    while (next_line(line)) {
      if (line.starts_with("end ")) {
        std::size_t count = 0;
        return number(line.substr(4), count, 10) && count == answers.size() && text.empty();
      }
      std::string_view fields[7];
      for (auto& field : fields) {
        const auto tab = line.find('\t');
        field = line.substr(0, tab);
        line = tab == std::string_view::npos ? std::string_view{} : line.substr(tab + 1);
      }
      std::uintptr_t offset = 0;
      answer stored;
      stored.saved_by_earlier_run = true;
      if (!number(fields[0], offset, 16) || !number(fields[1], stored.function_offset, 16) ||
          !number(fields[2], stored.span_begin, 16) || !number(fields[3], stored.span_end, 16) ||
          !number(fields[4], stored.line, 10) ||
          (stored.span_begin < stored.span_end && (offset < stored.span_begin || offset >= stored.span_end)))
        return false;
      stored.function = fields[5];
      stored.file = fields[6];
      answers.emplace(offset, std::move(stored));
    }
    return false;  // no end line: a file cut short
  }

  problem write(const module_entry& module, bool& created) {
    // Full: the oldest answers give way to this run's.
    const bool full = module.answers.size() > max_addresses_per_module;
    std::string text = module.stamp + "\n";
    std::size_t count = 0;
    auto append_number = [&text](auto value, int base) {
      char digits[24];
      text.append(digits, std::to_chars(digits, digits + sizeof digits, value, base).ptr);
      text += '\t';
    };
    auto append = [&](std::uintptr_t offset, const answer& stored) {
      append_number(offset, 16);
      append_number(stored.function_offset, 16);
      append_number(stored.span_begin, 16);
      append_number(stored.span_end, 16);
      append_number(stored.line, 10);
      text += stored.function;
      text += '\t';
      text += stored.file;
      text += '\n';
      ++count;
    };
    if (full) {
      for (const auto offset : module.added) append(offset, module.answers.at(offset));
    } else {
      for (const auto& [offset, stored] : module.answers) append(offset, stored);
    }
    text += "end " + std::to_string(count) + "\n";
    const auto path = file_of(module);
    created = created || access(path.c_str(), F_OK) != 0;
    const auto temporary = path.string() + "." + std::to_string(getpid()) + ".tmp";
    // The user's own: a file names the functions and source files of the programs they profile.
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return problem{"cannot write " + temporary + ": " + std::strerror(errno)};
    std::size_t done = 0;
    while (done < text.size()) {
      const auto wrote = ::write(fd, text.data() + done, text.size() - done);
      if (wrote <= 0) break;
      done += static_cast<std::size_t>(wrote);
    }
    const int write_error = done == text.size() ? 0 : errno != 0 ? errno : EIO;
    ::close(fd);
    if (write_error != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
      const int error = write_error != 0 ? write_error : errno;
      ::unlink(temporary.c_str());
      return problem{"cannot write " + path.string() + ": " + std::strerror(error)};
    }
    return {};
  }

  // The least recently written files go once there are more than max_files.
  void prune() const {
    std::error_code error;
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
    for (const auto& entry : std::filesystem::directory_iterator{directory_, error})
      if (entry.is_regular_file(error)) files.emplace_back(entry.last_write_time(error), entry.path());
    if (files.size() <= max_files) return;
    std::sort(files.begin(), files.end());
    for (std::size_t i = 0; i + max_files * 9 / 10 < files.size(); ++i) std::filesystem::remove(files[i].second, error);
  }

  std::string variant_;
  std::map<std::uintptr_t, module_entry> modules_;  // by start address
  bool listed_ = false;
  unsigned long long loader_adds_ = 0, loader_subs_ = 0;
  std::size_t hits_ = 0, hits_learnt_this_run_ = 0, misses_ = 0;
};

symbol_cache::symbol_cache(std::filesystem::path directory, std::string variant)
    : implementation_{std::make_unique<implementation>(std::move(directory), std::move(variant))} {}
symbol_cache::~symbol_cache() = default;
symbol_cache::symbol_cache(symbol_cache&&) noexcept = default;
symbol_cache& symbol_cache::operator=(symbol_cache&&) noexcept = default;

bool symbol_cache::enabled() const { return implementation_->enabled(); }
const std::filesystem::path& symbol_cache::directory() const { return implementation_->directory_; }
std::optional<backtrace_symbol> symbol_cache::find(std::uintptr_t address) { return implementation_->find(address); }
void symbol_cache::remember(const backtrace_symbol& symbol) { implementation_->remember(symbol); }
problem symbol_cache::save() { return implementation_->save(); }
std::size_t symbol_cache::hits() const { return implementation_->hits(); }
std::size_t symbol_cache::hits_learnt_this_run() const { return implementation_->hits_learnt_this_run(); }
std::size_t symbol_cache::misses() const { return implementation_->misses(); }

std::filesystem::path symbol_cache::default_directory() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && cache[0] == '/')
    return std::filesystem::path{cache} / "kairos" / "symbols";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/')
    return std::filesystem::path{home} / ".cache" / "kairos" / "symbols";
  return {};
}

}  // namespace kairos
