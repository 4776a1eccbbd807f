// The threads stage: the registry of the process's threads, which every stage uses.
#include "preload/process/stages.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"

namespace kairos::runtime {

// Locked last at a fork, released and adopted first; a thread is registered before any other
// stage sees it start, and forgotten after every other saw it end.
extern constexpr stage threads_stage{
    .name = "threads",
    .start =
        [](start_context&) {
          current_thread();  // the main thread is the program's thread 0
          return stage_start{};
        },
    .lock_for_fork = [] { threads().lock_for_fork(); },
    .unlock_in_parent = [] { threads().unlock_after_fork_in_parent(); },
    // First of the children's hooks (the table's last): no other hook ran that could register.
    .in_child = []() noexcept { threads().adopt_after_fork_in_child(current_thread_if_registered()); },
    .thread_started =
        [](bool kairos_owned, bool) noexcept {
          reentry_guard guard;
          register_current_thread(kairos_owned);
        },
    .thread_ending = []() noexcept { mark_current_thread_ended(); },
};

}  // namespace kairos::runtime
