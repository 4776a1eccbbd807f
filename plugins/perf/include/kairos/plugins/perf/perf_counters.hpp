#pragma once
// kairos::perf_counters — the calling thread's perf events (software and hardware), chosen by name,
// read as one group; start/stop accumulate differences, scaled when the kernel multiplexed.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/plugins/perf/event_catalog.hpp>
#include <kairos/plugins/perf/open_event.hpp>
#include <kairos/plugins/perf/thread_event_set.hpp>

namespace kairos {
namespace perf {

// Whether an event opens on this machine at all, found once per process by opening it alone.
struct event_probe {
  bool available = false;
  bool user_space_only = false;
  std::string unavailable_reason;
};

inline const std::array<event_probe, event_catalog.size()>& probe_catalog() {
  static const auto probes = [] {
    std::array<event_probe, event_catalog.size()> result;
    for (std::size_t index = 0; index < event_catalog.size(); ++index) {
      const open_result opened = open_event(event_catalog[index], -1);
      if (opened.fd >= 0) {
        ::close(opened.fd);
        result[index].available = true;
        result[index].user_space_only = opened.user_space_only;
      } else {
        result[index].unavailable_reason = explain_open_error(event_catalog[index], opened.error);
      }
    }
    return result;
  }();
  return probes;
}

// What a perf_counters says about each event it was asked for.
struct event_status {
  std::string_view name;
  std::string_view unit;
  bool counting = false;
  bool user_space_only = false;   // kernel-side activity not counted (perf_event_paranoid)
  double running_fraction = 1.0;  // share of the measured time it was on the PMU (< 1: multiplexed)
  std::string unavailable_reason;
  std::string note;  // what a counting event's numbers leave out, if anything
};

}  // namespace perf

class perf_counters {
 public:
  static constexpr std::string_view label() { return "perf_counters"; }
  static constexpr std::string_view description() {
    return "perf_event counters of the calling thread (software events everywhere, hardware "
           "events where a PMU exists)";
  }
  static constexpr std::string_view unit() { return ""; }  // per value: see units()

  // What a default-constructed perf_counters (as in a bundle) counts.
  static constexpr std::array<std::string_view, 5> default_event_names{"task-clock", "context-switches", "page-faults",
                                                                       "instructions", "cycles"};

  perf_counters() : perf_counters(default_event_names) {}
  perf_counters(std::initializer_list<std::string_view> event_names)
      : perf_counters(std::span<const std::string_view>{event_names.begin(), event_names.size()}) {}

  // Unknown names throw std::invalid_argument naming the input and listing the valid names.
  template <std::ranges::input_range Names>
  requires std::convertible_to<std::ranges::range_reference_t<Names>, std::string_view>
  explicit perf_counters(const Names& event_names) {
    for (const auto& each : event_names) {
      const std::string_view name{each};
      const int index = perf::find_event(name);
      if (index < 0)
        throw std::invalid_argument("[kairos] perf_counters: unknown event '" + std::string{name} +
                                    "'; valid events: " + perf::valid_event_names());
      if (std::ranges::find(requested_, index) == requested_.end()) requested_.push_back(index);
    }
    if (requested_.size() > perf::max_events)
      throw std::invalid_argument("[kairos] perf_counters: " + std::to_string(requested_.size()) +
                                  " events requested; at most " + std::to_string(perf::max_events) +
                                  " per perf_counters");
    const auto& probes = perf::probe_catalog();
    for (int index : requested_)
      if (probes[static_cast<std::size_t>(index)].available) counted_.push_back(index);
    totals_.assign(counted_.size(), 0.0);
    enabled_ns_.assign(counted_.size(), 0);
    running_ns_.assign(counted_.size(), 0);
  }

  // Whether perf_event_open counts anything here (the software task-clock opens).
  static bool available() { return available("task-clock"); }
  static std::string unavailable_reason() { return available() ? std::string{} : unavailable_reason("task-clock"); }
  // Whether one named event counts here, and the kernel's reason when it does not.
  static bool available(std::string_view event_name) {
    const int index = perf::find_event(event_name);
    return index >= 0 && perf::probe_catalog()[static_cast<std::size_t>(index)].available;
  }
  static std::string unavailable_reason(std::string_view event_name) {
    const int index = perf::find_event(event_name);
    if (index < 0)
      return "unknown perf event '" + std::string{event_name} + "'; valid events: " + perf::valid_event_names();
    return perf::probe_catalog()[static_cast<std::size_t>(index)].unavailable_reason;
  }

