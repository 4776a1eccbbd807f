// The names the symbolizer gives, as users search for them: among aliases at one address, the
// documented name (rule by rule on a module made for it, then on libm's and libc's own aliases),
// never a symbol version; each place a stripped module's names may come from; and PLT entries,
// named as objdump and perf name them.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <kairos/plugins/backtrace.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>

#include "kairos_test_skip.hpp"

namespace {

class loaded_module {
 public:
  explicit loaded_module(const char* path) : handle_{dlopen(path, RTLD_NOW | RTLD_LOCAL)} {
    INFO(path << ": " << (handle_ == nullptr ? dlerror() : ""));
    REQUIRE(handle_ != nullptr);
  }
  ~loaded_module() { dlclose(handle_); }
  loaded_module(const loaded_module&) = delete;
  loaded_module& operator=(const loaded_module&) = delete;
  // The address `symbol` (a function returning an address) returns, or `symbol`'s own + 1.
  std::uintptr_t address_from(const char* symbol) const {
    auto function = reinterpret_cast<std::uintptr_t (*)()>(dlsym(handle_, symbol));
    REQUIRE((function != nullptr));
    return function();
  }
  std::uintptr_t inside(const char* symbol) const {
    void* found = dlsym(handle_, symbol);
    REQUIRE(found != nullptr);
    return reinterpret_cast<std::uintptr_t>(found) + 1;
  }
  // Where its file's addresses are in the process: file address + bias.
  std::uintptr_t bias() const {
    link_map* map = nullptr;
    REQUIRE(dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0);
    return static_cast<std::uintptr_t>(map->l_addr);
  }

 private:
  void* handle_;
};

std::string name_at(kairos::backtrace_symbolizer& symbolizer, std::uintptr_t address) {
  const auto& symbol = symbolizer.resolve(address);
  CHECK(symbol.function.find('@') == std::string::npos);  // never a version
  return symbol.function;
}

}  // namespace

TEST_CASE("an exported alias is named before a local one, and the shortest before its fNN twins") {
  loaded_module module{KAIROS_ALIAS_MODULE};
  kairos::backtrace_symbolizer symbolizer;
  // local __cube; weak cube, cubef64, cubef32x (libm's __cbrt, cbrt, cbrtf64, cbrtf32x)
  CHECK(name_at(symbolizer, module.address_from("kairos_alias_module_cube")) == "cube");
}

TEST_CASE("a default-version name is named before a compatibility one, and without its version") {
  loaded_module module{KAIROS_ALIAS_MODULE};
  kairos::backtrace_symbolizer symbolizer;
  // tw@KAIROS_TEST_1 and twin@@KAIROS_TEST_2 (libm's __hypot_finite@GLIBC_2.15, hypot@@GLIBC_2.35)
  CHECK(name_at(symbolizer, module.address_from("kairos_alias_module_twin")) == "twin");
}

TEST_CASE("fewer leading underscores win over a stronger binding") {
  loaded_module module{KAIROS_ALIAS_MODULE};
  kairos::backtrace_symbolizer symbolizer;
  // global __module_lookup, weak module_lookup (libc's __nanosleep and nanosleep)
  CHECK(name_at(symbolizer, module.address_from("kairos_alias_module_lookup")) == "module_lookup");
}

TEST_CASE("between equal names the first in byte order wins, not the first in the table") {
  loaded_module module{KAIROS_ALIAS_MODULE};
  kairos::backtrace_symbolizer symbolizer;
  // local __left_copy, then local __copy_left in the table
  CHECK(name_at(symbolizer, module.address_from("kairos_alias_module_copy")) == "__copy_left");
}

TEST_CASE("libm's functions are named as their manual names them") {
  loaded_module libm{"libm.so.6"};
  kairos::backtrace_symbolizer symbolizer;
  // Its separate debug file (libc6-dbg) adds local and versioned aliases; .dynsym alone has fewer.
  CHECK(name_at(symbolizer, libm.inside("hypot")) == "hypot");  // not __hypot_finite@GLIBC_2.15
  CHECK(name_at(symbolizer, libm.inside("cbrt")) == "cbrt");    // not cbrtf64, __cbrt
  CHECK(name_at(symbolizer, libm.inside("ldexp")) == "ldexp");  // not ldexpf32x, scalbn, __wrap_scalbn
  CHECK(name_at(symbolizer, libm.inside("frexp")) == "frexp");  // not frexpf64
}

TEST_CASE("libc's functions are named as their manual names them, without a version") {
  loaded_module libc{"libc.so.6"};
  kairos::backtrace_symbolizer symbolizer;
  CHECK(name_at(symbolizer, libc.inside("__libc_start_main")) == "__libc_start_main");  // not @@GLIBC_2.34
  CHECK(name_at(symbolizer, libc.inside("write")) == "write");                          // not __write, __libc_write
  CHECK(name_at(symbolizer, libc.inside("pwrite")) == "pwrite");                        // not __libc_pwrite, pwrite64
  CHECK(name_at(symbolizer, libc.inside("nanosleep")) == "nanosleep");                  // not __nanosleep
  CHECK(name_at(symbolizer, libc.inside("malloc")) == "malloc");                        // not __libc_malloc
  CHECK(name_at(symbolizer, libc.inside("free")) == "free");                            // not cfree@GLIBC_2.2.5
}

