// The backtrace plugin's behaviour outside signal handlers: what is captured, how it is trimmed and
// truncated, and what symbolization gives for addresses with and without debug information.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <kairos/component_tuple.hpp>
#include <kairos/demangle.hpp>
#include <kairos/plugins/backtrace.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>

#include "kairos_test_skip.hpp"

namespace chain {
kairos::backtrace<16> captured;
int record_line = 0;

[[gnu::noinline]] void c() {
  record_line = __LINE__ + 1;
  captured = kairos::backtrace<16>::record();
  asm volatile("" ::: "memory");  // keeps the calls above out of tail position
}
[[gnu::noinline]] void b() {
  c();
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void a() {
  b();
  asm volatile("" ::: "memory");
}
}  // namespace chain

namespace inlined {
std::uintptr_t returned_to = 0;
int call_line = 0;

[[gnu::noinline]] void note_return_address() {
  returned_to = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
}
[[gnu::always_inline]] inline void inner() {
  note_return_address();  // the return address lies in inner's code, inlined into outer
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void outer() {
  // clang-format off
  call_line = __LINE__; inner();  // the call site shares the line that __LINE__ names
  // clang-format on
  asm volatile("" ::: "memory");
}
}  // namespace inlined

namespace deep {
[[gnu::noinline]] kairos::backtrace<16> recurse(int depth) {
  if (depth == 0) return kairos::backtrace<16>::record();
  auto result = recurse(depth - 1);
  asm volatile("" ::: "memory");
  return result;
}
}  // namespace deep

namespace {
std::vector<std::string> function_names(kairos::backtrace_symbolizer& symbolizer, const kairos::backtrace<16>& stack,
                                        std::size_t count) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count && i < stack.size(); ++i)
    names.push_back(symbolizer.resolve(stack.lookup_address(i)).function);
  return names;
}
bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

TEST_CASE("the plugin is available on this machine: libunwind and libdw were found at build time") {
  CHECK(kairos::backtrace<>::available());
  CHECK(kairos::backtrace<>::unavailable_reason().empty());
  CHECK(kairos::backtrace_symbolizer::file_line_available_at_build);
}

TEST_CASE("frames of a known call chain c <- b <- a symbolize to those functions, innermost first") {
  chain::a();
  const auto& stack = chain::captured;
  REQUIRE(stack.size() >= 4);
  CHECK(stack.path() == kairos::backtrace_path::libunwind);
  kairos::backtrace_symbolizer symbolizer;
  const auto names = function_names(symbolizer, stack, 3);
  CHECK(names == std::vector<std::string>{"chain::c()", "chain::b()", "chain::a()"});
}

TEST_CASE("the first frame of record() is its caller: kairos's own frames are dropped") {
  chain::a();
  kairos::backtrace_symbolizer symbolizer;
  const auto& top = symbolizer.resolve(chain::captured.lookup_address(0));
  CHECK(top.function == "chain::c()");
  CHECK(top.function.find("kairos") == std::string::npos);
}

TEST_CASE("file:line comes from DWARF where the code was built with -g") {
  chain::a();
  kairos::backtrace_symbolizer symbolizer;
  const auto& top = symbolizer.resolve(chain::captured.lookup_address(0));
  INFO("file " << top.file << " line " << top.line);
  CHECK(ends_with(top.file, "backtrace_tests.cpp"));
  CHECK(top.line == chain::record_line);
  CHECK(ends_with(top.module, "kairos_backtrace_tests"));
}

TEST_CASE("inlined code is named by its function and the line of the outermost inlined call") {
  // The line table says inner's line; the symbol says outer: file:line is outer's own line, the
  // call site, so a report never pairs a function with another function's line.
  inlined::outer();
  kairos::backtrace_symbolizer symbolizer;
  const auto& symbol = symbolizer.resolve(inlined::returned_to - 1);
  INFO(symbol.function << " at " << symbol.file << ":" << symbol.line);
  CHECK(symbol.function == "inlined::outer()");
  CHECK(ends_with(symbol.file, "backtrace_tests.cpp"));
  CHECK(symbol.line == inlined::call_line);
}

TEST_CASE("source_lines: own keeps the program's file:line and reads no separate debug file, off reads none") {
  chain::a();
  const auto own_frame = chain::captured.lookup_address(0);
  // A function of libc, whose DWARF (where any) is in a separate debug file (libc6-dbg).
  const auto libc_address = reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, "getpid")) + 1;
  kairos::backtrace_symbolizer own{nullptr, kairos::source_lines::own};
  CHECK(ends_with(own.resolve(own_frame).file, "backtrace_tests.cpp"));
  const auto& libc_own = own.resolve(libc_address);
  CHECK(libc_own.has_function());
  CHECK(libc_own.file.empty());
  kairos::backtrace_symbolizer off{nullptr, kairos::source_lines::off};
  CHECK(off.resolve(own_frame).file.empty());
  CHECK(off.resolve(own_frame).function == own.resolve(own_frame).function);
  kairos::backtrace_symbolizer all{nullptr, kairos::source_lines::all};
  const auto& libc_all = all.resolve(libc_address);
  CHECK(libc_all.function == libc_own.function);  // the symbol table is read either way
  if (libc_all.file.empty())
    return kairos_test::skip("no separate debug file for libc here (libc6-dbg): only own and off were checked");
  CHECK(libc_all.line > 0);
}

