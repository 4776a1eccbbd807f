#include "preload/process/children.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <kairos/plugins/gotcha/call_through.hpp>

#include "common/proc_file.hpp"
#include "preload/support/clock.hpp"

namespace kairos::runtime {
namespace {

// Reaped children wait here (written in signal handlers: no lock, no allocation) until a tick
// folds them by name. A burst beyond the slots is still counted, in RUSAGE_CHILDREN's remainder.
struct reaped_slot {
  std::atomic<int> state{0};  // free, being written, ready
  pid_t pid = 0;
  std::int64_t cpu_ns = 0;
  char name[16] = {};
};
enum : int { slot_free, slot_writing, slot_ready };
constexpr std::size_t slot_count = 512;
// Running children whose names are kept until they are reaped: more than any program runs at once.
constexpr std::size_t names_kept = 4096;

struct children_state {
  std::array<reaped_slot, slot_count> slots;
  std::atomic<bool> counting{false};
  std::atomic<bool> may_have_children{false};
  std::int64_t children_cpu_at_start_ns = 0;
  std::mutex mutex;  // the rest: tick and end only
  std::unordered_map<pid_t, std::string> running_names;
  std::map<std::string, child_group, std::less<>> groups;
  std::uint64_t processes = 0;
  std::int64_t cpu_ns = 0;
};
// On the heap, never destroyed: the end may come after static destructors.
children_state* state = nullptr;

std::int64_t children_cpu_ns() {
  rusage usage{};
  if (getrusage(RUSAGE_CHILDREN, &usage) != 0) return 0;
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000'000ll +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1'000ll;
}

std::string comm_of(pid_t pid) {
  auto text = read_proc_file(fmt::format("/proc/{}/comm", pid)).value_or("");
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Under the mutex.
void fold_reaped() {
  for (auto& slot : state->slots) {
    if (slot.state.load(std::memory_order_acquire) != slot_ready) continue;
    // The name read while it ran says more (its own children: tar's "sh (gzip)"), the zombie's comm
    // is the one known of a child shorter than a tick.
    std::string name = slot.name;
    if (const auto running = state->running_names.find(slot.pid); running != state->running_names.end()) {
      name = running->second;
      state->running_names.erase(running);
    }
    if (name.empty()) name = "[not seen running]";
    auto& group = state->groups[name];
    group.name = name;
    ++group.processes;
    group.cpu_ns += slot.cpu_ns;
    ++state->processes;
    state->cpu_ns += slot.cpu_ns;
    slot.state.store(slot_free, std::memory_order_release);
  }
}

// The pids a /proc/.../children file lists.
std::vector<pid_t> pids_in(const std::optional<std::string>& list) {
  std::vector<pid_t> pids;
  if (!list) return pids;
  const char* at = list->c_str();
  while (*at) {
    char* end = nullptr;
    const auto pid = static_cast<pid_t>(std::strtol(at, &end, 10));
    if (end == at) break;
    at = end;
    while (*at == ' ') ++at;
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

// A child's comm, and its own children's when it has some: a shell that runs the real program
// (tar runs its compressor as `sh -c gzip`) is named "sh (gzip)".
std::string name_of_child(pid_t pid) {
  auto name = comm_of(pid);
  if (name.empty()) return name;
  std::string inner;
  for (const auto grandchild : pids_in(read_proc_file(fmt::format("/proc/{}/task/{}/children", pid, pid)))) {
    const auto comm = comm_of(grandchild);
    if (!comm.empty() && inner.find(comm) == std::string::npos) inner += (inner.empty() ? "" : ", ") + comm;
  }
  return inner.empty() ? name : fmt::format("{} ({})", name, inner);
}

// Under the mutex: the names of the children running now (a child's comm changes at its exec).
void read_running_names() {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    for (const auto pid : pids_in(read_proc_file(fmt::format("/proc/self/task/{}/children", task->d_name)))) {
      auto name = name_of_child(pid);
      if (name.empty()) continue;
      const auto known = state->running_names.find(pid);
      if (known == state->running_names.end()) {
        if (state->running_names.size() < names_kept) state->running_names.emplace(pid, std::move(name));
      } else if (!known->second.starts_with(name + " (")) {  // its children gone first: their names stay
        known->second = std::move(name);
      }
    }
  }
  closedir(tasks);
}

}  // namespace

void start_children_accounting() {
  if (!state) state = new children_state;
  state->children_cpu_at_start_ns = children_cpu_ns();
  state->counting.store(true, std::memory_order_release);
}

pid_t peek_reapable_child(idtype_t which, id_t id, int options, char (&name)[16]) noexcept {
  name[0] = '\0';
  if (!state || !state->counting.load(std::memory_order_acquire)) return 0;
  state->may_have_children.store(true, std::memory_order_relaxed);
  const int saved_errno = errno;
  siginfo_t info{};
  // WNOWAIT: the child stays for the program's own call, which follows. A blocking call waits
  // here for what it would have waited for (the same children, the same state changes), so that
  // a child shorter than a tick is named too; the program's call then returns at once.
  const int kept = options & (__WALL | __WCLONE | __WNOTHREAD | WNOHANG);
  const int changes = WEXITED | (options & WUNTRACED ? WSTOPPED : 0) | (options & WCONTINUED ? WCONTINUED : 0);
  // Through call_through: the time waited is the program's, not kairos's own work.
  if (call_through(::waitid, which, id, &info, changes | WNOWAIT | kept) != 0) {
    const bool interrupted = errno == EINTR;
    errno = interrupted ? EINTR : saved_errno;
    return interrupted ? -1 : 0;  // else the program's call meets the same error itself
  }
  pid_t pid = 0;
  if (info.si_pid > 0 && (info.si_code == CLD_EXITED || info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED)) {
    pid = info.si_pid;
    char path[32];
    // Formatted by hand: nothing here may allocate or lock.
    char digits[16];
    int count = 0;
    for (auto value = static_cast<unsigned>(pid); value > 0 && count < 15; value /= 10)
      digits[count++] = static_cast<char>('0' + value % 10);
    std::memcpy(path, "/proc/", 6);
    int length = 6;
    while (count > 0) path[length++] = digits[--count];
    std::memcpy(path + length, "/comm", 6);
    const int descriptor = ::open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor >= 0) {
      const auto length_read = ::read(descriptor, name, sizeof name - 1);
      ::close(descriptor);
      const auto kept_length = length_read > 0 ? static_cast<std::size_t>(length_read) : 0;
      name[kept_length] = '\0';
      if (kept_length > 0 && name[kept_length - 1] == '\n') name[kept_length - 1] = '\0';
    }
  }
  errno = saved_errno;
  return pid;
}

void child_reaped(pid_t pid, const rusage& usage, const char* name) noexcept {
  if (!state || !state->counting.load(std::memory_order_acquire)) return;
  for (auto& slot : state->slots) {
    int expected = slot_free;
    if (!slot.state.compare_exchange_strong(expected, slot_writing, std::memory_order_acquire)) continue;
    slot.pid = pid;
    slot.cpu_ns = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000'000ll +
                  (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1'000ll;
    std::size_t length = 0;
    if (name)
      while (length < sizeof slot.name - 1 && name[length]) slot.name[length] = name[length], ++length;
    slot.name[length] = '\0';
    slot.state.store(slot_ready, std::memory_order_release);
    return;
  }
}

void children_may_run() noexcept {
  if (state) state->may_have_children.store(true, std::memory_order_relaxed);
}

void children_tick() {
  if (!state || !state->counting.load(std::memory_order_acquire) ||
      !state->may_have_children.load(std::memory_order_relaxed))
    return;
  std::lock_guard lock{state->mutex};
  fold_reaped();
  read_running_names();
}

unprofiled_children unprofiled_children_now() {
  if (!state || !state->counting.load(std::memory_order_acquire)) return {};
  std::lock_guard lock{state->mutex};
  fold_reaped();
  unprofiled_children children;
  children.processes = state->processes;
  children.cpu_ns = state->cpu_ns;
  for (const auto& [name, group] : state->groups) children.by_name.push_back(group);
  // Children reaped where no wrapper of kairos's sees it: counted by the kernel, unnamed.
  const auto unseen_ns = children_cpu_ns() - state->children_cpu_at_start_ns - state->cpu_ns;
  if (unseen_ns >= 1'000'000) {
    children.by_name.push_back({"[reaped unseen: system(), waitid]", 0, unseen_ns});
    children.cpu_ns += unseen_ns;
  }
  std::ranges::stable_sort(children.by_name, std::greater{}, &child_group::cpu_ns);
  return children;
}

void children_forget_after_fork_in_child() noexcept {
  if (!state) return;
  // The parent's state is abandoned (its mutex may be held): the child counts none of its own
  // (kairos counts children only when it does not follow them, and then the child is off).
  state = nullptr;
}

}  // namespace kairos::runtime
