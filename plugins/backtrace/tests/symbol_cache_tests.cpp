// kairos::symbol_cache: what a later run reads back is what the symbolizer answered, for exactly the
// addresses it may answer, and a file that no longer matches its module is not used.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <kairos/plugins/backtrace.hpp>
#include <kairos/plugins/backtrace/symbol_cache.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>

namespace {

[[gnu::noinline]] kairos::backtrace<16> three_frames_down() {
  auto stack = kairos::backtrace<16>::record();
  asm volatile("" ::: "memory");
  return stack;
}

// A fresh directory per test, removed after it.
struct scratch_directory {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("kairos-symbol-cache-" + std::to_string(getpid()) + "-" + std::to_string(next()));
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  static int next() {
    static int count = 0;
    return ++count;
  }
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> found;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator{path, ignored}) found.push_back(entry.path());
    return found;
  }
};

std::uintptr_t libc_address(const char* function, std::uintptr_t offset) {
  return reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, function)) + offset;
}

void check_same(const kairos::backtrace_symbol& cached, const kairos::backtrace_symbol& resolved) {
  CHECK(cached.address == resolved.address);
  CHECK(cached.module == resolved.module);
  CHECK(cached.module_offset == resolved.module_offset);
  CHECK(cached.function == resolved.function);
  CHECK(cached.function_offset == resolved.function_offset);
  CHECK(cached.file == resolved.file);
  CHECK(cached.line == resolved.line);
}

// One of the test modules, loaded for a test; its non-exported function's address.
class loaded_test_module {
 public:
  explicit loaded_test_module(const char* path) : handle_{dlopen(path, RTLD_NOW | RTLD_LOCAL)} {
    REQUIRE(handle_ != nullptr);
  }
  ~loaded_test_module() { dlclose(handle_); }
  loaded_test_module(const loaded_test_module&) = delete;
  loaded_test_module& operator=(const loaded_test_module&) = delete;
  std::uintptr_t hidden_address() const {
    auto address_of = reinterpret_cast<std::uintptr_t (*)()>(dlsym(handle_, "kairos_test_module_hidden_address"));
    REQUIRE((address_of != nullptr));
    return address_of();
  }

 private:
  void* handle_;
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a later cache answers every address it kept exactly as the symbolizer did") {
  scratch_directory directory;
  const loaded_test_module module{KAIROS_TEST_MODULE};
  const auto stack = three_frames_down();
  std::vector<std::uintptr_t> addresses{module.hidden_address(), libc_address("getpid", 1), libc_address("qsort_r", 7)};
  for (std::size_t i = 0; i < stack.size(); ++i) addresses.push_back(stack.lookup_address(i));

  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::own};
  std::vector<kairos::backtrace_symbol> resolved;
  {
    kairos::symbol_cache first_run{directory.path, "own"};
    for (const auto address : addresses) {
      CHECK_FALSE(first_run.find(address).has_value());
      resolved.push_back(symbolizer.resolve(address));
      first_run.remember(resolved.back());
    }
    CHECK_FALSE(first_run.save());
  }
  CHECK(resolved[0].has_source());       // the test module carries its DWARF: lines are kept too
  CHECK(directory.files().size() >= 3);  // this program, the test module, libc at least

  kairos::symbol_cache second_run{directory.path, "own"};
  for (const auto& expected : resolved) {
    const auto cached = second_run.find(expected.address);
    REQUIRE(cached.has_value());
    check_same(*cached, expected);
  }
  CHECK(second_run.hits() == resolved.size());
  CHECK(second_run.misses() == 0);
}

namespace {
// Every byte of the span the symbolizer gave `sample`'s answer, and 16 on each side, through a
// cache that kept only that one answer: each address it answers is answered as the symbolizer
// answers it, and it answers exactly the span. Returns the span's length.
std::uintptr_t check_span(kairos::backtrace_symbolizer& symbolizer, const std::filesystem::path& directory,
                          const std::string& variant, std::uintptr_t sample) {
  const auto kept = symbolizer.resolve(sample);
  {
    kairos::symbol_cache first_run{directory, variant};
    first_run.remember(kept);
    CHECK_FALSE(first_run.save());
  }
  if (!kept.has_same_answer_span()) return 0;
  CHECK(kept.same_answer_begin <= sample);
  CHECK(sample < kept.same_answer_end);
  kairos::symbol_cache second_run{directory, variant};
  std::uintptr_t answered = 0;
  for (auto address = kept.same_answer_begin - 16; address < kept.same_answer_end + 16; ++address) {
    const auto cached = second_run.find(address);
    if (!cached) continue;
    ++answered;
    const auto expected = symbolizer.resolve_uncached(address);
    CHECK(cached->module == expected.module);
    CHECK(cached->module_offset == expected.module_offset);
    CHECK(cached->function == expected.function);
    CHECK(cached->function_offset == expected.function_offset);
    CHECK(cached->file.empty());
    CHECK(expected.file.empty());
  }
  const auto length = kept.same_answer_end - kept.same_answer_begin;
  CHECK(answered == length);
  return length;
}
}  // namespace