TEST_CASE("deep recursion is cut at N frames and flagged truncated") {
  const auto stack = deep::recurse(200);
  CHECK(stack.size() == 16);
  CHECK(stack.truncated());
  kairos::backtrace_symbolizer symbolizer;
  for (const auto& name : function_names(symbolizer, stack, 16)) CHECK(name == "deep::recurse(int)");
}

TEST_CASE("a shallow stack is not flagged truncated") {
  chain::a();
  CHECK_FALSE(chain::captured.truncated());
  CHECK(chain::captured.size() < 16);
}

TEST_CASE("an address in a stripped module gives module + offset and no file:line") {
  void* module = dlopen(KAIROS_TEST_MODULE_STRIPPED, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(module != nullptr);
  auto hidden_address = reinterpret_cast<std::uintptr_t (*)()>(dlsym(module, "kairos_test_module_hidden_address"));
  REQUIRE((hidden_address != nullptr));
  const std::uintptr_t address = hidden_address();

  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<void*>(address), &info) != 0);
  kairos::backtrace_symbolizer symbolizer;
  const auto& symbol = symbolizer.resolve(address);
  CHECK(symbol.module == KAIROS_TEST_MODULE_STRIPPED);
  CHECK(symbol.module_offset == address - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
  CHECK(symbol.module_offset < 0x100000);
  CHECK_FALSE(symbol.has_source());
  // Stripped: no .symtab, and the function is not exported, so no name may be invented for it.
  CHECK(symbol.function.find("hidden_work") == std::string::npos);
  dlclose(module);
}

TEST_CASE("the same module built with -g gives the hidden function's name and file:line") {
  void* module = dlopen(KAIROS_TEST_MODULE, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(module != nullptr);
  auto hidden_address = reinterpret_cast<std::uintptr_t (*)()>(dlsym(module, "kairos_test_module_hidden_address"));
  REQUIRE((hidden_address != nullptr));
  kairos::backtrace_symbolizer symbolizer;  // created after dlopen: finds the module in its first scan
  const auto& symbol = symbolizer.resolve(hidden_address());
  CHECK(symbol.module == KAIROS_TEST_MODULE);
  CHECK(symbol.function == "(anonymous namespace)::hidden_work(int)");
  CHECK(ends_with(symbol.file, "test_module.cpp"));
  CHECK(symbol.line > 0);
  dlclose(module);
}

TEST_CASE("a module loaded after the symbolizer was created is still found") {
  kairos::backtrace_symbolizer symbolizer;
  void* module = dlopen(KAIROS_TEST_MODULE, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(module != nullptr);
  auto hidden_address = reinterpret_cast<std::uintptr_t (*)()>(dlsym(module, "kairos_test_module_hidden_address"));
  const auto& symbol = symbolizer.resolve(hidden_address());
  CHECK(symbol.function == "(anonymous namespace)::hidden_work(int)");
  CHECK(symbol.has_source());
  dlclose(module);
}

TEST_CASE("an address outside every loaded object is named by its mapping, else [unknown] with its address") {
  // Executable anonymous memory is a JIT's code ([jit]); other anonymous memory is [anon].
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* data = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  REQUIRE(data != MAP_FAILED);
  {
    kairos::backtrace_symbolizer symbolizer;
    const auto& in_code = symbolizer.resolve(reinterpret_cast<std::uintptr_t>(code) + 16);
    CHECK(in_code.module == "[jit]");
    CHECK(in_code.module_offset == 16);
    CHECK(in_code.function.empty());
    CHECK_FALSE(in_code.has_source());
    const auto& in_data = symbolizer.resolve(reinterpret_cast<std::uintptr_t>(data) + 32);
    CHECK(in_data.module == "[anon]");
    CHECK(in_data.module_offset == 32);
  }
  munmap(code, 4096);
  munmap(data, 4096);
  // The first page is never mapped (vm.mmap_min_addr): nothing names it.
  const std::uintptr_t address = 16;
  kairos::backtrace_symbolizer symbolizer;
  const auto& symbol = symbolizer.resolve(address);
  CHECK(symbol.module == "[unknown]");
  CHECK(symbol.module_offset == address);
  CHECK(symbol.function.empty());
}

namespace {
int collect_executable_ranges(dl_phdr_info* info, std::size_t, void* out) {
  auto& ranges = *static_cast<std::vector<std::pair<std::uintptr_t, std::uintptr_t>>*>(out);
  if (std::strstr(info->dlpi_name, "libc.so") == nullptr && std::strstr(info->dlpi_name, "libstdc++") == nullptr)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X) != 0)
      ranges.emplace_back(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr,
                          info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz);
  return 0;
}
}  // namespace

