#include "preload/support/private_descriptor.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace kairos::runtime {
namespace {
std::atomic<int> floor_number{512};
}

void prepare_private_descriptors() noexcept {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const auto soft = limit.rlim_cur == RLIM_INFINITY ? rlim_t{1 << 20} : limit.rlim_cur;
  floor_number.store(static_cast<int>(std::clamp<rlim_t>(soft / 2, 3, 1000)));
}

int private_descriptor_floor() noexcept { return floor_number.load(std::memory_order_relaxed); }

int move_above_floor(int fd) noexcept {
  if (fd < 0 || fd >= private_descriptor_floor()) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, private_descriptor_floor());
  if (moved < 0) return fd;  // the program's limit leaves no room up there: keep the low number
  close(fd);
  return moved;
}

namespace {
unsigned long long perf_event_id(int fd) noexcept {
  unsigned long long id = 0;
  return ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 ? id : 0;
}
}  // namespace

void owned_descriptor::adopt(int fd) noexcept {
  fd_ = move_above_floor(fd);
  perf_event_id_ = fd_ >= 0 ? perf_event_id(fd_) : 0;
  struct stat status {};
  if (fd_ >= 0 && fstat(fd_, &status) == 0) {
    device_ = status.st_dev;
    inode_ = status.st_ino;
  }
}

bool owned_descriptor::still_ours() const noexcept {
  if (fd_ < 0) return false;
  if (perf_event_id_ != 0) return perf_event_id(fd_) == perf_event_id_;
  struct stat status {};
  return fstat(fd_, &status) == 0 && status.st_dev == device_ &&
         status.st_ino == inode_;
}

void owned_descriptor::close_if_ours() noexcept {
  if (still_ours()) close(fd_);
  fd_ = -1;
}

}  // namespace kairos::runtime
