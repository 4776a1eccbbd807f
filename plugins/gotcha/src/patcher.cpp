// The registry of installed bindings and the pass that brings every GOT slot in line with it.
//
// Slots are never remembered: a pass walks the loaded objects (dl_iterate_phdr keeps them mapped
// while it runs) and rewrites the slots whose symbol resolves to a wrapped original. So a dlclose'd
// object leaves nothing dangling, and unwrapping finds every slot that holds a wrapper. After a
// dlopen only the objects no pass has seen are walked, as long as nothing changed since the last
// full pass (no binding came or went, no original was found, no object was unloaded): walking all
// of them again at each of MPI_Init's dozens of dlopens made patching quadratic in the libraries.
#include <kairos/plugins/gotcha/patcher.hpp>

#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>

#include <algorithm>
#include <bitset>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <kairos/plugins/gotcha/reentry_guard.hpp>

#include "elf_object.hpp"
#include "loader_hooks.hpp"
#include "memory_map.hpp"

namespace kairos::gotcha_patcher {

thread_local constinit bool inside_kairos [[gnu::tls_model("initial-exec")]] = false;

namespace detail {
namespace {

// Every binding of one symbol that resolves to one original, innermost first.
struct chain {
  std::string name;
  std::string version;
  void* original = nullptr;      // null while no loaded object defines it
  std::vector<binding*> stack;   // back() is outermost: the slots point at its wrapper
  std::vector<void*> retired;    // wrappers taken out whose slots the next pass gives back
  std::size_t slots_on_top = 0;  // counted by the last pass

  void* top() const { return stack.empty() ? original : stack.back()->wrapper; }
  bool owns(void* value) const {
    if (value == original) return true;
    for (const binding* b : stack)
      if (b->wrapper == value) return true;
    return std::find(retired.begin(), retired.end(), value) != retired.end();
  }
};

struct registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<chain>> chains;
  std::map<std::string, void*, std::less<>> resolved;  // "name@version" -> address
  std::vector<ElfW(Addr)> excluded_bases;
  std::size_t user_bindings = 0;
  std::map<const void*, std::string> wrapped_names;  // wrapper -> symbol name; never forgotten
  // What the passes since the last full one left in line: those objects (by their program headers,
  // which no two loaded objects share), while no object was unloaded (dlpi_subs) and the chains
  // did not change (full_pass_due).
  std::unordered_set<const void*> objects_in_line;
  unsigned long long unloads_seen = 0;
  bool full_pass_due = true;
};

// Never destroyed: wrappers can run during exit, after static destructors.
registry& the_registry() {
  static registry* instance = new registry;
  return *instance;
}

void split(std::string_view symbol, std::string& name, std::string& version) {
  const auto at = symbol.find('@');
  name = symbol.substr(0, at);
  version = at == std::string_view::npos ? std::string{} : std::string{symbol.substr(at + 1)};
  while (!version.empty() && version.front() == '@') version.erase(0, 1);  // "name@@VERSION"
}

std::string key_of(std::string_view name, std::string_view version) {
  std::string key{name};
  key += '@';
  key += version;
  return key;
}

// What a reference to `name` (with `version`, or the default one) binds to in the global scope:
// what a PLT slot would be bound to, with IFUNCs already resolved to their implementation.
void* resolve(registry& r, const std::string& name, const std::string& version) {
  const std::string key = key_of(name, version);
  if (auto found = r.resolved.find(key); found != r.resolved.end()) return found->second;
  void* address =
      version.empty() ? ::dlsym(RTLD_DEFAULT, name.c_str()) : ::dlvsym(RTLD_DEFAULT, name.c_str(), version.c_str());
  r.resolved.emplace(key, address);
  return address;
}

ElfW(Addr) base_of(const void* address) {
  Dl_info info{};
  return ::dladdr(address, &info) != 0 ? reinterpret_cast<ElfW(Addr)>(info.dli_fbase) : 0;
}

bool is_excluded(const registry& r, const dl_phdr_info& info) {
  static const ElfW(Addr) self = base_of(reinterpret_cast<const void*>(&the_registry));
  if (info.dlpi_addr == self) return true;  // our own calls must reach the real functions
  // The dynamic linker and the vDSO call nothing through slots worth wrapping.
  if (info.dlpi_addr != 0 && info.dlpi_addr == ::getauxval(AT_BASE)) return true;
  if (info.dlpi_addr != 0 && info.dlpi_addr == ::getauxval(AT_SYSINFO_EHDR)) return true;
  return std::find(r.excluded_bases.begin(), r.excluded_bases.end(), info.dlpi_addr) != r.excluded_bases.end();
}

// The chains a pass looks for, by name. Nearly every relocation names something else: a bitmap of
// the names' first two bytes turns those away before their name is measured and hashed.
class name_index {
 public:
  void add(chain& c) {
    prefixes_.set(prefix(c.name.c_str()));
    chains_[c.name].push_back(&c);
  }
  const std::vector<chain*>* find(const char* name) const {
    if (!prefixes_.test(prefix(name))) return nullptr;
    const auto found = chains_.find(std::string_view{name});
    return found != chains_.end() ? &found->second : nullptr;
  }

