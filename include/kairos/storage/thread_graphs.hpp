#pragma once
// Every thread's call graph, registered when the thread first records and kept until the process
// merges them, even after the thread has exited. No fixed thread limit.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <kairos/storage/call_graph.hpp>

namespace kairos {

struct thread_graph {
  std::uint32_t thread_index = 0;  // registration order: 0 is the first thread that recorded
  std::int64_t os_thread_id = 0;
  std::atomic<bool> exited{false};
  call_graph graph;
};

class thread_graphs {
 public:
  // Never destroyed: threads may still record while static objects are being torn down at exit.
  static thread_graphs& instance() {
    static auto* registry = new thread_graphs;
    return *registry;
  }

  std::shared_ptr<thread_graph> add() {
    auto record = std::make_shared<thread_graph>();
    record->os_thread_id = static_cast<std::int64_t>(::syscall(SYS_gettid));
    std::lock_guard lock{mutex_};
    record->thread_index = next_index_++;
    threads_.push_back(record);
    return record;
  }

  // Forgets what every thread recorded and the threads that have exited. Only while no thread is
  // inside a recorded region (tests, between phases of a program).
  void clear() {
    std::lock_guard lock{mutex_};
    std::erase_if(threads_, [](const auto& record) { return record->exited.load(); });
    for (auto& record : threads_) record->graph.clear();
  }

  std::vector<std::shared_ptr<thread_graph>> all() const {
    std::lock_guard lock{mutex_};
    return threads_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<thread_graph>> threads_;
  std::uint32_t next_index_ = 0;
};

namespace detail {

// Marks the thread's graph as exited when the thread ends; the registry keeps the data.
struct thread_graph_owner {
  std::shared_ptr<thread_graph> record = thread_graphs::instance().add();
  ~thread_graph_owner() { record->exited.store(true, std::memory_order_release); }
};

// A plain pointer needs no initialization guard on the hot path.
inline thread_local call_graph* this_thread_graph_pointer = nullptr;

[[gnu::noinline]] inline call_graph& register_this_thread() {
  static thread_local thread_graph_owner owner;
  this_thread_graph_pointer = &owner.record->graph;
  return *this_thread_graph_pointer;
}

}  // namespace detail

// The calling thread's call graph (registered on first use).
inline call_graph& this_thread_graph() {
  if (auto* graph = detail::this_thread_graph_pointer) [[likely]]
    return *graph;
  return detail::register_this_thread();
}

}  // namespace kairos