TEST_CASE("a stripped module's local function is named from its MiniDebugInfo (.gnu_debugdata)") {
#ifdef KAIROS_TEST_MODULE_MINIDEBUGINFO
  loaded_module module{KAIROS_TEST_MODULE_MINIDEBUGINFO};
  kairos::backtrace_symbolizer symbolizer;
  const auto& symbol = symbolizer.resolve(module.address_from("kairos_test_module_hidden_address"));
  CHECK(symbol.function == "(anonymous namespace)::hidden_work(int)");
  CHECK_FALSE(symbol.has_source());  // MiniDebugInfo holds symbols, no DWARF
#else
  kairos_test::skip("xz, objcopy or strip was not found at configure time: no MiniDebugInfo module was made");
#endif
}

TEST_CASE("libc's local functions are named from its separate debug file, found by build id") {
  const auto stack = kairos::backtrace<128>::record();
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::off};
  bool libc_debug_file = false;
  std::string names;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    const auto& symbol = symbolizer.resolve(stack.lookup_address(i));
    if (symbol.module.find("libc.so") != std::string::npos) libc_debug_file = symbol.separate_debug_file_read;
    names += symbol.function + "\n";
  }
  INFO(names);
  CHECK(names.find("\n__libc_start_main\n") != std::string::npos);
  if (!libc_debug_file) return kairos_test::skip("no separate debug file for libc here (libc6-dbg)");
  // Local to libc: in no .dynsym, only in the debug file's .symtab.
  CHECK(names.find("\n__libc_start_call_main\n") != std::string::npos);
}

namespace {

// What objdump -d says of a module's PLT sections: the entries it names "callee@plt", and the
// address where .plt starts (lazy binding's PLT0, which no entry name covers).
struct plt_listing {
  std::vector<std::pair<std::uintptr_t, std::string>> entries;
  std::uintptr_t plt_start = 0;
  bool ran = false;
};
plt_listing objdump_plt(const std::string& module) {
  plt_listing listing;
  const auto command = "objdump -d -j .plt -j .plt.sec -j .plt.got '" + module + "' 2>/dev/null";
  FILE* output = popen(command.c_str(), "r");
  if (output == nullptr) return listing;
  char line[512];
  bool in_plt = false;
  while (std::fgets(line, sizeof line, output) != nullptr) {
    const std::string text{line};
    if (text.starts_with("Disassembly of section")) in_plt = text.starts_with("Disassembly of section .plt:");
    unsigned long address = 0;
    char label[400] = {};
    if (std::sscanf(line, "%lx <%399[^>]>:", &address, label) != 2) continue;
    listing.ran = true;
    if (in_plt && listing.plt_start == 0) listing.plt_start = address;
    const std::string name{label};
    if (name.ends_with("@plt") && name.find_first_of("+-") == std::string::npos)
      listing.entries.emplace_back(address, name);
  }
  pclose(output);
  return listing;
}

std::vector<std::string> plt_modules() {
  std::vector<std::string> modules;
  std::istringstream list{KAIROS_PLT_MODULES};
  for (std::string module; std::getline(list, module, ',');) modules.push_back(module);
  return modules;
}

}  // namespace

TEST_CASE("a PLT entry is named by the function it jumps to, as objdump names it, in every PLT layout") {
  for (const auto& path : plt_modules()) {
    const auto listing = objdump_plt(path);
    if (!listing.ran) return kairos_test::skip("objdump (binutils) did not list " + path);
    INFO(path);
    loaded_module module{path.c_str()};
    kairos::backtrace_symbolizer symbolizer;
    std::string names;
    for (const auto& [address, name] : listing.entries) {
      names += name + " ";
      // The entry's first byte and one inside it.
      CHECK(symbolizer.resolve(module.bias() + address).function == name);
      CHECK(symbolizer.resolve(module.bias() + address + 1).function == name);
    }
    INFO(names);
    CHECK(names.find("hypot@plt ") != std::string::npos);  // called
    CHECK(names.find("cbrt@plt ") != std::string::npos);   // called, and taken by address: .plt.got
  }
}

TEST_CASE("a symbol without a size claims nothing past its section's end: PLT0 is not _init's") {
  for (const auto& path : plt_modules()) {
    const auto listing = objdump_plt(path);
    if (!listing.ran) return kairos_test::skip("objdump (binutils) did not list " + path);
    INFO(path);
    REQUIRE(listing.plt_start != 0);
    loaded_module module{path.c_str()};
    kairos::backtrace_symbolizer symbolizer;
    // _init (unsized, the last symbol of .init) is the nearest symbol before .plt.
    CHECK(symbolizer.resolve(module.bias() + listing.plt_start).function == "");
  }
}
