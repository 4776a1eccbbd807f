#pragma once
// Every thread of the process that kairos has seen: two ids (internal, from an atomic counter in
// registration order; sequent, dense for the program's threads and offset by
// kairos_sequent_offset for kairos's own), its OS tid and name, and per-thread data that outlives
// the thread until finalize. Storage is a deque: it grows without a fixed limit and never moves a
// record, so a thread keeps a plain pointer to its own.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace kairos::runtime {

struct thread_regions;  // regions.hpp: the user-API region stack and call graph of one thread
struct thread_sampler;  // sampling/sampler.hpp: this thread's sample buffers and timers

struct thread_record {
  std::uint64_t internal_id = 0;
  std::uint64_t sequent_id = 0;
  bool kairos_owned = false;
  pid_t tid = 0;
  std::array<char, 16> name{};  // as the kernel keeps it (15 characters + NUL)
  std::int64_t start_ns = 0;    // steady clock
  std::atomic<std::int64_t> end_ns{0};
  std::atomic<bool> running{true};
  // Set while the thread is inside a user-API call, so finalize can wait for it to leave.
  std::atomic<bool> busy{false};
  // kairos_disable_thread(): the user API ignores this thread.
  std::atomic<bool> disabled{false};
  std::atomic<thread_regions*> regions{nullptr};
  // Sampling state (set when the thread is first armed; kept until the writer drained it).
  std::atomic<thread_sampler*> sampler{nullptr};
  // The thread's row in the profile database (-1: not written yet); guarded by the database's mutex.
  std::int64_t database_id = -1;
  bool database_end_written = false;

  std::string name_text() const { return std::string{name.data()}; }
};

class thread_registry {
 public:
  static constexpr std::uint64_t kairos_sequent_offset = 1'000'000;

  // Adds the calling thread.
  thread_record& add_current_thread(bool kairos_owned);

  template <class Visit>
  void for_each(Visit&& visit) const {
    std::lock_guard lock{mutex_};
    for (const auto& record : records_) visit(record);
  }
  template <class Visit>
  void for_each(Visit&& visit) {
    std::lock_guard lock{mutex_};
    for (auto& record : records_) visit(record);
  }
  std::size_t size() const;

  // fork: held across the fork so the child never inherits a locked mutex.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  // In a profiled child after fork, only the forking thread exists: the others are marked ended.
  void keep_only_after_fork(const thread_record* survivor);

 private:
  mutable std::mutex mutex_;
  std::deque<thread_record> records_;
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
// Registers the calling thread as a new thread (used by the pthread_create trampoline).
thread_record& register_current_thread(bool kairos_owned);
// Called on the thread as it ends: its final name and end time.
void mark_current_thread_ended() noexcept;
// After fork, in the child: the thread-local pointer is still valid (same memory image).

std::int64_t steady_now_ns() noexcept;

}  // namespace kairos::runtime
