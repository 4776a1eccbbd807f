#pragma once
// What papi_vector and papi_array<N> share: named events resolved once, counted on the calling
// thread's event sets, start/stop accumulating differences. Everything is allocated at
// construction or at the first start on a thread; start and stop themselves do not allocate.
#include <papi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/plugins/papi/event_resolution.hpp>
#include <kairos/plugins/papi/library.hpp>
#include <kairos/plugins/papi/thread_event_sets.hpp>

namespace kairos::papi {

struct event_status {
  std::string name;
  bool counting = false;
  std::string unavailable_reason;
};

class event_counters {
 public:
  // Unknown names throw std::invalid_argument (see resolve_event); real events that cannot count
  // here are kept, reported unavailable, and the others count.
  template <std::ranges::input_range Names>
  requires std::convertible_to<std::ranges::range_reference_t<Names>, std::string_view>
  explicit event_counters(const Names& event_names) {
    for (const auto& each : event_names) {
      const std::string_view name{each};
      if (std::ranges::find(names_, name) != names_.end()) continue;
      names_.emplace_back(name);
      resolutions_.push_back(resolve_event(name));
    }
    totals_.assign(names_.size(), 0);
    locations_.assign(names_.size(), location{});
    at_start_.assign(names_.size(), 0);
    used_sets_.reserve(names_.size());
  }

  // Whether PAPI counts CPU events here: its perf_event component is enabled.
  static bool available() { return unavailable_reason().empty(); }
  static std::string unavailable_reason() {
    if (const problem& failure = library_problem()) return "PAPI: " + failure.text();
    const int component = cpu_component_index();
    if (component < 0) return "PAPI: this libpapi has no perf_event component";
    const std::string disabled = component_disabled_reason(component);
    return disabled.empty() ? std::string{} : "PAPI: " + disabled;
  }
  // Whether one named event counts here, and PAPI's reason when it does not.
  static bool available(std::string_view event_name) { return unavailable_reason(event_name).empty(); }
  static std::string unavailable_reason(std::string_view event_name) {
    try {
      return resolve_event(event_name).unavailable_reason;
    } catch (const std::invalid_argument& unknown) {
      return unknown.what();
    }
  }

  void start() {
    const std::uint64_t thread = this_thread_serial();
    if (thread != bound_thread_) bind_to_this_thread(thread);
    started_ = read_all(at_start_);
  }

  // A stop on another thread than the start measures nothing (PAPI counts per thread).
  void stop() {
    if (!started_) return;
    started_ = false;
    if (this_thread_serial() != bound_thread_) return;
    for (component_event_set* set : used_sets_)
      if (!set->read()) return;
    for (std::size_t index = 0; index < names_.size(); ++index)
      if (locations_[index].set != nullptr)
        totals_[index] += locations_[index].set->cumulative(locations_[index].position) - at_start_[index];
  }

  std::size_t size() const noexcept { return names_.size(); }
  const std::string& name(std::size_t index) const { return names_[index]; }
  bool counting(std::size_t index) const noexcept { return resolutions_[index].available && !bind_failed(index); }
  long long total(std::size_t index) const noexcept { return totals_[index]; }

  std::vector<event_status> events() const {
    std::vector<event_status> statuses;
    for (std::size_t index = 0; index < names_.size(); ++index)
      statuses.push_back({names_[index], counting(index),
                          bind_failed(index) ? bind_failures_[index].text() : resolutions_[index].unavailable_reason});
    return statuses;
  }

 private:
  struct location {
    component_event_set* set = nullptr;
    int position = -1;
  };

  bool bind_failed(std::size_t index) const noexcept {
    return index < bind_failures_.size() && static_cast<bool>(bind_failures_[index]);
  }

  // Adds this counter's events to the calling thread's sets (the first start on each thread).
  void bind_to_this_thread(std::uint64_t thread) {
    bound_thread_ = thread;
    used_sets_.clear();
    bind_failures_.assign(names_.size(), {});
    auto& sets = event_sets_of_this_thread();
    for (std::size_t index = 0; index < names_.size(); ++index) {
      locations_[index] = {};
      if (!resolutions_[index].available) continue;
      component_event_set& set = sets.for_component(resolutions_[index].component_index);
      auto position = set.position_of(resolutions_[index].code);
      if (!position.has_value()) {
        bind_failures_[index] = position.failure();
        continue;
      }
      locations_[index] = {&set, position.value()};
      if (std::ranges::find(used_sets_, &set) == used_sets_.end()) used_sets_.push_back(&set);
    }
  }

  bool read_all(std::vector<long long>& values) {
    for (component_event_set* set : used_sets_)
      if (!set->read()) return false;
    for (std::size_t index = 0; index < names_.size(); ++index)
      if (locations_[index].set != nullptr)
        values[index] = locations_[index].set->cumulative(locations_[index].position);
    return true;
  }

  std::vector<std::string> names_;
  std::vector<event_resolution> resolutions_;
  std::vector<problem> bind_failures_;  // PAPI refused an event on the bound thread
  std::vector<long long> totals_;
  std::vector<location> locations_;
  std::vector<long long> at_start_;
  std::vector<component_event_set*> used_sets_;
  std::uint64_t bound_thread_ = 0;
  bool started_ = false;
};

}  // namespace kairos::papi