namespace {
// libdwfl on its own, with this process's modules reported: what kairos's symbolizer must agree with.
Dwfl* libdwfl_of_this_process() {
  static const Dwfl_Callbacks callbacks{dwfl_linux_proc_find_elf, dwfl_build_id_find_debuginfo, nullptr, nullptr};
  Dwfl* dwfl = dwfl_begin(&callbacks);
  if (dwfl == nullptr) return nullptr;
  dwfl_report_begin(dwfl);
  const bool reported = dwfl_linux_proc_report(dwfl, getpid()) == 0;
  dwfl_report_end(dwfl, nullptr, nullptr);
  if (!reported) dwfl_end(dwfl);
  return reported ? dwfl : nullptr;
}
}  // namespace

// The symbol libdwfl names at an address and the one kairos names are the same one (the same
// start: aliases) when both are named and the offsets agree; the alias kairos picks among them
// is symbol_names_tests.cpp's subject, as are PLT entries, which kairos names and libdwfl does not.
TEST_CASE("a module's index finds at every address the symbol libdwfl's own lookup finds") {
  // Thousands of addresses over every module's code (libc's and libstdc++'s symbol tables in their
  // separate debug files) through kairos's index, read from the ELF data.
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  dl_iterate_phdr(&collect_executable_ranges, &ranges);
  REQUIRE(ranges.size() >= 2);
  Dwfl* reference = libdwfl_of_this_process();
  REQUIRE(reference != nullptr);
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::off};
  int compared = 0;
  int named = 0;
  int plt_entries = 0;
  for (const auto& [low, high] : ranges)
    for (std::uintptr_t address = low; address < high; address += 797) {
      std::string expected;
      GElf_Off offset = 0;
      GElf_Sym symbol{};
      if (Dwfl_Module* module = dwfl_addrmodule(reference, address))
        if (const char* name = dwfl_module_addrinfo(module, address, &offset, &symbol, nullptr, nullptr, nullptr))
          expected = kairos::demangle(name);
      const auto found = symbolizer.resolve_uncached(address);
      if (expected.empty() && found.function.ends_with("@plt")) {
        ++plt_entries;
        continue;
      }
      CHECK_MESSAGE(found.has_function() == !expected.empty(), "at ", found.module, "+", found.module_offset);
      if (!expected.empty()) {
        ++named;
        CHECK_MESSAGE(found.function_offset == offset, "at ", found.module, "+", found.module_offset);
      }
      ++compared;
    }
  dwfl_end(reference);
  MESSAGE(compared, " addresses compared, ", named, " of them named by libdwfl; ", plt_entries, " in PLT entries");
  CHECK(named > 1000);
  const auto reads = symbolizer.symbol_tables_read();
  CHECK(reads.direct >= 2);  // libc and libstdc++ at least: the index under test is the direct one
  CHECK(reads.through_libdwfl == 0);
}

