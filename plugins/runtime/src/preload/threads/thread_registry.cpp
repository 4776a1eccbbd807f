#include "preload/threads/thread_registry.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

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
  record.sequent_id = kairos_owned ? kairos_sequent_offset + next_kairos_sequent_++ : next_program_sequent_++;
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

void thread_registry::refresh_running_names() {
  std::lock_guard lock{mutex_};
  for (auto& record : records_) {
    if (record.pid != pid_ || !record.running.load(std::memory_order_acquire)) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", static_cast<int>(record.tid));
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::array<char, 16> name{};
    const auto length = read(fd, name.data(), name.size() - 1);
    close(fd);
    if (length <= 0) continue;
    if (name[static_cast<std::size_t>(length) - 1] == '\n') name[static_cast<std::size_t>(length) - 1] = '\0';
    record.name = name;
  }
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
