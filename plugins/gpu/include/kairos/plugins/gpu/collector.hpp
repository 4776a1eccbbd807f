#pragma once
// The GPU plugin's one collector per process. start() finds the GPU runtimes loaded in this process
// (HIP: libamdhip64; CUDA: libcudart/libcuda, observed through CUPTI) and starts observing them;
// calls, kernels and copies become activity (activity.hpp) that the host takes in batches, and
// per-thread tallies that the components (gpu.hpp) read.
//
// Device times are never had by synchronising the program's streams: the HIP backend records its
// own events around each launch and resolves them when they have completed (poll(), called by a
// kairos thread, or at the program's next synchronisation); CUDA's come from CUPTI's activity
// buffers.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <kairos/plugins/gpu/activity.hpp>
#include <kairos/problem.hpp>

namespace kairos::gpu {

struct collector_options {
  // Fills `frames` (leaf first) with the caller's stack, returns how many; nullptr: no stacks.
  std::size_t (*capture_stack)(std::uint64_t* frames, std::size_t capacity) = nullptr;
  bool keep_activity = true;  // false: only the tallies (components), no activity batches
};

struct backend_status {
  runtime_api api = runtime_api::hip;
  bool observing = false;
  problem failure;  // why not, when not observing ("no HIP runtime loaded", "hipErrorNoDevice: ...")
};

// Starts (or, called again, picks up runtimes loaded since) observing; returns each backend's state.
std::vector<backend_status> start(const collector_options& options = {});
// Whether any backend observes a runtime now.
bool observing();
// Resolves completed work (non-blocking).
void poll();
// What completed since the last take (empty when keep_activity is false).
activity_batch take_completed();
// The same into `batch` (cleared first), which gives its storage in exchange: a caller that keeps
// one batch across takes lets the collector reuse it, with no allocation in the steady state.
void take_completed(activity_batch& batch);
// The process's end: waits up to `timeout_ns` for kairos's own records of launched work, resolves
// them, then stops observing (the program's streams are never waited on).
void stop(std::int64_t timeout_ns);
// Activity records a runtime dropped before kairos could take them (CUPTI's buffers were full):
// lost data, for the host to say so.
std::uint64_t records_dropped();
// fork child: the parent's pending work is forgotten (the child never sees its events complete).
void forget_after_fork() noexcept;

// What the calling thread did since it started, for the components.
struct thread_tally {
  std::int64_t api_ns = 0;  // host time inside GPU API calls
  std::uint64_t kernels_launched = 0;
  std::uint64_t copies_issued = 0;
  std::array<std::uint64_t, 7> copy_bytes{};  // by copy_kind
};
thread_tally current_thread_tally() noexcept;

// The calling thread's device-time ledger: from the first call on (any thread's), every thread keeps
// the device time of each kernel and copy it issues, by ordinal (thread_tally's kernels_launched
// and copies_issued before the issue), 8 bytes per launch, until the process ends.
using device_ledger_handle = const void*;
device_ledger_handle this_thread_device_ledger();
// Device time (ns) of the kernels (or copies) with ordinals in [first, last) of `ledger`'s thread;
// waits up to `timeout_ns` for kairos's own events of that work. -1 when some of it could not be
// resolved in time, or was issued before the ledger existed.
std::int64_t kernel_device_ns(device_ledger_handle ledger, std::uint64_t first, std::uint64_t last,
                              std::int64_t timeout_ns);
std::int64_t copy_device_ns(device_ledger_handle ledger, std::uint64_t first, std::uint64_t last,
                            std::int64_t timeout_ns);

// The devices seen by the backends that observe (empty when none).
std::vector<device_info> devices();

}  // namespace kairos::gpu