TEST_CASE("every address inside a function finds the symbol libdwfl finds") {
  // Every byte of two libc functions, to their last: the index's extents end where libdwfl's do.
  Dwfl* reference = libdwfl_of_this_process();
  REQUIRE(reference != nullptr);
  kairos::backtrace_symbolizer symbolizer{nullptr, kairos::source_lines::off};
  int compared = 0;
  for (const char* function : {"qsort_r", "getaddrinfo"}) {
    const auto start = reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, function));
    REQUIRE(start != 0);
    Dwfl_Module* module = dwfl_addrmodule(reference, start);
    REQUIRE(module != nullptr);
    GElf_Off offset = 0;
    GElf_Sym symbol{};
    REQUIRE(dwfl_module_addrinfo(module, start, &offset, &symbol, nullptr, nullptr, nullptr) != nullptr);
    for (std::uintptr_t address = start; address < start + symbol.st_size; ++address) {
      const char* name = dwfl_module_addrinfo(module, address, &offset, &symbol, nullptr, nullptr, nullptr);
      REQUIRE(name != nullptr);
      const auto found = symbolizer.resolve_uncached(address);
      CHECK(found.function == function);
      CHECK(found.function_offset == offset);
      ++compared;
    }
  }
  dwfl_end(reference);
  CHECK(compared > 1000);
}

TEST_CASE("symbolization is cached per address") {
  chain::a();
  kairos::backtrace_symbolizer symbolizer;
  const auto first = symbolizer.resolve_all(chain::captured);
  const auto cached = symbolizer.cached_addresses();
  CHECK(cached == chain::captured.size());
  const auto again = symbolizer.resolve_all(chain::captured);
  CHECK(symbolizer.cached_addresses() == cached);
  REQUIRE(again.size() == first.size());
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(again[i].function == first[i].function);
  CHECK(&symbolizer.resolve(chain::captured.lookup_address(0)) ==
        &symbolizer.resolve(chain::captured.lookup_address(0)));
}

TEST_CASE("a nested capture on the same thread (inside the dynamic loader guard) takes the libgcc path") {
  kairos::backtrace_prewarm();
  kairos::backtrace<16> stack;
  {
    kairos::dl_guard inside_loader;
    CHECK(kairos::dl_guard::active());
    stack.sample();
  }
  CHECK_FALSE(kairos::dl_guard::active());
  CHECK(stack.path() == kairos::backtrace_path::libgcc);
  REQUIRE(stack.size() >= 1);
  kairos::backtrace_symbolizer symbolizer;
  // The libgcc path trims kairos's frames the same way: the first frame is this test's function.
  CHECK(symbolizer.resolve(stack.lookup_address(0)).module.find("kairos_backtrace_tests") != std::string::npos);
}

namespace {
// An address in the caller's frame, on the registered stack.
[[gnu::noinline]] std::uintptr_t current_stack_pointer() {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}
}  // namespace

TEST_CASE("the unwind-table walk never leaves the registered stack, whatever the registers say") {
  if (!kairos::backtrace_detail::unwind_tables_at_build)
    return kairos_test::skip("kairos's unwind tables need x86-64 and glibc 2.35 or later");
  kairos::unwind_tables_register_thread();
  kairos::build_unwind_tables(true);  // every function of every loaded module
  std::uintptr_t frames[64];
  const auto code = reinterpret_cast<std::uintptr_t>(&std::memcpy);
  // A stack pointer off the registered stack (a heap buffer, as a sigaltstack or a coroutine's
  // stack would be) ends the walk before anything is read.
  std::vector<std::uintptr_t> heap(4096, code);
  const auto on_heap = kairos::backtrace_detail::walk_with_tables(
      code, reinterpret_cast<std::uintptr_t>(heap.data()) + 1024, 0, frames, 64);
  CHECK_FALSE(on_heap.finished());
  // A thread that never registered its stack: the walk is not tried.
  std::thread unregistered([&] {
    std::uintptr_t sp = current_stack_pointer();
    CHECK_FALSE(kairos::backtrace_detail::walk_with_tables(code, sp, 0, frames, 64).finished());
  });
  unregistered.join();
  // Garbage: instruction addresses all over libc's code, stack pointers anywhere above this
  // frame, any frame pointer. Wrong frames are fine; a fault (the test program dies) or an
  // endless walk (ctest's timeout) is not.
  std::uint64_t random = 0x243f6a8885a308d3u;
  auto next = [&] { return random = random * 6364136223846793005u + 1442695040888963407u; };
  Dl_info libc{};
  REQUIRE(dladdr(reinterpret_cast<void*>(code), &libc) != 0);
  const auto libc_base = reinterpret_cast<std::uintptr_t>(libc.dli_fbase);
  const std::uintptr_t sp = current_stack_pointer();
  int finished = 0;
  for (int i = 0; i < 100000; ++i) {
    const auto pc = libc_base + next() % (1u << 20);
    const auto stack = (sp + next() % 8192) & ~std::uintptr_t{7};
    finished += kairos::backtrace_detail::walk_with_tables(pc, stack, next(), frames, 64).finished();
  }
  MESSAGE(finished << " of 100000 random walks finished");
}

