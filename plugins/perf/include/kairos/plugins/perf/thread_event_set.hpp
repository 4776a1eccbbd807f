#pragma once
// A set of perf events open on one thread: one group of software events and as few groups of
// hardware events as the PMU can hold at once, each read with a single read(). Events the kernel
// refuses stay closed with the reason kept.
// Software groups count from the open (they cost nothing while idle). Hardware groups are enabled
// by the first phase on the set and stay enabled after it (an enable and a disable ioctl cost more
// than the reads they would bracket: docs/performance-log.md, "Measured reasons in the code");
// they are disabled only when another set of the same thread begins a phase, so an idle set never
// takes PMU counters from a set in use.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <kairos/plugins/perf/event_catalog.hpp>
#include <kairos/plugins/perf/open_event.hpp>

namespace kairos::perf {

inline constexpr std::size_t max_events = 32;

// Cumulative counts of every event of a set at one instant (position = order of the set).
struct event_snapshot {
  std::array<std::uint64_t, max_events> value{};
  std::array<std::uint64_t, max_events> enabled_ns{};  // time the event was enabled
  std::array<std::uint64_t, max_events> running_ns{};  // time it was on the PMU (< enabled: multiplexed)
};

// A number no other thread of the process ever gets (thread ids and thread_local addresses are
// reused after a thread exits; this is not).
inline std::uint64_t this_thread_serial() noexcept {
  static std::atomic<std::uint64_t> next_serial{1};
  thread_local const std::uint64_t serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

class thread_event_set {
 public:
  // Opens the catalog events `event_indices` (at most max_events) on the calling thread.
  explicit thread_event_set(std::span<const int> event_indices)
      : indices_(event_indices.begin(), event_indices.end()),
        fds_(indices_.size(), -1),
        user_space_only_(indices_.size(), false),
        reasons_(indices_.size()) {
    for (std::size_t position = 0; position < indices_.size() && position < max_events; ++position)
      open_position(position);
    // Opened enabled, then switched off: the kernel checks that a hardware group fits on the PMU
    // only against the siblings that are enabled, so opening them disabled would let an
    // unschedulable group through.
    switch_hardware_groups(PERF_EVENT_IOC_DISABLE);
  }
  ~thread_event_set() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  thread_event_set(const thread_event_set&) = delete;
  thread_event_set& operator=(const thread_event_set&) = delete;

  const std::vector<int>& event_indices() const noexcept { return indices_; }
  std::size_t size() const noexcept { return indices_.size(); }
  bool counting(std::size_t position) const noexcept { return fds_[position] >= 0; }
  bool user_space_only(std::size_t position) const noexcept { return user_space_only_[position]; }
  const std::string& unavailable_reason(std::size_t position) const { return reasons_[position]; }
  std::size_t group_count() const noexcept { return groups_.size(); }
  int leader_fd(std::size_t group) const noexcept { return groups_[group].leader_fd; }

  // A phase begins/ends on this set (perf_counters::start/stop). Repeated phases on one set cost
  // no ioctl; a phase on another set of this thread costs one per hardware group of each.
  void begin_phase() noexcept;
  void end_phase() noexcept {
    if (open_phases_ > 0) --open_phases_;
  }
  bool has_hardware_groups() const noexcept {
    return std::ranges::any_of(groups_, [](const group& each) { return !each.software; });
  }

  // One read() per group, no allocation, async-signal-safe. Positions not counting read 0.
  bool read(event_snapshot& snapshot) const noexcept {
    bool complete = true;
    for (const group& each : groups_) {
      std::array<std::uint64_t, 3 + max_events> buffer;  // nr, enabled, running, values...
      const auto wanted = static_cast<ssize_t>((3 + each.member_count) * sizeof(std::uint64_t));
      if (::read(each.leader_fd, buffer.data(), static_cast<std::size_t>(wanted)) != wanted) {
        complete = false;
        continue;
      }
      for (std::size_t member = 0; member < each.member_count; ++member) {
        const std::size_t position = each.positions[member];
        snapshot.value[position] = buffer[3 + member];
        snapshot.enabled_ns[position] = buffer[1];
        snapshot.running_ns[position] = buffer[2];
      }
    }
    return complete;
  }

 private:
  struct group {
    int leader_fd;
    bool software;
    std::size_t member_count;
    std::array<std::uint8_t, max_events> positions;  // read order → position in the set
  };

  // Joins the first group of its family that the kernel accepts it in; if none does (every
  // hardware group has its counters full, or there is no group yet), leads a new group. A refused event
  // takes nobody down. Software events never share a group with hardware ones: a hardware group is
  // multiplexed when counters run short, and its software members would stop counting with it.
  void open_position(std::size_t position) {
    const event_definition& event = event_catalog[static_cast<std::size_t>(indices_[position])];
    const bool software = event.kind == event_kind::software;
    open_result opened;
    for (group& candidate : groups_) {
      if (candidate.software != software) continue;
      opened = open_event(event, candidate.leader_fd);
      if (opened.fd >= 0) {
        add_member(candidate, position, opened);
        return;
      }
    }
    opened = open_event(event, -1);
    if (opened.fd < 0) {
      reasons_[position] = explain_open_error(event, opened.error);
      return;
    }
    groups_.push_back(group{opened.fd, software, 0, {}});
    add_member(groups_.back(), position, opened);
  }
  void add_member(group& into, std::size_t position, const open_result& opened) {
    fds_[position] = opened.fd;
    user_space_only_[position] = opened.user_space_only;
    into.positions[into.member_count++] = static_cast<std::uint8_t>(position);
  }

  void switch_hardware_groups(unsigned long request) const noexcept {
    for (const group& each : groups_)
      if (!each.software) ::ioctl(each.leader_fd, request, PERF_IOC_FLAG_GROUP);
  }

  std::vector<int> indices_;
  std::vector<int> fds_;
  std::vector<bool> user_space_only_;
  std::vector<std::string> reasons_;
  std::vector<group> groups_;
  int open_phases_ = 0;
  bool hardware_enabled_ = false;
};

// The sets open on the calling thread, closed when it exits.
inline std::vector<std::unique_ptr<thread_event_set>>& sets_open_on_this_thread() {
  thread_local std::vector<std::unique_ptr<thread_event_set>> open_sets;
  return open_sets;
}

// The calling thread's open set for exactly these events, opened on first request and shared by
// every perf_counters of this thread that asks for the same events.
inline thread_event_set& event_set_for_this_thread(std::span<const int> event_indices) {
  auto& open_sets = sets_open_on_this_thread();
  for (auto& set : open_sets)
    if (std::equal(set->event_indices().begin(), set->event_indices().end(), event_indices.begin(),
                   event_indices.end()))
      return *set;
  return *open_sets.emplace_back(std::make_unique<thread_event_set>(event_indices));
}

inline void thread_event_set::begin_phase() noexcept {
  if (open_phases_++ > 0 || hardware_enabled_ || !has_hardware_groups()) return;
  for (auto& other : sets_open_on_this_thread())
    if (other.get() != this && other->hardware_enabled_ && other->open_phases_ == 0) {
      other->switch_hardware_groups(PERF_EVENT_IOC_DISABLE);
      other->hardware_enabled_ = false;
    }
  switch_hardware_groups(PERF_EVENT_IOC_ENABLE);
  hardware_enabled_ = true;
}

}  // namespace kairos::perf