 private:
  static unsigned prefix(const char* name) {
    const auto first = static_cast<unsigned char>(name[0]);
    return first == 0 ? 0 : first << 8 | static_cast<unsigned char>(name[1]);
  }
  std::bitset<1 << 16> prefixes_;
  std::unordered_map<std::string_view, std::vector<chain*>> chains_;
};

struct pass {
  registry& r;
  name_index names;  // the chains whose original is known
  bool only_new_objects = false;
  std::vector<const void*> visited;  // (program headers) the objects this pass walked
  unsigned long long unloads = 0;    // dl_phdr_info::dlpi_subs during the pass
  // Counting mode (count_slots): no writes.
  std::string_view census_symbol;
  const void* census_value = nullptr;
  slot_census census;
  bool counting = false;
  // "name@version" keys a slot needed but the cache lacked: resolved between passes, because
  // dlsym must not run inside dl_iterate_phdr (it takes the loader lock in the other order).
  std::vector<std::pair<std::string, std::string>> unresolved;
  memory_map map;
};

bool same_name(const char* name, std::string_view wanted) {
  return std::strncmp(name, wanted.data(), wanted.size()) == 0 && name[wanted.size()] == '\0';
}

void visit_object(pass& p, const dl_phdr_info& info) {
  if (is_excluded(p.r, info)) return;
  if (!p.counting) {
    // An object was unloaded since: another may sit where it was, so every object is walked. Seen
    // at the first object (dl_iterate_phdr holds the loader's lock: the count stays as it is).
    if (p.only_new_objects && info.dlpi_subs != p.r.unloads_seen) {
      p.only_new_objects = false;
      for (auto& c : p.r.chains) c->slots_on_top = 0;
    }
    if (p.only_new_objects && p.r.objects_in_line.contains(info.dlpi_phdr)) return;
    p.visited.push_back(info.dlpi_phdr);
  }
  const elf_object object{info};
  if (!object.has_dynamic_section()) return;

  if (p.counting) {
    object.for_each_function_slot([&](const function_slot& slot) {
      if (!same_name(slot.symbol, p.census_symbol)) return;
      ++p.census.binding_symbol;
      if (__atomic_load_n(slot.address, __ATOMIC_ACQUIRE) == p.census_value) ++p.census.holding_value;
    });
    return;
  }

  std::vector<slot_write> writes;
  std::vector<chain*> written_for;
  object.for_each_function_slot([&](const function_slot& slot) {
    const auto* named = p.names.find(slot.symbol);
    if (named == nullptr) return;
    const std::string_view version = object.version_of(slot.symbol_index);
    for (chain* owner : *named) {
      chain& c = *owner;
      const std::string key = key_of(slot.symbol, version);
      const auto found = p.r.resolved.find(key);
      if (found == p.r.resolved.end()) {
        p.unresolved.emplace_back(std::string{slot.symbol}, std::string{version});
        continue;
      }
      // A slot naming another version of the symbol binds another function.
      if (found->second != c.original) continue;
      void* current = __atomic_load_n(slot.address, __ATOMIC_ACQUIRE);
      void* desired = c.top();
      if (current == desired) {
        if (!c.stack.empty()) ++c.slots_on_top;
        continue;
      }
      bool rewrite;
      if (c.stack.empty())
        rewrite = c.owns(current);  // unwrapping: only slots we changed
      else if (slot.type == R_X86_64_64)
        rewrite = c.owns(current);  // data the program may have reassigned is left alone
      else
        rewrite = true;  // a PLT/GOT slot: bound (or lazily to be bound) to the original
      if (!rewrite) continue;
      writes.push_back({slot.address, desired});
      written_for.push_back(&c);
    }
  });
  if (writes.empty()) return;

  ElfW(Addr) relro_begin = 0, relro_end = 0;
  for (std::size_t i = 0; i < info.dlpi_phnum; ++i)
    if (info.dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      relro_begin = info.dlpi_addr + info.dlpi_phdr[i].p_vaddr;
      relro_end = relro_begin + info.dlpi_phdr[i].p_memsz;
    }
  // Count per chain before apply_writes sorts the writes.
  std::vector<std::pair<void**, chain*>> owners;
  for (std::size_t i = 0; i < writes.size(); ++i) owners.emplace_back(writes[i].slot, written_for[i]);
  apply_writes(writes, relro_begin, relro_end, p.map);
  for (auto& [slot, c] : owners)
    if (!c->stack.empty() && __atomic_load_n(slot, __ATOMIC_ACQUIRE) == c->top()) ++c->slots_on_top;
}

enum class objects { all, new_ones };

// Brings every slot in line with the registry: of every loaded object, or, when nothing changed
// since the last full pass, of the objects loaded since. Caller holds the mutex.
void run_pass_locked(registry& r, objects which) {
  std::vector<std::size_t> counted_before;  // slots_on_top counts the slots of old and new objects
  for (auto& c : r.chains) counted_before.push_back(c->slots_on_top);
  for (int attempt = 0; attempt < 2; ++attempt) {
    pass p{r};
    p.only_new_objects = which == objects::new_ones && !r.full_pass_due;
    for (std::size_t i = 0; i < r.chains.size(); ++i) {
      auto& c = *r.chains[i];
      c.slots_on_top = p.only_new_objects ? counted_before[i] : 0;
      if (c.original != nullptr) p.names.add(c);
    }
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
          auto& current = *static_cast<pass*>(data);
          current.unloads = info->dlpi_subs;
          visit_object(current, *info);
          return 0;
        },
        &p);
    r.unloads_seen = p.unloads;
    if (!p.only_new_objects) {
      r.objects_in_line.clear();
      r.full_pass_due = false;
    }
    r.objects_in_line.insert(p.visited.begin(), p.visited.end());
    if (p.unresolved.empty()) break;
    for (auto& [name, version] : p.unresolved) resolve(r, name, version);
    // Walked again, now that the cache has what their slots named: the objects just walked.
    for (const void* object : p.visited) r.objects_in_line.erase(object);
    which = objects::new_ones;
  }
  for (auto& c : r.chains) c->retired.clear();
  std::erase_if(r.chains, [](const std::unique_ptr<chain>& c) { return c->stack.empty() && c->retired.empty(); });
}

