#include "loader_hooks.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <kairos/plugins/gotcha/call_through.hpp>
#include <kairos/plugins/gotcha/reentry_guard.hpp>

using dlsym_function = void* (*)(void*, const char*);
using dlvsym_function = void* (*)(void*, const char*, const char*);
using dlopen_function = void* (*)(const char*, int);

// The real functions, reached through this library's own GOT, which is never patched.
extern "C" {
[[gnu::visibility("hidden")]] dlsym_function kairos_gotcha_real_dlsym = &::dlsym;
[[gnu::visibility("hidden")]] dlvsym_function kairos_gotcha_real_dlvsym = &::dlvsym;
[[gnu::visibility("hidden")]] void* kairos_gotcha_dlsym_lookup(void* handle, const char* name);
[[gnu::visibility("hidden")]] void* kairos_gotcha_dlvsym_lookup(void* handle, const char* name, const char* version);
[[gnu::visibility("hidden")]] void kairos_gotcha_dlsym_entry();
[[gnu::visibility("hidden")]] void kairos_gotcha_dlvsym_entry();
}

// glibc resolves RTLD_NEXT (and RTLD_DEFAULT's local scope) relative to the object that called
// dlsym, found from the return address. The entries therefore reach glibc or the lookup below by
// a jump, never a call, so the caller's return address is still the one glibc sees; only lookups
// that are not RTLD_NEXT can return a wrapper (RTLD_NEXT asks for what lies below a caller).
asm(R"(
  .text
  .p2align 4
  .type kairos_gotcha_dlsym_entry, @function
kairos_gotcha_dlsym_entry:
  .cfi_startproc
  endbr64
  cmpq $-1, %rdi
  je 1f
  jmp kairos_gotcha_dlsym_lookup
1:
  jmp *kairos_gotcha_real_dlsym(%rip)
  .cfi_endproc
  .size kairos_gotcha_dlsym_entry, .-kairos_gotcha_dlsym_entry

  .p2align 4
  .type kairos_gotcha_dlvsym_entry, @function
kairos_gotcha_dlvsym_entry:
  .cfi_startproc
  endbr64
  cmpq $-1, %rdi
  je 1f
  jmp kairos_gotcha_dlvsym_lookup
1:
  jmp *kairos_gotcha_real_dlvsym(%rip)
  .cfi_endproc
  .size kairos_gotcha_dlvsym_entry, .-kairos_gotcha_dlvsym_entry
)");

namespace kairos::gotcha_patcher::detail {
namespace {

// Reached by a jump from the entry: the return address is the caller of dlsym.
void* caller_scope_lookup(void* handle, const char* name, const char* version, void* caller) {
  // The lookup the program asked for is its own time (call_through.hpp); what follows is kairos's.
  void* found = version != nullptr ? call_through(kairos_gotcha_real_dlvsym, handle, name, version)
                                   : call_through(kairos_gotcha_real_dlsym, handle, name);
  if (found == nullptr && handle == RTLD_DEFAULT) {
    // RTLD_DEFAULT also searches the caller's own dependencies when it was loaded RTLD_LOCAL.
    Dl_info info{};
    link_map* caller_map = nullptr;
    if (::dladdr1(caller, &info, reinterpret_cast<void**>(&caller_map), RTLD_DL_LINKMAP) != 0 && caller_map != nullptr)
      found = version != nullptr ? kairos_gotcha_real_dlvsym(caller_map, name, version)
                                 : kairos_gotcha_real_dlsym(caller_map, name);
  }
  if (found == nullptr || inside_kairos) return found;
  return wrapper_for(found, name, version);
}

std::string directory_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string{"."} : std::string{path.substr(0, slash)};
}

std::string executable_path() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  return length > 0 ? std::string(buffer, static_cast<std::size_t>(length)) : std::string{};
}

