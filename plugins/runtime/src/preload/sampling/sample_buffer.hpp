#pragma once
// What the sampling signal handler writes, and where: fixed-size records in per-thread buffers
// mapped ahead of time (mmap, outside any handler). One thread fills a buffer (its own handler);
// one writer thread reads it. A full buffer is handed to the writer over a lock-free stack and
// the handler switches to the thread's spare; the writer also reads the committed prefix of a
// buffer that is still filling (periodic flush), so nothing waits for a buffer to fill up.
//
// Buffer states: free -> filling (handler takes it) -> full (handler hands it over) -> free
// (writer consumed it). `committed` is written by the handler (release) and read by the writer
// (acquire); `consumed` belongs to the writer alone.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <kairos/plugins/backtrace.hpp>

#include "preload/sampling/python_frames.hpp"
#include "preload/sampling/sample_batch.hpp"

namespace kairos::runtime {

struct thread_sampler;

struct sample_record {
  std::int64_t time_ns = 0;        // CLOCK_MONOTONIC (the database's clock)
  std::int64_t weight_ns = 0;      // the CPU time (or real time) this sample stands for
  std::int64_t thread_cpu_ns = 0;  // metric: the thread's CPU time at the sample
  sample_source source = sample_source::cpu_time;
  std::int32_t window = 0;  // the time window it was taken in (0: no windows)
  kairos::backtrace<sample_stack_depth> stack;
};

struct sample_buffer {
  static constexpr std::uint32_t capacity = 1024;
  enum state_value : int { free_state = 0, filling_state = 1, full_state = 2 };

  std::atomic<std::uint32_t> committed{0};
  std::uint32_t consumed = 0;
  std::atomic<int> state{free_state};
  sample_buffer* next_full = nullptr;  // link in the writer's hand-off stack
  thread_sampler* owner = nullptr;

  sample_record& record(std::uint32_t index) noexcept {
    return reinterpret_cast<sample_record*>(record_storage)[index];
  }
  // Record `index`'s interpreter frames (python_frames.hpp), written only where a CPython's frames
  // are read: apart from the records, so that other programs never touch their pages.
  python_frame_capture& python(std::uint32_t index) noexcept {
    return reinterpret_cast<python_frame_capture*>(python_storage)[index];
  }

 private:
  // The records are the mapping's zero pages, not constructed objects (sample_record is an
  // aggregate, so the pages hold them implicitly; all-zero is its initial value): constructing
  // them wrote every page of both buffers at each thread's start, which made thread churn under
  // kairos many times slower. Untouched pages cost nothing.
  alignas(sample_record) unsigned char record_storage[capacity * sizeof(sample_record)];
  alignas(python_frame_capture) unsigned char python_storage[capacity * sizeof(python_frame_capture)];
};

// Lock-free hand-off of full buffers to one writer: many handlers push, the writer takes all.
// A Treiber stack with take-all only (no single pop), so there is no ABA problem.
class full_buffer_stack {
 public:
  void push(sample_buffer* buffer) noexcept {
    auto* head = head_.load(std::memory_order_relaxed);
    do {
      buffer->next_full = head;
    } while (!head_.compare_exchange_weak(head, buffer, std::memory_order_release, std::memory_order_relaxed));
  }
  // Oldest first.
  sample_buffer* take_all() noexcept {
    auto* list = head_.exchange(nullptr, std::memory_order_acquire);
    sample_buffer* reversed = nullptr;
    while (list) {
      auto* next = list->next_full;
      list->next_full = reversed;
      reversed = list;
      list = next;
    }
    return reversed;
  }

 private:
  std::atomic<sample_buffer*> head_{nullptr};
};

// A free buffer for `owner`: a spare left by an ended thread, else a fresh mapping (zeroed pages,
// touched only as records are written). nullptr on failure.
sample_buffer* map_sample_buffer(thread_sampler* owner) noexcept;
// Gives a buffer back (kept as a spare, or unmapped).
void unmap_sample_buffer(sample_buffer* buffer) noexcept;

}  // namespace kairos::runtime
