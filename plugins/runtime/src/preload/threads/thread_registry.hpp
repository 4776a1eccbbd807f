#pragma once
// Every thread of the process that kairos has seen, by identity only: two ids (internal, from an
// atomic counter in registration order; sequent, dense for the program's threads and offset by
// kairos_sequent_offset for kairos's own), its OS tid and name, and when it started and ended.
// What a stage keeps per thread (regions, sample buffers, database rows) lives in that stage,
// keyed by the record. Storage is a deque: it grows without a fixed limit and never moves a
// record, so a thread keeps a plain pointer to its own, and records outlive their threads until
// the process ends.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace kairos::runtime {

struct thread_record {
  std::uint64_t internal_id = 0;
  std::uint64_t sequent_id = 0;
  bool kairos_owned = false;
  pid_t pid = 0;  // the process it belongs to: a fork child inherits its parent's records
  pid_t tid = 0;
  std::array<char, 16> name{};  // as the kernel keeps it (15 characters + NUL)
  std::int64_t start_ns = 0;    // steady clock
  std::atomic<std::int64_t> end_ns{0};
  std::atomic<bool> running{true};

  std::string name_text() const { return std::string{name.data()}; }
};

class thread_registry {
 public:
  static constexpr std::uint64_t kairos_sequent_offset = 1'000'000;

  // Adds the calling thread.
  thread_record& add_current_thread(bool kairos_owned);

  // Every thread of this process (a fork child's list holds only the thread that forked).
  template <class Visit>
  void for_each(Visit&& visit) {
    std::lock_guard lock{mutex_};
    for (auto& record : records_)
      if (record.pid == pid_) visit(record);
  }
  // The threads registered since `cursor` (a count of records, advanced): each is seen once.
  template <class Visit>
  void for_each_new(std::size_t& cursor, Visit&& visit) {
    std::lock_guard lock{mutex_};
    for (; cursor < records_.size(); ++cursor)
      if (records_[cursor].pid == pid_) visit(records_[cursor]);
  }

  // Threads still running (kairos's own, and the program's that outlive main) were named after
  // they registered: their names are read again from /proc/self/task/<tid>/comm (finalize).
  void refresh_running_names();

  // fork: held across the fork so the child never inherits a locked mutex.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork_in_parent() { mutex_.unlock(); }
  // In a fork child (async-signal-safe): the calling thread is the only one; it belongs to the
  // child now, and the parent's other threads are no longer listed.
  void adopt_after_fork_in_child(thread_record* survivor) noexcept;

 private:
  std::mutex mutex_;
  std::deque<thread_record> records_;
  pid_t pid_ = 0;
  std::atomic<std::uint64_t> next_internal_id_{0};
  std::uint64_t next_program_sequent_ = 0;
  std::uint64_t next_kairos_sequent_ = 0;
};

// The process's registry (never destroyed: threads may outlive static destructors).
thread_registry& threads();

// The calling thread's record; a thread kairos did not see start (the main thread, threads made
// before kairos loaded or by raw clone) is registered on first use.
thread_record& current_thread();
// The record, or nullptr when the thread has not been registered (no registration happens).
thread_record* current_thread_if_registered() noexcept;
// Registers the calling thread as a new thread (the pthread_create trampoline).
thread_record& register_current_thread(bool kairos_owned);
// On the thread as it ends: its final name and end time.
void mark_current_thread_ended() noexcept;

}  // namespace kairos::runtime
