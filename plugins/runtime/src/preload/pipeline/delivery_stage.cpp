// The delivery stage: what the producers collected, flushed into the database at each tick.
#include "preload/pipeline/delivery.hpp"
#include "preload/process/stages.hpp"

namespace kairos::runtime {

extern constexpr stage delivery_stage{
    .name = "delivery",
    .tick = [] { tick_reporting("writing the profile database failed", [] { flush_to_database(false); }); },
    .lock_for_fork = [] { delivery_lock_for_fork(); },
    .unlock_in_parent = [] { delivery_unlock_after_fork_in_parent(); },
    .in_child = []() noexcept { delivery_forget_after_fork_in_child(); },
};

}  // namespace kairos::runtime