namespace {
// This function's registers and the walk of its own stack in place, then the same walk over a
// copy of `copy_size` bytes of that stack (a perf sample's STACK_USER, as another thread reads it).
struct two_walks {
  std::vector<std::uintptr_t> in_place, copied;
  kairos::copied_stack_walk copied_walk;
};
[[gnu::noinline]] two_walks walk_here_and_a_copy(std::size_t copy_size) {
  std::uintptr_t pc, sp, bp;
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
  copy_size = std::min<std::size_t>(copy_size, kairos::backtrace_detail::thread_stack_top - sp);
  std::vector<unsigned char> copy(copy_size);
  std::memcpy(copy.data(), reinterpret_cast<const void*>(sp), copy_size);
  std::uintptr_t frames[64];
  two_walks result;
  const auto own = kairos::backtrace_detail::walk_with_tables(pc, sp, bp, frames, 64);
  result.in_place.assign(frames, frames + own.count);
  result.copied_walk = kairos::walk_copied_stack(pc, sp, bp, copy.data(), copy.size(), frames, 64);
  result.copied.assign(frames, frames + result.copied_walk.count);
  return result;
}
}  // namespace

TEST_CASE("a copy of a stack walks to the frames the stack itself gives, and a short copy is cut off") {
  if (!kairos::backtrace_detail::unwind_tables_at_build)
    return kairos_test::skip("kairos's unwind tables need x86-64 and glibc 2.35 or later");
  kairos::unwind_tables_register_thread();
  kairos::use_unwind_tables();  // nothing compiled yet: the copied walk compiles what it misses
  auto whole = walk_here_and_a_copy(1 << 20);
  REQUIRE(whole.copied_walk.finished);
  CHECK_FALSE(whole.copied_walk.truncated);
  CHECK(whole.copied.size() >= 3);  // this function, the test case, doctest's runner...
  kairos::build_unwind_tables(true);
  whole = walk_here_and_a_copy(1 << 20);
  CHECK(whole.copied == whole.in_place);
  const auto cut = walk_here_and_a_copy(64);
  CHECK(cut.copied_walk.truncated);
  CHECK(cut.copied.size() < whole.copied.size());
  CHECK(cut.copied.front() == whole.copied.front());
}

