#pragma once
// The calling thread's PAPI event sets: one per component (PAPI runs at most one set per component
// per thread), holding the union of the events every counter of this thread asked for. Adding an
// event restarts the set; the counts before the restart are kept, so totals never jump back.
#include <papi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kairos/plugins/papi/library.hpp>
#include <kairos/problem.hpp>

namespace kairos::papi {

// A number no other thread of the process ever gets (thread ids are reused; this is not).
inline std::uint64_t this_thread_serial() noexcept {
  static std::atomic<std::uint64_t> next_serial{1};
  thread_local const std::uint64_t serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

class component_event_set {
 public:
  explicit component_event_set(int component_index) : component_index_(component_index) {}
  ~component_event_set() {
    if (event_set_ == PAPI_NULL) return;
    if (running_) PAPI_stop(event_set_, scratch_.data());
    PAPI_cleanup_eventset(event_set_);
    PAPI_destroy_eventset(&event_set_);
  }
  component_event_set(const component_event_set&) = delete;
  component_event_set& operator=(const component_event_set&) = delete;

  int component_index() const noexcept { return component_index_; }

  // Position of `code` in the set, adding it if needed; PAPI's refusal if it refuses.
  result<int> position_of(int code) {
    const auto found = std::ranges::find(codes_, code);
    if (found != codes_.end()) return static_cast<int>(found - codes_.begin());
    if (event_set_ == PAPI_NULL) {
      const int created = PAPI_create_eventset(&event_set_);
      if (created != PAPI_OK) {
        event_set_ = PAPI_NULL;
        return problem{"PAPI: " + describe_error("PAPI_create_eventset", created)};
      }
    }
    if (running_) {  // fold the counts so far into the base: PAPI_start restarts from zero
      PAPI_stop(event_set_, scratch_.data());
      for (std::size_t position = 0; position < codes_.size(); ++position) base_[position] += scratch_[position];
      running_ = false;
    }
    const int added = PAPI_add_event(event_set_, code);
    problem refused;
    if (added == PAPI_OK) {
      codes_.push_back(code);
      base_.push_back(0);
      scratch_.push_back(0);
      cumulative_.push_back(0);
    } else {
      refused = problem{"PAPI: " + describe_error("PAPI_add_event", added)};
    }
    if (!codes_.empty()) {  // restarts the events added before, even when this one was refused
      const int started = PAPI_start(event_set_);
      running_ = started == PAPI_OK;
      if (!running_ && added == PAPI_OK) refused = problem{"PAPI: " + describe_error("PAPI_start", started)};
    }
    if (refused) return refused;
    return static_cast<int>(codes_.size()) - 1;
  }

  // One PAPI_read; cumulative counts since each event was added. No allocation.
  bool read() noexcept {
    if (!running_ || PAPI_read(event_set_, scratch_.data()) != PAPI_OK) return false;
    for (std::size_t position = 0; position < codes_.size(); ++position)
      cumulative_[position] = base_[position] + scratch_[position];
    return true;
  }
  long long cumulative(int position) const noexcept { return cumulative_[static_cast<std::size_t>(position)]; }

 private:
  int component_index_;
  int event_set_ = PAPI_NULL;
  bool running_ = false;
  std::vector<int> codes_;
  std::vector<long long> base_;        // counts before the last restart
  std::vector<long long> scratch_;     // PAPI_read's output
  std::vector<long long> cumulative_;  // base + scratch
};

// This thread's sets, destroyed when it exits (before PAPI forgets the thread).
struct thread_event_sets {
  std::vector<std::unique_ptr<component_event_set>> sets;
  component_event_set& for_component(int component_index) {
    for (auto& set : sets)
      if (set->component_index() == component_index) return *set;
    return *sets.emplace_back(std::make_unique<component_event_set>(component_index));
  }
};

inline thread_event_sets& event_sets_of_this_thread() {
  papi_used_on_this_thread();  // constructed first, so destroyed after the sets
  thread_local thread_event_sets sets;
  return sets;
}

}  // namespace kairos::papi
