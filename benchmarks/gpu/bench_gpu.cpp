// What kairos adds to a HIP call's host time: a kernel launch and an asynchronous copy, unwrapped
// and wrapped (the collector observing, as under kairos-run, with and without the caller's stack),
// against the HIP test double (plugins/gpu/tests/hip_double). The wrapper records two events of
// kairos's own around the work, times the call, and queues the work for resolution; resolving
// (poll, on kairos's thread under kairos-run) is timed here too, every 1,024 calls, so the figure
// is all the host CPU kairos spends per call. Ratios of medians from one run, repetitions
// interleaved.
#include <algorithm>
#include <cstdint>
#include <optional>

#include <hip/hip_runtime_api.h>
#include <kairos/plugins/backtrace/capture.hpp>
#include <kairos/plugins/gpu/collector.hpp>

#include "ratio_report.hpp"

namespace {

void simulated_kernel(std::uint64_t, float*) {}

struct stream_holder {
  hipStream_t stream = nullptr;
  stream_holder() { (void)hipStreamCreate(&stream); }
  ~stream_holder() { (void)hipStreamDestroy(stream); }
};

// The caller's stack as kairos-run captures it (gpu_activity.cpp): kairos's unwind tables on a
// thread the sampler registered, libgcc's unwinder where they cannot finish.
std::size_t caller_stack(std::uint64_t* frames, std::size_t capacity) {
  std::uintptr_t captured[64];
  bool truncated = false;
  const auto result = kairos::backtrace_detail::capture_frames(captured, 0, false, truncated);
  const auto count = std::min<std::size_t>(capacity, static_cast<std::size_t>(result.count));
  for (std::size_t i = 0; i < count; ++i) frames[i] = captured[i];
  return count;
}

// Observing for one benchmark run; resolved work is taken and dropped as the runtime would.
struct observing {
  explicit observing(bool stacks) {
    kairos::gpu::collector_options options;
    if (stacks) options.capture_stack = &caller_stack;
    kairos::gpu::start(options);
  }
  ~observing() {
    kairos::gpu::stop(1'000'000'000);
    (void)kairos::gpu::take_completed();
  }
  static void every_1024(std::uint64_t call) {
    if ((call & 1023) != 0) return;
    static kairos::gpu::activity_batch taken;  // kept across takes, as the runtime keeps its own
    kairos::gpu::poll();
    kairos::gpu::take_completed(taken);
  }
};

void launch_loop(benchmark::State& state, bool observed, bool stacks) {
  stream_holder holder;
  std::uint64_t duration_ns = 0;
  float data[1] = {};
  float* pointer = data;
  void* arguments[] = {&duration_ns, &pointer};
  std::optional<observing> observer;
  if (observed) observer.emplace(stacks);
  std::uint64_t call = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(hipLaunchKernel(reinterpret_cast<const void*>(&simulated_kernel), dim3(1), dim3(64),
                                             arguments, 0, holder.stream));
    if (observed) observing::every_1024(++call);
  }
  (void)hipStreamSynchronize(holder.stream);
}

void copy_loop(benchmark::State& state, bool observed) {
  stream_holder holder;
  char host[64] = {}, device[64] = {};
  std::optional<observing> observer;
  if (observed) observer.emplace(false);
  std::uint64_t call = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(hipMemcpyAsync(device, host, sizeof host, hipMemcpyHostToDevice, holder.stream));
    if (observed) observing::every_1024(++call);
  }
  (void)hipStreamSynchronize(holder.stream);
}

void launch_unwrapped(benchmark::State& state) { launch_loop(state, false, false); }
void launch_wrapped(benchmark::State& state) { launch_loop(state, true, false); }
void launch_wrapped_with_stack(benchmark::State& state) { launch_loop(state, true, true); }
void memcpy_async_unwrapped(benchmark::State& state) { copy_loop(state, false); }
void memcpy_async_wrapped(benchmark::State& state) { copy_loop(state, true); }
BENCHMARK(launch_unwrapped);
BENCHMARK(launch_wrapped);
BENCHMARK(launch_wrapped_with_stack);
BENCHMARK(memcpy_async_unwrapped);
BENCHMARK(memcpy_async_wrapped);

}  // namespace

// The double's own call costs ~40 ns, so the limits say what kairos may add: 15× is ≈0.55 µs per
// call (a real runtime's launch costs several µs); a caller's stack (what kairos-run captures with
// KAIROS_GPU_STACKS=true) adds more: ≈3 µs with libgcc's unwinder, ≈0.3 µs with the tables.
int main(int argc, char** argv) {
  // As under kairos-run with sampling on: libgcc resolved, this thread's stack registered, the
  // unwind tables built (there by the control thread, as samples need them; here all at once).
  kairos::backtrace_detail::prewarm_process();
  kairos::unwind_tables_register_thread();
  kairos::build_unwind_tables(true);
  return kairos::benchmarks::run_and_print_ratios(argc, argv,
                                                  {{"launch_wrapped", "launch_unwrapped", 15.0},
                                                   {"launch_wrapped_with_stack", "launch_unwrapped", 100.0},
                                                   {"memcpy_async_wrapped", "memcpy_async_unwrapped", 15.0}});
}
