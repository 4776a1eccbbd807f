#include "preload/annotations/annotated_regions.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbolizer.hpp>

#include "preload/regions/regions.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
};

// One thread's names, by kind. The thread's own until the end, when the pipeline reads them (the
// threads that push have stopped by then, or only push names already in the set).
struct thread_names {
  pid_t pid = 0;
  std::mutex mutex;  // a new name (rare) against the reader at the end
  std::array<std::unordered_set<std::string, name_hash, std::equal_to<>>, static_cast<std::size_t>(region_kind::count)>
      by_kind;
  struct recent {
    const char* given = nullptr;
    region_kind kind{};
    const char* interned = nullptr;
  };
  std::array<recent, 32> recent_names{};
};

struct names_state {
  std::mutex mutex;  // the list
  std::deque<thread_names> threads;
  std::mutex symbols_mutex;
  std::unique_ptr<backtrace_symbolizer> symbols;  // created by the first code_location
  std::unordered_map<std::uintptr_t, std::string> locations;
};
names_state* state = new names_state;  // never destroyed: callbacks run until the process ends
std::atomic<bool> forget_parent{false};

[[gnu::tls_model("initial-exec")]] thread_local thread_names* this_thread_names = nullptr;

thread_names& names_of_this_thread() {
  if (this_thread_names != nullptr && !forget_parent.load(std::memory_order_relaxed)) [[likely]]
    return *this_thread_names;
  reentry_guard guard;
  // A fork child's one thread starts a list of its own (the parent's entries are another pid's).
  forget_parent.store(false, std::memory_order_relaxed);
  std::lock_guard lock{state->mutex};
  auto& names = state->threads.emplace_back();
  names.pid = getpid();
  return *(this_thread_names = &names);
}

[[gnu::noinline]] const char* remember(thread_names& names, const char* name, region_kind kind) {
  reentry_guard guard;
  auto& set = names.by_kind[static_cast<std::size_t>(kind)];
  auto found = set.find(std::string_view{name});
  if (found == set.end()) {
    std::lock_guard lock{names.mutex};
    found = set.emplace(name).first;
  }
  auto& slot = names.recent_names[(reinterpret_cast<std::uintptr_t>(name) >> 3) % names.recent_names.size()];
  slot = {name, kind, found->c_str()};
  return slot.interned;
}

// Names that come and go with the string they were given in (a stack buffer, a temporary
// std::string) are compared by content on a pointer's match too, at a cost only for those.
const char* interned(const char* name, region_kind kind) noexcept {
  auto& names = names_of_this_thread();
  const auto& slot = names.recent_names[(reinterpret_cast<std::uintptr_t>(name) >> 3) % names.recent_names.size()];
  if (slot.given == name && slot.kind == kind && std::strcmp(slot.interned, name) == 0) [[likely]]
    return slot.interned;
  return remember(names, name, kind);
}

}  // namespace

const char* push_annotated_region(const char* name, region_kind kind) noexcept {
  if (inside_kairos) return nullptr;
  const char* copy = interned(name == nullptr ? "(null)" : name, kind);
  user_entry_points().push_region(copy);
  return copy;
}

const char* intern_annotated_name(const char* name, region_kind kind) noexcept {
  if (inside_kairos) return nullptr;
  return interned(name == nullptr ? "(null)" : name, kind);
}

void pop_annotated_region(const char* name) noexcept {
  if (inside_kairos) return;
  user_entry_points().pop_region(name == nullptr ? "(null)" : name);
}

void for_each_annotated_name(const std::function<void(std::string_view name, region_kind kind)>& visit) {
  std::lock_guard lock{state->mutex};
  for (auto& names : state->threads) {
    if (names.pid != getpid()) continue;
    std::lock_guard thread_lock{names.mutex};
    for (std::size_t kind = 0; kind < names.by_kind.size(); ++kind)
      for (const auto& name : names.by_kind[kind]) visit(name, static_cast<region_kind>(kind));
  }
}

std::string code_location(const void* address, bool function_entry, const void* caller) {
  reentry_guard guard;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::lock_guard lock{state->symbols_mutex};
  if (const auto found = state->locations.find(at); found != state->locations.end()) return found->second;
  if (!state->symbols) state->symbols = std::make_unique<backtrace_symbolizer>(&move_above_floor, source_lines::own);
  // A return address is looked up one byte back: the call, not the instruction after it.
  const auto symbol = function_entry ? state->symbols->resolve_function_entry(at) : state->symbols->resolve(at - 1);
  std::string text;
  const auto calling = !symbol.has_function() && caller != nullptr
                           ? state->symbols->resolve(reinterpret_cast<std::uintptr_t>(caller) - 1)
                           : decltype(symbol){};
  if (!symbol.has_function() && calling.has_function())
    text = fmt::format("in {} ({}+{:#x})", calling.function, symbol.module.substr(symbol.module.rfind('/') + 1),
                       symbol.module_offset);
  else if (!symbol.has_function())
    text = fmt::format("{}+{:#x}", symbol.module.substr(symbol.module.rfind('/') + 1), symbol.module_offset);
  else if (symbol.has_source())
    text = fmt::format("{} ({}:{})", symbol.function, symbol.file.substr(symbol.file.rfind('/') + 1), symbol.line);
  else
    text = symbol.function;
  return state->locations.emplace(at, std::move(text)).first->second;
}

void annotated_regions_lock_for_fork() { state->mutex.lock(); }
void annotated_regions_unlock_after_fork() noexcept { state->mutex.unlock(); }
void annotated_regions_forget_after_fork_in_child() noexcept { forget_parent.store(true); }

}  // namespace kairos::runtime
