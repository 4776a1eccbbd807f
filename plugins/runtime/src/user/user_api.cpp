// libkairos-user.so: each function is one load of a function pointer and a branch; the pointers
// are null (calls are no-ops) until libkairos.so attaches (see entry_points.h).
#include <dlfcn.h>

#include <atomic>

#include <kairos/user.h>

#include "entry_points.h"

namespace {

struct dispatch_table {
  std::atomic<void (*)(const char*)> push_region{nullptr};
  std::atomic<void (*)(const char*)> pop_region{nullptr};
  std::atomic<void (*)()> start{nullptr};
  std::atomic<void (*)()> stop{nullptr};
  std::atomic<void (*)()> disable_thread{nullptr};
  std::atomic<void (*)()> enable_thread{nullptr};
  std::atomic<int (*)()> is_active{nullptr};
  std::atomic<void (*)(const char*)> progress{nullptr};
  std::atomic<void (*)(const char*)> progress_begin{nullptr};
  std::atomic<void (*)(const char*)> progress_end{nullptr};
};

constinit dispatch_table table;

void attach(const kairos_entry_points* entry) {
  if (!entry || entry->version != KAIROS_ENTRY_POINTS_VERSION) return;
  table.push_region.store(entry->push_region, std::memory_order_release);
  table.pop_region.store(entry->pop_region, std::memory_order_release);
  table.start.store(entry->start, std::memory_order_release);
  table.stop.store(entry->stop, std::memory_order_release);
  table.disable_thread.store(entry->disable_thread, std::memory_order_release);
  table.enable_thread.store(entry->enable_thread, std::memory_order_release);
  table.is_active.store(entry->is_active, std::memory_order_release);
  table.progress.store(entry->progress, std::memory_order_release);
  table.progress_begin.store(entry->progress_begin, std::memory_order_release);
  table.progress_end.store(entry->progress_end, std::memory_order_release);
}

// When the runtime was initialized first (or the program dlopens this library later).
__attribute__((constructor)) void find_runtime() {
  auto entry_points =
      reinterpret_cast<kairos_runtime_entry_points_function>(dlsym(RTLD_DEFAULT, "kairos_runtime_entry_points"));
  if (entry_points) attach(entry_points());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void kairos_user_attach(const kairos_entry_points* entry) { attach(entry); }

__attribute__((visibility("default"))) void kairos_push_region(const char* name) {
  if (auto function = table.push_region.load(std::memory_order_acquire)) function(name);
}
__attribute__((visibility("default"))) void kairos_pop_region(const char* name) {
  if (auto function = table.pop_region.load(std::memory_order_acquire)) function(name);
}
__attribute__((visibility("default"))) void kairos_start(void) {
  if (auto function = table.start.load(std::memory_order_acquire)) function();
}
__attribute__((visibility("default"))) void kairos_stop(void) {
  if (auto function = table.stop.load(std::memory_order_acquire)) function();
}
__attribute__((visibility("default"))) void kairos_disable_thread(void) {
  if (auto function = table.disable_thread.load(std::memory_order_acquire)) function();
}
__attribute__((visibility("default"))) void kairos_enable_thread(void) {
  if (auto function = table.enable_thread.load(std::memory_order_acquire)) function();
}
__attribute__((visibility("default"))) void kairos_progress(const char* name) {
  if (auto function = table.progress.load(std::memory_order_acquire)) function(name);
}
__attribute__((visibility("default"))) void kairos_progress_begin(const char* name) {
  if (auto function = table.progress_begin.load(std::memory_order_acquire)) function(name);
}
__attribute__((visibility("default"))) void kairos_progress_end(const char* name) {
  if (auto function = table.progress_end.load(std::memory_order_acquire)) function(name);
}
// -finstrument-functions' hooks for a program run without kairos: they return at once. Under
// kairos-run, libkairos.so (preloaded, so found first) defines the ones that record.
__attribute__((visibility("default"))) void __cyg_profile_func_enter(void*, void*) {}
__attribute__((visibility("default"))) void __cyg_profile_func_exit(void*, void*) {}

__attribute__((visibility("default"))) int kairos_is_active(void) {
  if (auto function = table.is_active.load(std::memory_order_acquire)) return function();
  return 0;
}

}  // extern "C"
