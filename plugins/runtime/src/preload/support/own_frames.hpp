#pragma once
// kairos's own frames in the program's stacks (docs/runtime.md, "kairos's own frames"). kairos runs
// on the program's threads: its thread-start trampoline under every thread, its wrappers between
// the program's frames and what they wrap, and work of its own (the GOT patcher after a dlopen, a
// wrapper's or an instrumented function's bookkeeping). A sampled stack is folded to read as it
// would without kairos:
// - kairos's frames that only pass a call on (kairos::call_through) are dropped, and the kairos
//   frames that led to them: a thread's start routine is its root, as under perf;
// - kairos's own work becomes one leaf frame, `[kairos]`, under the program's frame that led to it
//   (`MPI_Init` ← `[kairos]`): where it came from stays visible, and its time is a frame's self
//   time that a report can count, not a share of a program's function.
// Told apart by address alone: libkairos.so's executable segment, and kairos_call_through's
// instructions in it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace kairos::runtime {

// The `[kairos]` frame's synthetic address: above every user-space address, below Python's frames'
// (python_frames.hpp); the sink names it (own_work_frame_named).
inline constexpr std::uint64_t own_work_frame_address = std::uint64_t{1} << 61;

struct code_range {
  std::uintptr_t begin = 0, end = 0;
  bool holds(std::uintptr_t address) const noexcept { return address >= begin && address < end; }
};

// libkairos.so's executable segment. Found on first use (dl_iterate_phdr: never in a signal
// handler); kairos's threads only.
code_range own_code() noexcept;
// libkairos.so's path, for the `[kairos]` frame's module.
const std::string& own_module_path();

struct folded_stack {
  std::size_t count = 0;  // frames kept
  bool own_work = false;  // its leaf is the `[kairos]` frame
};

// Folds `addresses` (a sample's lookup addresses, leaf first: the interrupted instruction, then
// return addresses less one) in place, as the header says. Stacks with no kairos frame, nearly
// all, cost one comparison a frame.
folded_stack fold_own_frames(std::uint64_t* addresses, std::size_t count) noexcept;

}  // namespace kairos::runtime
