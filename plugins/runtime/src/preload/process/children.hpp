#pragma once
// The child processes kairos does not profile (KAIROS_FOLLOW_CHILDREN off): how many ran and the
// CPU time they used, by name, for the exit line and every report (docs/runtime.md, "Children").
// `tar czf` spends most of its time in its gzip child: a profile of tar alone must say so.
//
// The CPU time is the kernel's: the rusage wait4 returns for each child the program reaps (the
// wait family is wrapped), and RUSAGE_CHILDREN for those reaped where no wrapper sees it
// (system(), waitid). The names: a zombie's comm read just before the program reaps it, else the
// comm of the running children (/proc/self/task/*/children) read at the service thread's ticks.
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kairos::runtime {

// At init: from now on, children are counted (those reaped before, by earlier images of an exec
// chain, are theirs).
void start_children_accounting();

// The wait family's wrappers (async-signal-safe: SIGCHLD handlers call waitpid). Before the real
// call: the name of a child the call will reap, read while it is a zombie (its pid; 0: none; -1:
// a signal interrupted the wait, errno EINTR, which the wrapper returns as the call would).
pid_t peek_reapable_child(idtype_t which, id_t id, int options, char (&name)[16]) noexcept;
// After it: a child reaped (exited or killed), its rusage, and its name when peeked.
void child_reaped(pid_t pid, const rusage& usage, const char* name) noexcept;
// After a fork: the parent may have children from now on.
void children_may_run() noexcept;

// The service thread's tick: the running children's names.
void children_tick();

struct child_group {
  std::string name;
  std::uint64_t processes = 0;  // 0: not known (reaped where no wrapper saw them)
  std::int64_t cpu_ns = 0;
};
struct unprofiled_children {
  std::uint64_t processes = 0;
  std::int64_t cpu_ns = 0;
  std::vector<child_group> by_name;  // most CPU time first
};
// At the end (ordinary code).
unprofiled_children unprofiled_children_now();

// A fork child starts with none of its parent's.
void children_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
