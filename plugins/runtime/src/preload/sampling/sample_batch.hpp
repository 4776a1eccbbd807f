#pragma once
// What the sampler hands over: stacks copied out of the signal-time buffers (or taken by the
// control thread for a waiting thread), in batches. The sampler owns this type; lifecycle tells
// it where batches go (set_sample_delivery), and pipeline/delivery.cpp turns them into database
// rows. The sampler never sees the database.
#include <cstdint>
#include <vector>

namespace kairos::runtime {

struct thread_record;

enum class sample_source : std::uint8_t { cpu_time = 0, real_time = 1, waiting = 2 };

inline constexpr std::size_t sample_stack_depth = 64;
// The outermost frame of a stack whose unwinding stopped before the thread's first frame (a copied
// stack that ended, a frame nothing could follow, 64 frames): the sink names it "[stack cut]", so
// such stacks stand apart instead of passing for whole ones. Below the Python frames' addresses,
// above every user-space address.
inline constexpr std::uint64_t cut_stack_address = (std::uint64_t{1} << 62) - 1;

struct sampled_stack {
  // Leaves `addresses` as it is: only the first frame_count are ever read, and zeroing all 64 of
  // every sample a batch appends was most of the writer's own CPU time per sample.
  sampled_stack() noexcept {}  // NOLINT: user-provided on purpose (no zero-initialization)

  thread_record* thread = nullptr;
  std::int64_t time_ns = 0;        // CLOCK_MONOTONIC (the database's clock)
  std::int64_t weight_ns = 0;      // the CPU time (or real time) this sample stands for
  std::int64_t thread_cpu_ns = 0;  // the thread's CPU time at the sample (0: unknown)
  sample_source source = sample_source::cpu_time;
  std::uint16_t frame_count = 0;
  std::int32_t window = 0;                      // the time window it was taken in (0: no windows)
  std::uint64_t addresses[sample_stack_depth];  // lookup addresses, leaf first
};

using sample_batch = std::vector<sampled_stack>;
using sample_delivery = void (*)(const sample_batch&);

}  // namespace kairos::runtime
