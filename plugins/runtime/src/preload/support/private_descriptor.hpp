#pragma once
// kairos's own file descriptors never collide with the program's. Programs pick descriptor
// numbers of their own (bash dup2s onto 10 and 255; shells and daemons close every descriptor
// above 2; close_range, closefrom), so kairos:
//   - moves each descriptor it keeps to the top half of the program's limit (F_DUPFD_CLOEXEC
//     above a floor), out of the way of the lowest-free numbers the program gets;
//   - remembers which file it opened (device and inode; for a perf event, whose descriptors all
//     share one anonymous inode, the event's id), and before using or closing a
//     descriptor checks that the number still names that file: if the program closed it and
//     reused the number, kairos neither writes to it nor closes it;
//   - keeps every descriptor it holds in a registry, so the program's close, close_range and
//     closefrom (wrapped by the runtime) close everything else and leave those (a raw system
//     call is not seen: a closed perf event or database is opened again, but a closed spill
//     file loses the samples it held, and the database the rows since its last commit).
// Everything here is async-signal-safe (fcntl, fstat, close), so a fork child may use it.
#include <sys/types.h>

namespace kairos::runtime {

// The lowest number kairos's descriptors take: half of RLIMIT_NOFILE's soft limit, at most 1000
// (programs using select() need theirs below FD_SETSIZE, which kairos's then never crowd). Read
// once at init (call prepare_private_descriptors() there).
void prepare_private_descriptors() noexcept;
int private_descriptor_floor() noexcept;

class owned_descriptor {
 public:
  owned_descriptor() = default;
  // Takes `fd` (just opened by kairos): moves it above the floor (closing the original) and
  // remembers its identity. An invalid fd gives an empty owned_descriptor.
  explicit owned_descriptor(int fd) noexcept { adopt(fd); }

  void adopt(int fd) noexcept;
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Whether the number still names the file kairos opened (the program may have closed it).
  bool still_ours() const noexcept;
  // Closes it only if it is still kairos's; forgets it either way.
  void close_if_ours() noexcept;

 private:
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  unsigned long long perf_event_id_ = 0;  // 0: not a perf event
};

// Whether `fd` is one kairos keeps (still naming the file kairos opened): the program's close()
// of it is answered as if it were not open (EBADF), which it is not, as far as the program knows.
bool kept_by_kairos(int fd) noexcept;

// close_range(first, last, flags) through `close_range`, except for the descriptors kairos holds
// (still naming the file kairos opened): the range is closed around them. Returns what
// `close_range` returned (its first failure).
int close_range_keeping_ours(unsigned first, unsigned last, int flags,
                             int (*close_range)(unsigned, unsigned, int)) noexcept;

// For descriptors kairos hands to a library that keeps the number itself (SQLite, libdw): moved
// above the floor, close-on-exec, and kept through the program's close_range like an
// owned_descriptor; returns the new number (or `fd` unchanged if it cannot be moved).
int move_above_floor(int fd) noexcept;
// Closes such a descriptor if it still names the file kairos opened (SQLite's close hook).
int close_moved(int fd) noexcept;

}  // namespace kairos::runtime