TEST_CASE("one address of a function without file:line answers every address of its span") {
  // Two libc functions, by their names from the symbol table, under each source_lines choice.
  scratch_directory directory;
  for (const auto lines : {kairos::source_lines::off, kairos::source_lines::own}) {
    kairos::backtrace_symbolizer symbolizer{nullptr, lines};
    const std::string variant = lines == kairos::source_lines::off ? "off" : "own";
    for (const char* function : {"qsort_r", "getaddrinfo"}) {
      const auto sample = libc_address(function, 3);
      if (symbolizer.resolve(sample).has_source()) {  // libc with its own DWARF: a line each
        CHECK_FALSE(symbolizer.resolve(sample).has_same_answer_span());
        continue;
      }
      CHECK(check_span(symbolizer, directory.path, variant, sample) > 100);
    }
  }
}

TEST_CASE("a span learnt this run answers its other addresses, counted apart from an earlier run's") {
  // The verbose line's "from the symbol cache" counts what earlier runs saved: a fresh cache says
  // none, even where this run's own spans spared the symbolizer.
  // The stripped test module's unnamed code always has a span: the gap between its symbols.
  scratch_directory directory;
  const loaded_test_module module{KAIROS_TEST_MODULE_STRIPPED};
  kairos::backtrace_symbolizer symbolizer;
  const auto sample = module.hidden_address();
  const auto kept = symbolizer.resolve(sample);
  REQUIRE(kept.has_same_answer_span());
  const auto other = sample == kept.same_answer_begin ? sample + 1 : kept.same_answer_begin;
  REQUIRE(other < kept.same_answer_end);
  {
    kairos::symbol_cache first_run{directory.path, "all"};
    CHECK_FALSE(first_run.find(sample).has_value());
    first_run.remember(kept);
    const auto answered = first_run.find(other);
    REQUIRE(answered.has_value());
    CHECK(answered->function == kept.function);
    CHECK(first_run.hits() == 0);
    CHECK(first_run.hits_learnt_this_run() == 1);
    CHECK(first_run.misses() == 1);
    CHECK_FALSE(first_run.save());
  }
  kairos::symbol_cache second_run{directory.path, "all"};
  CHECK(second_run.find(other).has_value());
  CHECK(second_run.find(sample).has_value());
  CHECK(second_run.hits() == 2);
  CHECK(second_run.hits_learnt_this_run() == 0);
}

TEST_CASE("one unnamed address of a stripped module answers the gap between its symbols") {
  // The stripped test module keeps only its exported symbols: the code between them has no name.
  scratch_directory directory;
  const loaded_test_module module{KAIROS_TEST_MODULE_STRIPPED};
  kairos::backtrace_symbolizer symbolizer;
  const auto& unnamed = symbolizer.resolve(module.hidden_address());
  REQUIRE(unnamed.module == KAIROS_TEST_MODULE_STRIPPED);
  REQUIRE(unnamed.function.empty());
  CHECK(check_span(symbolizer, directory.path, "all", module.hidden_address()) > 4);
}

TEST_CASE("a cache file cut short, or of another variant, is not used, and the next save writes it whole") {
  scratch_directory directory;
  const auto address = libc_address("getpid", 1);
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::own};
  {
    kairos::symbol_cache first_run{directory.path, "own"};
    first_run.remember(symbolizer.resolve(address));
    REQUIRE_FALSE(first_run.save());
  }
  REQUIRE(directory.files().size() == 1);
  const auto file = directory.files().front();
  const auto whole = read_text(file);
  CHECK(whole.find("\nend 1\n") != std::string::npos);

  CHECK_FALSE(kairos::symbol_cache{directory.path, "all"}.find(address).has_value());  // another variant

  std::ofstream{file, std::ios::trunc} << whole.substr(0, whole.find("end 1"));  // cut before its end line
  kairos::symbol_cache after_cut{directory.path, "own"};
  CHECK_FALSE(after_cut.find(address).has_value());
  after_cut.remember(symbolizer.resolve(address));
  CHECK_FALSE(after_cut.save());
  CHECK(read_text(file) == whole);

  // The same header but for the module file's size: written for another build of the file.
  std::istringstream header{whole.substr(0, whole.find('\n'))};
  std::vector<std::string> words{std::istream_iterator<std::string>{header}, {}};
  REQUIRE(words.size() == 9);  // kairos symbol cache VERSION VARIANT SIZE MTIME DEBUG-SIZE DEBUG-MTIME
  words[5] = "1";
  std::string other_size;
  for (const auto& word : words) other_size += (other_size.empty() ? "" : " ") + word;
  std::ofstream{file, std::ios::trunc} << other_size << whole.substr(whole.find('\n'));
  CHECK_FALSE(kairos::symbol_cache{directory.path, "own"}.find(address).has_value());
}