// First existing `file` in the ':'-separated `directories`, with $ORIGIN expanded.
std::string search_directories(std::string_view directories, std::string_view origin, const char* file) {
  while (!directories.empty()) {
    const auto colon = directories.find(':');
    std::string directory{directories.substr(0, colon)};
    directories = colon == std::string_view::npos ? std::string_view{} : directories.substr(colon + 1);
    for (std::string_view token : {std::string_view{"${ORIGIN}"}, std::string_view{"$ORIGIN"}})
      for (auto at = directory.find(token); at != std::string::npos; at = directory.find(token))
        directory.replace(at, token.size(), origin);
    if (directory.empty()) continue;
    std::string candidate = directory + "/" + file;
    struct stat status {};
    if (::stat(candidate.c_str(), &status) == 0 && S_ISREG(status.st_mode)) return candidate;
  }
  return {};
}

// dlopen of a bare name searches the *caller's* RPATH/RUNPATH. Called from here it would search
// this library's, so the caller's search path is applied first: RPATH (when there is no RUNPATH),
// then LD_LIBRARY_PATH (left to dlopen), then RUNPATH. Returns a path, or empty for "as given".
std::string path_as_seen_by(const char* file, void* caller) {
  if (file == nullptr || std::strchr(file, '/') != nullptr) return {};
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || map == nullptr ||
      map->l_ld == nullptr)
    return {};
  const char* strings = nullptr;
  ElfW(Addr) runpath = 0, rpath = 0;
  bool has_runpath = false, has_rpath = false;
  for (const ElfW(Dyn)* entry = map->l_ld; entry->d_tag != DT_NULL; ++entry) {
    if (entry->d_tag == DT_STRTAB) {
      const ElfW(Addr) value = entry->d_un.d_ptr;
      strings = reinterpret_cast<const char*>(value >= map->l_addr ? value : map->l_addr + value);
    } else if (entry->d_tag == DT_RUNPATH) {
      runpath = entry->d_un.d_val;
      has_runpath = true;
    } else if (entry->d_tag == DT_RPATH) {
      rpath = entry->d_un.d_val;
      has_rpath = true;
    }
  }
  if (strings == nullptr || (!has_runpath && !has_rpath)) return {};
  const std::string origin = directory_of(
      map->l_name != nullptr && map->l_name[0] != '\0' ? std::string_view{map->l_name} : executable_path());
  if (!has_runpath) return search_directories(strings + rpath, origin, file);
  if (const char* library_path = std::getenv("LD_LIBRARY_PATH"))
    if (!search_directories(library_path, origin, file).empty()) return {};
  return search_directories(strings + runpath, origin, file);
}

}  // namespace
}  // namespace kairos::gotcha_patcher::detail

using namespace kairos::gotcha_patcher;

extern "C" void* kairos_gotcha_dlsym_lookup(void* handle, const char* name) {
  return detail::caller_scope_lookup(handle, name, nullptr, __builtin_return_address(0));
}

extern "C" void* kairos_gotcha_dlvsym_lookup(void* handle, const char* name, const char* version) {
  return detail::caller_scope_lookup(handle, name, version, __builtin_return_address(0));
}

namespace {

void* dlopen_then_patch(const char* file, int flags) {
  void* caller = __builtin_return_address(0);
  const std::string path = [&] {
    inside_kairos_scope guard;
    return detail::path_as_seen_by(file, caller);
  }();
  auto* real = reinterpret_cast<dlopen_function>(detail::dlopen_hook().next.load(std::memory_order_acquire));
  void* handle = kairos::call_through(real, path.empty() ? file : path.c_str(), flags);
  // Constructors of the new objects have run unwrapped; everything they bind is patched now.
  if (handle != nullptr) reapply();
  return handle;
}

}  // namespace

namespace kairos::gotcha_patcher::detail {

binding& dlopen_hook() {
  static binding hook{"dlopen", reinterpret_cast<void*>(&dlopen_then_patch), {}};
  return hook;
}
binding& dlsym_hook() {
  static binding hook{"dlsym", reinterpret_cast<void*>(&kairos_gotcha_dlsym_entry), {}};
  return hook;
}
binding& dlvsym_hook() {
  static binding hook{"dlvsym", reinterpret_cast<void*>(&kairos_gotcha_dlvsym_entry), {}};
  return hook;
}

}  // namespace kairos::gotcha_patcher::detail
