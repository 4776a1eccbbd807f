#include "preload/threads/thread_registry.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include "preload/support/clock.hpp"

namespace kairos::runtime {
namespace {
thread_local thread_record* this_thread_record [[gnu::tls_model("initial-exec")]] = nullptr;

void read_name(thread_record& record) noexcept {
  std::array<char, 16> name{};
  if (prctl(PR_GET_NAME, name.data(), 0, 0, 0) == 0) record.name = name;
}
}  // namespace

thread_registry& threads() {
  static auto* registry = new thread_registry;  // deliberately never destroyed
  return *registry;
}

thread_record& thread_registry::add_current_thread(bool kairos_owned) {
  std::lock_guard lock{mutex_};
  if (pid_ == 0) pid_ = getpid();
  auto& record = records_.emplace_back();
  record.internal_id = next_internal_id_.fetch_add(1, std::memory_order_relaxed);
  record.kairos_owned = kairos_owned;
  record.sequent_id =
      kairos_owned ? kairos_sequent_offset + next_kairos_sequent_++ : next_program_sequent_++;
  record.pid = pid_;
  record.tid = gettid();
  record.start_ns = steady_now_ns();
  read_name(record);
  return record;
}

void thread_registry::adopt_after_fork_in_child(thread_record* survivor) noexcept {
  pid_ = getpid();
  if (survivor) {
    survivor->pid = pid_;
    survivor->tid = gettid();
  }
  mutex_.unlock();  // taken by this thread in lock_for_fork
}

thread_record& register_current_thread(bool kairos_owned) {
  this_thread_record = &threads().add_current_thread(kairos_owned);
  return *this_thread_record;
}

thread_record& current_thread() {
  if (this_thread_record) return *this_thread_record;
  return register_current_thread(false);
}

thread_record* current_thread_if_registered() noexcept { return this_thread_record; }

void mark_current_thread_ended() noexcept {
  auto* record = this_thread_record;
  if (!record) return;
  read_name(*record);
  record->end_ns.store(steady_now_ns(), std::memory_order_relaxed);
  record->running.store(false, std::memory_order_release);
}

}  // namespace kairos::runtime