  void start() {
    const std::uint64_t thread = perf::this_thread_serial();
    if (set_ == nullptr || set_thread_ != thread) {
      set_ = &perf::event_set_for_this_thread(counted_);
      set_thread_ = thread;
    }
    set_->begin_phase();
    started_ = set_->read(at_start_);
    if (!started_) set_->end_phase();
  }

  // A stop on another thread than the start measures nothing (each thread has its own counters),
  // and leaves the start thread's hardware counters enabled.
  void stop() {
    if (!started_) return;
    started_ = false;
    if (perf::this_thread_serial() != set_thread_) return;
    perf::event_snapshot now;
    const bool complete = set_->read(now);
    set_->end_phase();
    if (!complete) return;
    for (std::size_t position = 0; position < counted_.size(); ++position) {
      if (!set_->counting(position)) continue;
      const std::uint64_t counted = now.value[position] - at_start_.value[position];
      const std::uint64_t enabled = now.enabled_ns[position] - at_start_.enabled_ns[position];
      const std::uint64_t running = now.running_ns[position] - at_start_.running_ns[position];
      double estimate = static_cast<double>(counted);
      if (running == 0)
        estimate = 0.0;            // never on the PMU during the phase: nothing measured
      else if (running < enabled)  // multiplexed: extrapolate to the whole phase
        estimate *= static_cast<double>(enabled) / static_cast<double>(running);
      totals_[position] += estimate * event_at(position).scale;
      enabled_ns_[position] += enabled;
      running_ns_[position] += running;
    }
  }

  // Totals of the events that count here, in display units (task-clock in ms), in the order
  // asked for; value_labels() and units() name them.
  std::vector<double> get() const { return totals_; }
  std::vector<std::string_view> value_labels() const {
    std::vector<std::string_view> labels;
    for (std::size_t position = 0; position < counted_.size(); ++position) labels.push_back(event_at(position).name);
    return labels;
  }
  std::vector<std::string_view> units() const {
    std::vector<std::string_view> result;
    for (std::size_t position = 0; position < counted_.size(); ++position) result.push_back(event_at(position).unit);
    return result;
  }
  // The total of one event (by name or alias), or nothing if it was not asked for or cannot count.
  std::optional<double> value_of(std::string_view event_name) const {
    const int index = perf::find_event(event_name);
    for (std::size_t position = 0; position < counted_.size(); ++position)
      if (counted_[position] == index) return totals_[position];
    return std::nullopt;
  }

  // Every event asked for, counting or not, with the kernel's reason for those that are not.
  std::vector<perf::event_status> events() const {
    std::vector<perf::event_status> statuses;
    const auto& probes = perf::probe_catalog();
    for (int index : requested_) {
      const auto& event = perf::event_catalog[static_cast<std::size_t>(index)];
      const auto& probe = probes[static_cast<std::size_t>(index)];
      perf::event_status status{
          event.name, event.unit, probe.available, probe.user_space_only, 1.0, probe.unavailable_reason, {}};
      const auto found = std::ranges::find(counted_, index);
      if (found != counted_.end()) {
        const auto position = static_cast<std::size_t>(found - counted_.begin());
        if (enabled_ns_[position] > 0)
          status.running_fraction =
              static_cast<double>(running_ns_[position]) / static_cast<double>(enabled_ns_[position]);
        // Opened alone at probe time but refused inside this thread's set (e.g. out of fds).
        if (set_ != nullptr && !set_->counting(position)) {
          status.counting = false;
          status.unavailable_reason = set_->unavailable_reason(position);
        }
      }
      if (status.counting && status.user_space_only)
        status.note = "user space only: perf_event_paranoid=" + std::to_string(perf::perf_event_paranoid()) +
                      " and no root/CAP_PERFMON, so what the kernel does for the thread (context "
                      "switches, kernel-mode faults and instructions) is not counted";
      statuses.push_back(std::move(status));
    }
    return statuses;
  }

 private:
  const perf::event_definition& event_at(std::size_t position) const {
    return perf::event_catalog[static_cast<std::size_t>(counted_[position])];
  }

  std::vector<int> requested_;             // catalog indices, in the order asked for
  std::vector<int> counted_;               // those that open on this machine
  std::vector<double> totals_;             // per counted event, display units
  std::vector<std::uint64_t> enabled_ns_;  // per counted event, summed over phases
  std::vector<std::uint64_t> running_ns_;
  perf::thread_event_set* set_ = nullptr;  // the set open on set_thread_
  std::uint64_t set_thread_ = 0;
  bool started_ = false;
  perf::event_snapshot at_start_;
};

}  // namespace kairos
