#pragma once
// Opening one perf event for the calling thread, with the kernel's refusal turned into a sentence.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <kairos/plugins/perf/event_catalog.hpp>

namespace kairos::perf {

// Everything the kernel says about one group read: nr, time_enabled, time_running, values[nr].
inline constexpr std::uint64_t group_read_format =
    PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;

// /proc/sys/kernel/perf_event_paranoid: -1 no limits; 0 no raw tracepoints for users; 1 no
// CPU-wide events for users; 2 user-space only (exclude_kernel=1) for users; 3 (Debian's patch)
// no perf_event_open at all for users. Returns 2 (the upstream default) if the file is unreadable.
inline int perf_event_paranoid() {
  int level = 2;
  if (std::FILE* file = std::fopen("/proc/sys/kernel/perf_event_paranoid", "r")) {
    if (std::fscanf(file, "%d", &level) != 1) level = 2;
    std::fclose(file);
  }
  return level;
}

// Whether the kernel registered a core PMU (x86: "cpu", or a hybrid CPU's "cpu_core"; Arm: "armv8_*").
inline bool has_core_pmu() {
  for (const char* directory : {"/sys/bus/event_source/devices/cpu", "/sys/bus/event_source/devices/cpu_core",
                                "/sys/bus/event_source/devices/armv8_pmuv3"})
    if (::access(directory, F_OK) == 0) return true;
  return false;
}

struct open_result {
  int fd = -1;
  bool user_space_only = false;  // opened with exclude_kernel=1 because paranoid forbade more
  int error = 0;                 // errno of the last refusal when fd < 0
};

inline int perf_event_open_syscall(perf_event_attr& attributes, int group_fd) noexcept {
  return static_cast<int>(
      syscall(SYS_perf_event_open, &attributes, 0 /* this thread */, -1 /* any CPU */, group_fd, PERF_FLAG_FD_CLOEXEC));
}

// Opens `event` on the calling thread inside `group_fd`'s group (or as a leader with -1), counting
// from now or, with `start_disabled`, from the first PERF_EVENT_IOC_ENABLE. Kernel and user space are counted when
// allowed; when perf_event_paranoid refuses (EACCES/EPERM) the event is retried user-space only.
inline open_result open_event(const event_definition& event, int group_fd, bool start_disabled = false) noexcept {
  perf_event_attr attributes{};
  attributes.size = sizeof(attributes);
  attributes.type = event.type;
  attributes.config = event.config;
  attributes.read_format = group_read_format;
  attributes.disabled = start_disabled ? 1 : 0;
  attributes.inherit = 0;  // this thread only, not the threads it creates
  attributes.exclude_hv = 1;
  open_result result;
  result.fd = perf_event_open_syscall(attributes, group_fd);
  if (result.fd >= 0) return result;
  result.error = errno;
  if (result.error != EACCES && result.error != EPERM) return result;
  attributes.exclude_kernel = 1;
  result.fd = perf_event_open_syscall(attributes, group_fd);
  if (result.fd >= 0) {
    result.user_space_only = true;
    result.error = 0;
  } else {
    result.error = errno;
  }
  return result;
}

// A sampling event on thread `tid` of this process (0: the calling thread): it overflows every
// `period` counts of (`type`, `config`) and starts disabled. The caller routes the overflow (a
// signal, a ring buffer). With `include_kernel`, counts and overflows in the kernel count too (a
// system call's time is sampled inside it); perf_event_paranoid >= 2 refuses that to users
// (EACCES). -1 with errno set when the kernel refuses.
inline int open_sampling_event(std::uint32_t type, std::uint64_t config, pid_t tid, std::uint64_t period,
                               bool include_kernel) noexcept {
  perf_event_attr attributes{};
  attributes.size = sizeof(attributes);
  attributes.type = type;
  attributes.config = config;
  attributes.sample_period = period;
  attributes.disabled = 1;
  attributes.exclude_hv = 1;
  attributes.wakeup_events = 1;
  attributes.exclude_kernel = include_kernel ? 0 : 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &attributes, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// "instructions: No such file or directory (ENOENT): ..." — strerror plus what it means here.
inline std::string explain_open_error(const event_definition& event, int error) {
  std::string meaning;
  switch (error) {
    case ENOENT:
      if (event.kind == event_kind::software)
        meaning = "this kernel does not know the event";
      else if (has_core_pmu())
        meaning = "this CPU's PMU has no such generic event";
      else
        meaning =
            "the kernel has no PMU driver for hardware events here (typical of a VM "
            "without a virtual PMU)";
      break;
    case EOPNOTSUPP:
      meaning =
          "the PMU cannot count this event (or there is no hardware PMU: perf prints "
          "'not supported')";
      break;
    case ENODEV:
      meaning = "no PMU provides this event on this CPU";
      break;
    case EACCES:
    case EPERM:
      meaning = "perf_event_paranoid=" + std::to_string(perf_event_paranoid()) +
                " forbids it even user-space only; run as root (or with CAP_PERFMON) or lower "
                "it: sysctl kernel.perf_event_paranoid=2";
      break;
    case EINVAL:
      meaning = "the kernel rejected the event's attributes";
      break;
    case EBUSY:
      meaning = "another tool holds the PMU exclusively";
      break;
    case EMFILE:
    case ENFILE:
      meaning = "out of file descriptors (one per event)";
      break;
    case ENOSYS:
      meaning = "this kernel was built without perf events";
      break;
    default:
      meaning = "perf_event_open refused it";
      break;
  }
  const char* error_name = strerrorname_np(error);
  return std::string{event.name} + ": " + std::strerror(error) + " (" +
         (error_name ? error_name : std::to_string(error).c_str()) + "): " + meaning;
}

}  // namespace kairos::perf
