#pragma once
// One thread's finished user-API regions and instrumented calls on their way to the profile
// database. The batch holder appends without a lock; the database sync drains. A chunk the
// consumer has read goes back to the producer as its next one (a fresh allocation page-faulted on
// every 48 KiB of rows: 2.4% of a region's cost). One producer, one consumer. Memory is bounded:
// past max_chunks unread chunks rows are dropped and counted; finalize says how many. The
// producer (function_trace.cpp) asks for a drain before that, by unread_chunks(), and waits.
#include <atomic>
#include <cstdint>
#include <new>
#include <string>

namespace kairos::runtime {

// No default member initializers: a chunk's 1,024 rows are not written until used.
struct region_row {
  const std::string* name;  // interned by the thread; never freed before exit
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::int32_t depth;
  std::int32_t window;     // 0: no windows
  std::int32_t clipped;    // 1: start cut to the window's opening, 2: end cut to its closing
  std::uint64_t function;  // an instrumented function's address (name unset); 0 for a user-API region
};

class region_log {
 public:
  static constexpr std::uint32_t chunk_rows = 1024;
  static constexpr std::uint32_t default_max_chunks = 64;

  explicit region_log(std::uint32_t max_chunks = default_max_chunks)
      : max_chunks_{max_chunks}, head_{new chunk}, tail_{head_} {}
  region_log(const region_log&) = delete;
  region_log& operator=(const region_log&) = delete;
  ~region_log() { free_all(); }

  // The owning thread only. `fill(region_row&)` writes the row in its slot: a row built first and
  // copied in was read back through a store-forwarding stall (its fields stored in pieces).
  // Returns false when the row was dropped (the bound reached).
  template <class Fill>
  bool append_with(Fill&& fill) noexcept {
    auto* slot = next_slot();
    if (slot == nullptr) return false;
    fill(*slot);
    tail_->committed.store(tail_->committed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return true;
  }
  void append(const region_row& row) noexcept {
    append_with([&](region_row& slot) { slot = row; });
  }

  // The consumer only: every row committed so far, oldest first; recycles the chunks it finishes.
  template <class Consume>
  void drain(Consume&& consume) {
    for (;;) {
      const auto committed = head_->committed.load(std::memory_order_acquire);
      for (; consumed_ < committed; ++consumed_) consume(head_->rows[consumed_]);
      if (consumed_ < chunk_rows) return;
      chunk* next = head_->next.load(std::memory_order_acquire);
      if (next == nullptr) return;  // full, and the thread has not needed the next one yet
      recycle(head_);
      head_ = next;
      consumed_ = 0;
      chunks_.fetch_sub(1, std::memory_order_release);
    }
  }

  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  std::uint32_t unread_chunks() const noexcept { return chunks_.load(std::memory_order_acquire); }
  std::uint32_t max_chunks() const noexcept { return max_chunks_; }

  // In a forked child (one thread): forget the parent's rows.
  void clear() {
    free_all();
    head_ = tail_ = new chunk;
    consumed_ = 0;
    chunks_.store(1);
    dropped_.store(0);
  }

 private:
  struct chunk {
    std::atomic<std::uint32_t> committed{0};
    std::atomic<chunk*> next{nullptr};
    region_row rows[chunk_rows];
  };

  // The owning thread's: where its next row goes (a new chunk when the last is full), or null when
  // the bound is reached (the row is dropped and counted).
  region_row* next_slot() noexcept {
    auto count = tail_->committed.load(std::memory_order_relaxed);
    if (count == chunk_rows) {
      chunk* fresh = nullptr;
      if (chunks_.load(std::memory_order_acquire) < max_chunks_) {
        fresh = spare_.exchange(nullptr, std::memory_order_acquire);
        if (fresh == nullptr) fresh = new (std::nothrow) chunk;
      }
      if (fresh == nullptr) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
      chunks_.fetch_add(1, std::memory_order_relaxed);
      tail_->next.store(fresh, std::memory_order_release);
      tail_ = fresh;
      count = 0;
    }
    return &tail_->rows[count];
  }

  // The consumer's: a read chunk becomes the spare, or is freed when there is one already.
  void recycle(chunk* read) {
    read->committed.store(0, std::memory_order_relaxed);
    read->next.store(nullptr, std::memory_order_relaxed);
    chunk* expected = nullptr;
    if (!spare_.compare_exchange_strong(expected, read, std::memory_order_release, std::memory_order_relaxed))
      delete read;
  }

  void free_all() {
    while (head_ != nullptr) {
      chunk* next = head_->next.load(std::memory_order_relaxed);
      delete head_;
      head_ = next;
    }
    delete spare_.exchange(nullptr);
  }

  const std::uint32_t max_chunks_;
  chunk* head_;                         // the consumer's: the oldest chunk not fully read
  std::uint32_t consumed_ = 0;          // the consumer's: rows read in head_
  chunk* tail_;                         // the thread's: the chunk it appends to
  std::atomic<chunk*> spare_{nullptr};  // a read chunk for the thread's next one
  std::atomic<std::uint32_t> chunks_{1};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace kairos::runtime