chain* chain_holding(registry& r, const binding& b) {
  for (auto& c : r.chains)
    if (std::find(c->stack.begin(), c->stack.end(), &b) != c->stack.end()) return c.get();
  return nullptr;
}

chain& push_locked(registry& r, binding& b) {
  std::string name, version;
  split(b.symbol, name, version);
  void* original = resolve(r, name, version);
  chain* target = nullptr;
  for (auto& c : r.chains)
    if (c->name == name && c->version == version && c->original == original) target = c.get();
  if (target == nullptr) {
    r.chains.push_back(std::make_unique<chain>());
    target = r.chains.back().get();
    target->name = name;
    target->version = version;
    target->original = original;
  }
  // `next` is in place before any slot can lead to the wrapper.
  b.next.store(target->top(), std::memory_order_release);
  target->stack.push_back(&b);
  r.full_pass_due = true;
  return *target;
}

bool pop_locked(registry& r, binding& b) {
  chain* c = chain_holding(r, b);
  if (c == nullptr) return false;
  auto at = std::find(c->stack.begin(), c->stack.end(), &b);
  if (at + 1 != c->stack.end()) {
    // A wrapper above b now calls what b called; no slot points at b.
    (*(at + 1))->next.store(b.next.load(std::memory_order_acquire), std::memory_order_release);
  } else {
    c->retired.push_back(b.wrapper);
  }
  c->stack.erase(at);
  r.full_pass_due = true;
  return true;
}