TEST_CASE("a cache file written before the names users search for were chosen is not used") {
  // Format 3 named libm's cbrt cbrtf64 (the first alias in the table): its answers are stale.
  scratch_directory directory;
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  REQUIRE(libm != nullptr);
  const auto address = reinterpret_cast<std::uintptr_t>(dlsym(libm, "cbrt")) + 1;
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::own};
  REQUIRE(symbolizer.resolve(address).function == "cbrt");
  {
    kairos::symbol_cache first_run{directory.path, "own"};
    first_run.remember(symbolizer.resolve(address));
    REQUIRE_FALSE(first_run.save());
  }
  REQUIRE(directory.files().size() == 1);
  const auto file = directory.files().front();
  auto text = read_text(file);
  const auto version = std::string{"kairos symbol cache "} + std::to_string(kairos::symbol_cache::format_version) + " ";
  REQUIRE(text.starts_with(version));
  text.replace(0, version.size(), "kairos symbol cache 3 ");
  text.replace(text.find("\tcbrt\t"), 6, "\tcbrtf64\t");
  std::ofstream{file, std::ios::trunc} << text;
  kairos::symbol_cache later{directory.path, "own"};
  CHECK_FALSE(later.find(address).has_value());
  dlclose(libm);
}

TEST_CASE("a module without a build id is never cached") {
  scratch_directory directory;
  const loaded_test_module module{KAIROS_TEST_MODULE_WITHOUT_BUILD_ID};
  kairos::backtrace_symbolizer symbolizer;
  const auto& symbol = symbolizer.resolve(module.hidden_address());
  CHECK(symbol.function == "(anonymous namespace)::hidden_work(int)");
  kairos::symbol_cache cache{directory.path, "own"};
  cache.remember(symbol);
  CHECK_FALSE(cache.save());
  CHECK(directory.files().empty());
  CHECK_FALSE(cache.find(module.hidden_address()).has_value());
}

TEST_CASE("without a directory the cache answers nothing and writes nothing") {
  kairos::backtrace_symbolizer symbolizer;
  const auto address = libc_address("getpid", 1);
  kairos::symbol_cache cache{{}, "own"};
  CHECK_FALSE(cache.enabled());
  cache.remember(symbolizer.resolve(address));
  CHECK_FALSE(cache.find(address).has_value());
  CHECK_FALSE(cache.save());
}

TEST_CASE("a directory that cannot be written is said by save, and the answers stay usable in the run") {
  const std::filesystem::path unwritable{"/proc/kairos-symbol-cache-test"};
  kairos::backtrace_symbolizer symbolizer;
  const auto address = libc_address("getpid", 1);
  kairos::symbol_cache cache{unwritable, "own"};
  cache.remember(symbolizer.resolve(address));
  const auto failure = cache.save();
  CHECK(failure.text().find(unwritable.string()) != std::string::npos);
  CHECK(cache.find(address).has_value());
}

TEST_CASE("an answer made without its module's symbol table, or without its debug file, is not kept") {
  // As in a program that holds every descriptor it may open: libdw cannot open the module's files
  // and names nothing. The next run, able to read them, would answer better.
  scratch_directory directory;
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::own};
  const auto address = libc_address("qsort_r", 3);
  const auto read = symbolizer.resolve(address);
  REQUIRE(read.symbol_table_read);
  auto without_table = read;
  without_table.symbol_table_read = false;
  kairos::symbol_cache cache{directory.path, "own"};
  cache.remember(without_table);
  CHECK_FALSE(cache.save());
  CHECK(directory.files().empty());
  if (!read.separate_debug_file_read) return;  // libc has no separate debug file here
  auto without_debug_file = read;
  without_debug_file.separate_debug_file_read = false;
  cache.remember(without_debug_file);
  CHECK_FALSE(cache.save());
  CHECK(directory.files().empty());
  cache.remember(read);
  CHECK_FALSE(cache.save());
  CHECK(directory.files().size() == 1);
}
