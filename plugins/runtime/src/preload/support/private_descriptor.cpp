#include "preload/support/private_descriptor.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <span>

#include <kairos/plugins/gotcha/call_through.hpp>

namespace kairos::runtime {
namespace {

std::atomic<int> floor_number{512};

unsigned long long perf_event_id(int fd) noexcept {
  unsigned long long id = 0;
  return ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 ? id : 0;
}

int raise_above_floor(int fd) noexcept {
  if (fd < 0 || fd >= floor_number.load(std::memory_order_relaxed)) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor_number.load(std::memory_order_relaxed));
  if (moved < 0) return fd;  // the program's limit leaves no room up there: keep the low number
  close(fd);
  return moved;
}

// Every descriptor kairos keeps, for close_range_keeping_ours. Constant-initialized, so usable
// before any constructor runs (the stderr copy is adopted that early) and in a fork child. A slot
// is claimed (free -> filling), filled, then published (held). A reader racing a slot's reuse may
// see a torn identity, which fails the identity check: that descriptor is then closed as the
// program asked, and kairos reopens what it can. Descriptors closed by the libraries kairos hands
// them to (libdw) leave their slot behind: a slot whose number no longer names its file is freed
// when the registry is full.
struct registry_slot {
  enum : int { free_slot, filling, held };
  std::atomic<int> state{free_slot};
  owned_descriptor descriptor;
};
// Per sampled thread a perf event and two /proc files; besides, SQLite's three files and libdw's
// one or two a module.
std::array<registry_slot, 1024> registry;
// Slots past this were never claimed: scans stop there (a dozen slots in a one-thread run), so the
// program's close() of a high number costs a few comparisons, not a walk over 40 KB.
std::atomic<std::size_t> slots_used{0};

std::span<registry_slot> used_slots() noexcept {
  return {registry.data(), std::min(slots_used.load(std::memory_order_acquire), registry.size())};
}

bool claim_slot(const owned_descriptor& descriptor) noexcept {
  for (std::size_t i = 0; i < registry.size(); ++i) {
    auto& slot = registry[i];
    int expected = registry_slot::free_slot;
    if (!slot.state.compare_exchange_strong(expected, registry_slot::filling, std::memory_order_acquire)) continue;
    slot.descriptor = descriptor;
    for (auto used = slots_used.load(std::memory_order_relaxed);
         used < i + 1 && !slots_used.compare_exchange_weak(used, i + 1, std::memory_order_release);) {
    }
    slot.state.store(registry_slot::held, std::memory_order_release);
    return true;
  }
  return false;
}

void free_slot(registry_slot& slot) noexcept {
  int expected = registry_slot::held;
  slot.state.compare_exchange_strong(expected, registry_slot::free_slot, std::memory_order_release);
}

// A descriptor past the registry's size is simply not kept through close_range.
void register_descriptor(const owned_descriptor& descriptor) noexcept {
  if (claim_slot(descriptor)) return;
  for (auto& slot : used_slots())
    if (slot.state.load(std::memory_order_acquire) == registry_slot::held && !slot.descriptor.still_ours())
      free_slot(slot);
  claim_slot(descriptor);
}

registry_slot* registered(int fd) noexcept {
  if (fd < 0) return nullptr;
  for (auto& slot : used_slots())
    if (slot.state.load(std::memory_order_acquire) == registry_slot::held && slot.descriptor.get() == fd) return &slot;
  return nullptr;
}

void unregister_descriptor(int fd) noexcept {
  while (auto* slot = registered(fd)) free_slot(*slot);
}

}  // namespace

void prepare_private_descriptors() noexcept {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const auto soft = limit.rlim_cur == RLIM_INFINITY ? rlim_t{1 << 20} : limit.rlim_cur;
  floor_number.store(static_cast<int>(std::clamp<rlim_t>(soft / 2, 3, 1000)));
}

int private_descriptor_floor() noexcept { return floor_number.load(std::memory_order_relaxed); }

void owned_descriptor::adopt(int fd) noexcept {
  fd_ = raise_above_floor(fd);
  perf_event_id_ = fd_ >= 0 ? perf_event_id(fd_) : 0;
  struct stat status {};
  if (fd_ >= 0 && fstat(fd_, &status) == 0) {
    device_ = status.st_dev;
    inode_ = status.st_ino;
  }
  if (fd_ >= 0) register_descriptor(*this);
}

bool owned_descriptor::still_ours() const noexcept {
  if (fd_ < 0) return false;
  if (perf_event_id_ != 0) return perf_event_id(fd_) == perf_event_id_;
  struct stat status {};
  return fstat(fd_, &status) == 0 && status.st_dev == device_ && status.st_ino == inode_;
}

void owned_descriptor::close_if_ours() noexcept {
  unregister_descriptor(fd_);
  if (still_ours()) close(fd_);
  fd_ = -1;
}

int move_above_floor(int fd) noexcept { return owned_descriptor{fd}.get(); }

int close_moved(int fd) noexcept {
  const auto* slot = registered(fd);
  const bool ours = !slot || slot->descriptor.still_ours();
  unregister_descriptor(fd);
  return ours ? close(fd) : 0;  // the program's now: left alone, and closed as far as the caller knows
}

bool kept_by_kairos(int fd) noexcept {
  const auto* slot = registered(fd);
  return slot && slot->descriptor.still_ours();
}

int close_range_keeping_ours(unsigned first, unsigned last, int flags,
                             int (*close_range)(unsigned, unsigned, int)) noexcept {
  if (!close_range) {
    errno = ENOSYS;
    return -1;
  }
  // Setting close-on-exec changes nothing on kairos's descriptors, which all have it.
  // The closing itself is the program's time, through call_through (call_through.hpp).
  if (flags & CLOSE_RANGE_CLOEXEC) return call_through(close_range, first, last, flags);
  std::array<unsigned, registry.size()> kept;
  std::size_t count = 0;
  for (auto& slot : used_slots()) {
    if (slot.state.load(std::memory_order_acquire) != registry_slot::held) continue;
    const auto fd = static_cast<unsigned>(slot.descriptor.get());
    if (fd >= first && fd <= last && slot.descriptor.still_ours()) kept[count++] = fd;
  }
  std::sort(kept.begin(), kept.begin() + count);
  int result = 0, error = 0;
  const auto close_part = [&](unsigned from, unsigned to) {
    if (call_through(close_range, from, to, flags) != 0 && result == 0) {
      result = -1;
      error = errno;
    }
  };
  unsigned from = first;
  for (std::size_t i = 0; i < count; ++i) {
    if (kept[i] > from) close_part(from, kept[i] - 1);
    from = kept[i] + 1;
  }
  if (from <= last && from != 0) close_part(from, last);
  if (result != 0) errno = error;
  return result;
}

}  // namespace kairos::runtime
