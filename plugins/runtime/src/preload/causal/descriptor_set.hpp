#pragma once
// The descriptors whose both ends this process made (pipe, pipe2, socketpair): a read that waited
// on one was ended by a thread of the process, which pays its delays before it writes
// (blocking_calls.cpp). One bit per descriptor number below `tracked_limit`, set and cleared with
// relaxed atomic operations: lock-free and async-signal-safe, 8 KiB of zero pages until used.
// A descriptor numbered `tracked_limit` or above is not tracked (its waits are not credited).
#include <array>
#include <atomic>
#include <cstdint>

namespace kairos::runtime {

class descriptor_set {
 public:
  static constexpr int tracked_limit = 65'536;

  bool contains(int fd) const noexcept {
    if (fd < 0 || fd >= tracked_limit) return false;
    return (words_[index(fd)].load(std::memory_order_relaxed) & bit(fd)) != 0;
  }
  void insert(int fd) noexcept {
    if (fd >= 0 && fd < tracked_limit) words_[index(fd)].fetch_or(bit(fd), std::memory_order_relaxed);
  }
  void erase(int fd) noexcept {
    if (fd >= 0 && fd < tracked_limit) words_[index(fd)].fetch_and(~bit(fd), std::memory_order_relaxed);
  }
  void assign(int fd, bool member) noexcept { member ? insert(fd) : erase(fd); }
  void clear() noexcept {
    for (auto& word : words_) word.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t index(int fd) noexcept { return static_cast<std::size_t>(fd) / 64; }
  static constexpr std::uint64_t bit(int fd) noexcept { return std::uint64_t{1} << (static_cast<unsigned>(fd) % 64); }
  std::array<std::atomic<std::uint64_t>, tracked_limit / 64> words_{};
};

}  // namespace kairos::runtime