TEST_CASE("a copied stack that ends goes on with the kernel's frame-pointer chain from the link it stopped at") {
  if (!kairos::backtrace_detail::unwind_tables_at_build)
    return kairos_test::skip("kairos's unwind tables need x86-64 and glibc 2.35 or later");
  kairos::use_unwind_tables();
  // JIT code (addresses in no module) with frame pointers: two links in a 64-byte copy, the third
  // beyond it, where the kernel read on (its chain: the ip, then the return address beside each link).
  const std::uintptr_t sp = 0x7f0000001000;
  std::uintptr_t copy[8] = {};
  copy[2] = sp + 48, copy[3] = 0x2000;   // the link at sp + 16
  copy[6] = sp + 200, copy[7] = 0x3000;  // the link at sp + 48; the next, sp + 200, lies beyond
  const std::uint64_t chain[] = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  std::uintptr_t frames[64];
  auto walk = kairos::walk_copied_stack(0x1000, sp, sp + 16, copy, sizeof copy, frames, 64, chain, 5, 127);
  CHECK(walk.copy_ended);
  CHECK(walk.chained == 2);
  CHECK(walk.chain_ended);
  CHECK(walk.finished);
  CHECK_FALSE(walk.truncated);
  CHECK(std::vector<std::uintptr_t>(frames, frames + walk.count) ==
        std::vector<std::uintptr_t>{0x1000, 0x2000, 0x3000, 0x4000, 0x5000});
  // Without the chain the stack is cut where the copy ends.
  walk = kairos::walk_copied_stack(0x1000, sp, sp + 16, copy, sizeof copy, frames, 64);
  CHECK(walk.count == 3);
  CHECK(walk.truncated);
  // A chain that is not this stack's (a return address the copy contradicts) is not used.
  const std::uint64_t other[] = {0x1000, 0x2000, 0x3333, 0x4000, 0x5000};
  walk = kairos::walk_copied_stack(0x1000, sp, sp + 16, copy, sizeof copy, frames, 64, other, 5, 127);
  CHECK(walk.chained == 0);
  CHECK(walk.truncated);
  // A chain as long as the kernel gives may go on beyond it: still cut.
  walk = kairos::walk_copied_stack(0x1000, sp, sp + 16, copy, sizeof copy, frames, 64, chain, 5, 5);
  CHECK(walk.chained == 2);
  CHECK(walk.truncated);
}

namespace {
struct counts_cleanup {
  int& cleanups;
  ~counts_cleanup() { ++cleanups; }
};
[[gnu::noinline]] void throw_through_frames(int depth, int& cleanups) {
  counts_cleanup cleanup{cleanups};
  if (depth == 1) throw std::runtime_error("thrown through 3 frames");
  throw_through_frames(depth - 1, cleanups);
  asm volatile("" ::: "memory");  // not a tail call: each frame stays on the stack
}
}  // namespace

TEST_CASE("linking kairos::backtrace leaves C++ exceptions on libgcc's unwinder, not libunwind's") {
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<void*>(&_Unwind_RaiseException), &info) != 0);
  CHECK(std::string{info.dli_fname}.find("libgcc_s") != std::string::npos);
  // And that unwinder runs the cleanups of every frame it crosses and delivers the exception whole.
  int cleanups = 0;
  CHECK_THROWS_WITH_AS(throw_through_frames(3, cleanups), "thrown through 3 frames", std::runtime_error);
  CHECK(cleanups == 3);
}

TEST_CASE("backtrace_timestamp is the wall-clock time of the sample") {
  kairos::backtrace_timestamp stamp;
  timespec before{};
  clock_gettime(CLOCK_REALTIME, &before);
  stamp.sample();
  const std::int64_t before_ns = std::int64_t{before.tv_sec} * 1'000'000'000 + before.tv_nsec;
  CHECK(stamp.get() >= before_ns);
  CHECK(stamp.get() - before_ns < 1'000'000'000);
}

TEST_CASE("backtrace_metrics: peak RSS rises when 64 MiB is touched, and the thread's faults with it") {
  const auto before = kairos::backtrace_metrics::record();
  constexpr std::size_t size = 64u << 20;
  auto* memory = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(memory != MAP_FAILED);
  std::memset(memory, 1, size);
  kairos::backtrace_metrics metrics;
  metrics.sample();
  munmap(memory, size);
  CHECK(metrics.value.peak_rss_bytes >= before.peak_rss_bytes + (48 << 20));
  CHECK(metrics.value.minor_page_faults >= before.minor_page_faults + 1000);
  CHECK(metrics.value.thread_cpu_time_ns > before.thread_cpu_time_ns);
  CHECK(metrics.get()[0] == doctest::Approx(metrics.value.peak_rss_bytes / (1024.0 * 1024.0)));
}

TEST_CASE("the three sampling components work as one component_tuple") {
  kairos::component_tuple<kairos::backtrace_timestamp, kairos::backtrace<32>, kairos::backtrace_metrics> sample{
      "sample"};
  sample.sample();
  CHECK(sample.component<kairos::backtrace_timestamp>().get() > 0);
  CHECK(sample.component<kairos::backtrace<32>>().size() > 0);
  CHECK(sample.component<kairos::backtrace_metrics>().value.peak_rss_bytes > 0);
}