void ensure_loader_hooks_locked(registry& r) {
  if (r.user_bindings++ != 0) return;
  push_locked(r, dlopen_hook());
  push_locked(r, dlsym_hook());
  push_locked(r, dlvsym_hook());
}

void release_loader_hooks_locked(registry& r) {
  if (--r.user_bindings != 0) return;
  pop_locked(r, dlvsym_hook());
  pop_locked(r, dlsym_hook());
  pop_locked(r, dlopen_hook());
}

}  // namespace

void* wrapper_for(void* resolved, const char* symbol, const char* version) {
  registry& r = the_registry();
  inside_kairos_scope guard;
  std::lock_guard lock{r.mutex};
  for (auto& c : r.chains) {
    if (c->original != resolved || c->stack.empty() || c->name != symbol) continue;
    if (version != nullptr && !c->version.empty() && c->version != version) continue;
    return c->stack.back()->wrapper;
  }
  return resolved;
}

}  // namespace detail

using namespace detail;

wrap_status install(binding& b) {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  wrap_status status;
  status.symbol = b.symbol;
  if (b.wrapper == nullptr || b.symbol.empty() || b.symbol.front() == '@') {
    status.failure = problem{"gotcha: cannot wrap '" + b.symbol +
                             "': a binding needs a symbol name (\"name\" or \"name@VERSION\") and a wrapper"};
    return status;
  }
  if (chain_holding(r, b) != nullptr) {
    status.failure = problem{"gotcha: '" + b.symbol + "' is already installed by this binding"};
    return status;
  }
  ensure_loader_hooks_locked(r);
  chain& c = push_locked(r, b);
  r.wrapped_names[b.wrapper] = c.name;
  status.installed = true;
  run_pass_locked(r, objects::all);
  status.defined = c.original != nullptr;
  status.slots_patched = c.slots_on_top;
  if (!status.defined)
    status.failure = problem{"gotcha: '" + b.symbol +
                             "' is defined by no loaded object; it will be wrapped if a library loaded "
                             "later with dlopen defines it"};
  else if (status.slots_patched == 0)
    status.failure = problem{"gotcha: '" + b.symbol +
                             "' is bound by no GOT slot of any loaded object, so no call reaches the "
                             "wrapper (called only inside its own library, hidden, or never called); "
                             "libraries loaded later that call it will be wrapped"};
  return status;
}

bool remove(binding& b) {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  if (!pop_locked(r, b)) return false;
  release_loader_hooks_locked(r);
  run_pass_locked(r, objects::all);
  return true;
}

std::string wrapped_symbol(const void* wrapper) {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  const auto found = r.wrapped_names.find(wrapper);
  return found != r.wrapped_names.end() ? found->second : std::string{};
}

void reapply() {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  // A new object may define what was defined nowhere before.
  std::erase_if(r.resolved, [](const auto& entry) { return entry.second == nullptr; });
  for (auto& c : r.chains) {
    if (c->original != nullptr) continue;
    c->original = resolve(r, c->name, c->version);
    if (c->original == nullptr) continue;
    r.full_pass_due = true;  // slots of objects walked before now bind it too
    if (!c->stack.empty()) c->stack.front()->next.store(c->original, std::memory_order_release);
  }
  run_pass_locked(r, objects::new_ones);
}

slot_census count_slots(std::string_view symbol, const void* value) {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  pass p{r};
  p.counting = true;
  p.census_symbol = symbol;
  p.census_value = value;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        visit_object(*static_cast<pass*>(data), *info);
        return 0;
      },
      &p);
  return p.census;
}

void exclude_object(const void* address_in_object) {
  inside_kairos_scope guard;
  registry& r = the_registry();
  std::lock_guard lock{r.mutex};
  Dl_info info{};
  if (::dladdr(address_in_object, &info) != 0) r.excluded_bases.push_back(reinterpret_cast<ElfW(Addr)>(info.dli_fbase));
}

bool available() noexcept { return true; }

}  // namespace kairos::gotcha_patcher
