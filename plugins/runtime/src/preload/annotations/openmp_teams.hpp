#pragma once
// OpenMP's parallel regions, whichever runtime runs them (openmp_tool.cpp: LLVM's libomp through
// OMPT; openmp_gomp.cpp: GCC's libgomp through its wrapped entry points): each instance's team,
// what each of its threads did in it, and per region the sums the imbalance table shows
// (docs/openmp.md). A thread's share of an instance, by its number in the team:
//   work = (its arrival at the region's closing barrier - its start) - the waits inside,
//   wait = the waits inside + (the region's end - its arrival),
// where the waits inside are barriers, taskwaits and lock waits, less the tasks the thread ran
// while waiting. Members write only their own slot; the encountering (primary) thread reads every
// slot once the region has ended, after the closing barrier, and adds them to the region's sums.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kairos::runtime {

// What both runtimes' files read: whether OpenMP is recorded (between openmp.hpp's start and
// stop), and which runtime reached kairos (null: none yet).
bool openmp_recording() noexcept;
void set_openmp_recording(bool recording) noexcept;
void set_openmp_runtime(const char* name) noexcept;
const char* openmp_runtime_name() noexcept;

struct openmp_region;  // one parallel construct of the program (a code address): its name and sums

// A construct's region, found or made (named "omp parallel <code_location>"). `function_entry`:
// the address is the outlined function (libgomp), not a call site (OMPT's return address);
// `caller`: where the construct called the runtime, which names a body without a symbol.
openmp_region* find_openmp_region(const void* code, bool function_entry, const void* caller = nullptr);
const char* name_of(const openmp_region& region) noexcept;

struct openmp_member {
  std::atomic<std::int64_t> start_ns{0};    // 0: this thread never joined the instance
  std::atomic<std::int64_t> arrival_ns{0};  // at the closing barrier; 0: not seen (the primary)
  std::atomic<std::int64_t> end_ns{0};      // its implicit task's end, where that is timely
  std::atomic<std::int64_t> wait_ns{0};     // waits inside, tasks run while waiting taken out
  std::atomic<std::int64_t> tasks_after_arrival_ns{0};
};

// One instance of a parallel region, owned by the thread that encountered it (a pool per thread,
// by nesting depth: nothing is allocated once a program's regions were each seen).
struct openmp_team {
  openmp_region* region = nullptr;
  std::uint32_t capacity = 0;
  std::unique_ptr<openmp_member[]> members;
  openmp_member* member(std::uint32_t index) noexcept { return index < capacity ? &members[index] : nullptr; }
};

// The encountering thread: a team for at most `threads` members, then its end at `end_ns`, when
// every member's share is added to the region's sums and the team goes back to the pool.
openmp_team* begin_openmp_team(openmp_region* region, std::uint32_t threads);
void end_openmp_team(openmp_team* team, std::int64_t end_ns);

// A region's sums, for the database's openmp_thread_time rows (at the end).
struct openmp_thread_time {
  std::string region;
  std::uint32_t thread = 0;  // the number in the team
  std::uint64_t instances = 0;
  std::int64_t work_ns = 0, wait_ns = 0;
};
std::vector<openmp_thread_time> openmp_thread_times();
std::uint64_t openmp_parallel_regions() noexcept;  // instances ended

// fork: a child forgets the parent's sums (async-signal-safe: done at its next region or read).
void openmp_lock_for_fork();
void openmp_unlock_after_fork() noexcept;
void openmp_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
