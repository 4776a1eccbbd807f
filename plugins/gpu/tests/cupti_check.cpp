// The CUDA backend against a real device: cuda_program's workload (built into this program with
// -DCUDA_PROGRAM_NO_MAIN) runs in this process under the collector, and what CUPTI reports through
// the backend is compared with what the program measured itself:
// - each kernel's duration with its cudaEvent pair (within max(5%, 20 µs): the events also time the
//   gaps between them and the kernel);
// - names (demangled), grid, block, shared memory (static + dynamic), streams;
// - start and end on the host clock: within the program's steady_clock bracket of the launch and of
//   the moment its stop event was seen complete, ± 2 ms;
// - copies' kinds and sizes, call sites (thread, time of the call), the thread's tallies and
//   device-time ledger, and that only the program's own (outermost) API calls are reported.
// Prints a table of the kernels. Exit status 0: all held; 1: some did not (each says which);
// 77: no CUDA device here (ctest's SKIP_RETURN_CODE; the line also carries kairos's skip marker).
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/plugins/gpu/collector.hpp>

#include "cuda_workload.hpp"

namespace {

namespace gpu = kairos::gpu;

int failures = 0;

void expect(bool condition, const std::string& what) {
  if (condition) return;
  ++failures;
  std::printf("cupti_check: FAILED: %s\n", what.c_str());
}

std::string dims(const std::array<std::uint32_t, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}
std::string dims(const unsigned (&d)[3]) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

constexpr std::int64_t bracket_slack_ns = 2'000'000;

}  // namespace

int main() {
  char message[512] = {};
  const int ready = cuda_program::initialise(message, sizeof message);
  if (ready == 3) {
    // What the backend makes of a process without a device, for the log.
    const auto statuses = gpu::start();
    for (const auto& status : statuses)
      if (status.api == gpu::runtime_api::cuda)
        std::printf("cupti_check: the CUDA backend here: %s\n",
                    status.observing ? "observing" : status.failure.text().c_str());
    gpu::stop(0);
    std::printf("KAIROS-TEST-SKIPPED: no CUDA device: %s\n", message);
    return 77;
  }
  if (ready != 0) {
    std::printf("cupti_check: FAILED: %s\n", message);
    return 1;
  }

  gpu::collector_options options;
  options.keep_activity = true;
  bool observing = false;
  for (const auto& status : gpu::start(options)) {
    if (status.api != gpu::runtime_api::cuda) continue;
    observing = status.observing;
    if (!observing)
      std::printf("cupti_check: FAILED: the CUDA backend does not observe: %s\n", status.failure.text().c_str());
  }
  if (!observing) return 1;

  const auto ledger = gpu::this_thread_device_ledger();
  const gpu::thread_tally before = gpu::current_thread_tally();
  const auto tid = static_cast<std::int64_t>(::syscall(SYS_gettid));

  cuda_program::workload done{};
  if (cuda_program::run(done, message, sizeof message) != 0) {
    std::printf("cupti_check: FAILED: the workload: %s\n", message);
    gpu::stop(0);
    return 1;
  }

  // The thread's tallies and ledger (the callback API's side), resolved by the activity records
  // (kernel_device_ns polls the collector, which flushes CUPTI's completed buffers).
  const gpu::thread_tally after = gpu::current_thread_tally();
  const std::uint64_t kernels_tallied = after.kernels_launched - before.kernels_launched;
  const std::uint64_t copies_tallied = after.copies_issued - before.copies_issued;
  // The setup's cudaMemset (4 KiB) is one more copy before the workload's three.
  expect(kernels_tallied == 4, "4 kernels tallied, not " + std::to_string(kernels_tallied));
  expect(copies_tallied == 4, "4 copies tallied (3 and the setup's memset), not " + std::to_string(copies_tallied));
  const auto bytes = [&](gpu::copy_kind kind) {
    const auto i = static_cast<std::size_t>(kind);
    return after.copy_bytes[i] - before.copy_bytes[i];
  };
  expect(bytes(gpu::copy_kind::host_to_device) == (1u << 20), "1 MiB tallied host to device");
  expect(bytes(gpu::copy_kind::device_to_host) == (512u << 10), "512 KiB tallied device to host");
  expect(bytes(gpu::copy_kind::memset) == (64u << 10) + 4096, "64 KiB + 4 KiB tallied as memsets");
  expect(after.api_ns > before.api_ns, "host time tallied inside API calls");
  const std::int64_t ledger_kernels_ns =
      gpu::kernel_device_ns(ledger, before.kernels_launched, after.kernels_launched, 5'000'000'000);
  const std::int64_t ledger_copies_ns =
      gpu::copy_device_ns(ledger, before.copies_issued, after.copies_issued, 5'000'000'000);
  expect(ledger_kernels_ns > 0, "the ledger resolves the kernels' device time");
  expect(ledger_copies_ns > 0, "the ledger resolves the copies' device time");

  gpu::stop(2'000'000'000);
  const gpu::activity_batch batch = gpu::take_completed();

  // Devices.
  for (const auto& d : batch.devices)
    std::printf("cupti_check: device %d: %s, %s, %.1f GiB, %d SMs, %d MHz, memory %d MHz\n", d.index, d.name.c_str(),
                d.architecture.c_str(), d.memory_bytes / double(1u << 30), d.multiprocessors, d.clock_khz / 1000,
                d.memory_clock_khz / 1000);
  expect(!batch.devices.empty() && batch.devices[0].api == gpu::runtime_api::cuda &&
             batch.devices[0].architecture.starts_with("sm_"),
         "a CUDA device described, with an sm_XY architecture");

  // Kernels: matched to the runs by their configuration (each distinct).
  std::printf("\n%-52s %-9s %-9s %6s %11s %11s %10s %12s\n", "kernel", "grid", "block", "shared", "CUPTI µs",
              "event µs", "diff µs", "start-launch");
  std::int64_t cupti_kernels_ns = 0;
  std::uint64_t stream_a = 0, stream_b = 0;
  for (int i = 0; i < done.kernel_count; ++i) {
    const auto& run = done.kernels[i];
    const auto found = std::find_if(batch.kernels.begin(), batch.kernels.end(), [&](const gpu::kernel_activity& k) {
      return dims(k.grid) == dims(run.grid) && dims(k.block) == dims(run.block);
    });
    if (found == batch.kernels.end()) {
      expect(false, std::string{"a kernel record for "} + run.name + " " + dims(run.grid) + " " + dims(run.block));
      continue;
    }
    const auto& k = *found;
    const double cupti_us = (k.end_ns - k.start_ns) / 1e3, event_us = run.event_ms * 1e3;
    std::printf("%-52.52s %-9s %-9s %6u %11.1f %11.1f %10.1f %10.1fµs\n", k.name.c_str(), dims(k.grid).c_str(),
                dims(k.block).c_str(), k.shared_bytes, cupti_us, event_us, cupti_us - event_us,
                (k.start_ns - run.launch_begin_ns) / 1e3);
    cupti_kernels_ns += k.end_ns - k.start_ns;
    const std::string label = std::string{run.name} + " " + dims(run.grid);
    expect(std::string_view{k.name}.starts_with(std::string{run.name} + (run.stream == 0 ? "(" : "")),
           label + ": named " + k.name);
    expect(k.api == gpu::runtime_api::cuda, label + ": a CUDA kernel");
    expect(k.shared_bytes == run.static_shared + run.dynamic_shared,
           label + ": shared memory " + std::to_string(k.shared_bytes) + ", launched with " +
               std::to_string(run.static_shared) + " static + " + std::to_string(run.dynamic_shared) + " dynamic");
    const double tolerance_us = std::max(0.05 * event_us, 20.0);
    expect(std::abs(cupti_us - event_us) <= tolerance_us, label + ": CUPTI's duration " + std::to_string(cupti_us) +
                                                              " µs against the events' " + std::to_string(event_us) +
                                                              " µs");
    expect(k.start_ns >= run.launch_begin_ns - bracket_slack_ns && k.end_ns <= run.done_ns + bracket_slack_ns &&
               k.start_ns <= k.end_ns,
           label + ": on the host clock, within its launch and completion ± 2 ms (start " +
               std::to_string(k.start_ns - run.launch_begin_ns) + " ns after the launch, end " +
               std::to_string(run.done_ns - k.end_ns) + " ns before it was seen complete)");
    if (i == 0 || run.stream == 1)  // the first on an idle stream starts right after its launch
      expect(k.start_ns <= run.launch_end_ns + bracket_slack_ns, label + ": starts within 2 ms of its launch");
    expect(k.site.tid == tid, label + ": issued by this thread (" + std::to_string(k.site.tid) + ")");
    expect(k.site.call_ns >= run.launch_begin_ns && k.site.call_ns <= run.launch_end_ns,
           label + ": its call site's time within the launch");
    expect(k.correlation != 0, label + ": a correlation id");
    const auto call = std::find_if(batch.calls.begin(), batch.calls.end(),
                                   [&](const gpu::api_call& c) { return c.correlation == k.correlation; });
    expect(call != batch.calls.end() && call->name == "cudaLaunchKernel",
           label + ": its API call reported, as cudaLaunchKernel");
    if (call != batch.calls.end())
      std::printf("%-52s launched by %.*s, correlation %llu, stream %llu\n", "", static_cast<int>(call->name.size()),
                  call->name.data(), static_cast<unsigned long long>(k.correlation),
                  static_cast<unsigned long long>(k.stream));
    (run.stream == 0 ? stream_a : stream_b) = k.stream;
  }
  expect(batch.kernels.size() == 4, "4 kernel records, not " + std::to_string(batch.kernels.size()));
  expect(stream_a != stream_b, "the streams told apart");
  expect(std::count_if(batch.kernels.begin(), batch.kernels.end(),
                       [&](const gpu::kernel_activity& k) { return k.stream == stream_a; }) == 3,
         "3 kernels on stream A");
  expect(std::llabs(ledger_kernels_ns - cupti_kernels_ns) <= 1000,
         "the ledger's kernel time (" + std::to_string(ledger_kernels_ns) + " ns) is the records' (" +
             std::to_string(cupti_kernels_ns) + " ns)");

  // Copies: the workload's three, and the setup's memset of 4 KiB.
  std::printf("\n%-16s %10s %6s %10s\n", "copy", "bytes", "async", "µs");
  for (const auto& c : batch.copies)
    std::printf("%-16s %10llu %6s %10.1f\n", std::string{gpu::name_of(c.kind)}.c_str(),
                static_cast<unsigned long long>(c.bytes), c.asynchronous ? "yes" : "no", (c.end_ns - c.start_ns) / 1e3);
  expect(batch.copies.size() == 4, "4 copy records, not " + std::to_string(batch.copies.size()));
  for (int i = 0; i < done.copy_count; ++i) {
    const auto& run = done.copies[i];
    const gpu::copy_kind kind = run.kind < 0    ? gpu::copy_kind::memset
                                : run.kind == 1 ? gpu::copy_kind::host_to_device
                                                : gpu::copy_kind::device_to_host;
    const std::string label = std::string{gpu::name_of(kind)} + " of " + std::to_string(run.bytes);
    const auto found = std::find_if(batch.copies.begin(), batch.copies.end(), [&](const gpu::copy_activity& c) {
      return c.kind == kind && c.bytes == run.bytes;
    });
    if (found == batch.copies.end()) {
      expect(false, label + ": a record");
      continue;
    }
    expect(found->asynchronous == run.asynchronous, label + ": asynchronous " + (run.asynchronous ? "yes" : "no"));
    expect(found->site.tid == tid && found->site.call_ns >= run.begin_ns && found->site.call_ns <= run.end_ns,
           label + ": its call site (this thread, during the call)");
    expect(found->start_ns >= run.begin_ns - bracket_slack_ns, label + ": on the host clock, not before its call");
  }

  // API calls: only the program's own, outermost ones: on this thread, none inside another.
  std::vector<gpu::api_call> mine;
  for (const auto& c : batch.calls)
    if (c.tid == tid) mine.push_back(c);
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  std::size_t nested = 0, driver = 0;
  for (std::size_t i = 0; i + 1 < mine.size(); ++i)
    if (mine[i + 1].end_ns < mine[i].end_ns) ++nested;
  for (const auto& c : mine)
    if (c.name.starts_with("cu") && !c.name.starts_with("cuda")) ++driver;
  std::printf("\ncupti_check: %zu API calls (%zu on this thread, %zu of them driver calls), %llu records dropped\n",
              batch.calls.size(), mine.size(), driver, static_cast<unsigned long long>(gpu::records_dropped()));
  expect(!mine.empty(), "API calls reported on this thread (tid " + std::to_string(tid) + ")");
  expect(nested == 0, std::to_string(nested) + " API calls reported inside another");

  // Again, observed anew (start after stop) and keeping no activity: the tallies and the ledger only.
  gpu::collector_options quiet;
  quiet.keep_activity = false;
  bool again = false;
  for (const auto& status : gpu::start(quiet))
    if (status.api == gpu::runtime_api::cuda) {
      again = status.observing;
      expect(again, "the CUDA backend observes again after stop(): " + status.failure.text());
    }
  if (again) {
    const gpu::thread_tally second_before = gpu::current_thread_tally();
    cuda_program::workload second{};
    expect(cuda_program::run(second, message, sizeof message) == 0, std::string{"the workload again: "} + message);
    const gpu::thread_tally second_after = gpu::current_thread_tally();
    expect(second_after.kernels_launched - second_before.kernels_launched == 4, "4 kernels tallied again");
    const std::int64_t kernels_ns =
        gpu::kernel_device_ns(ledger, second_before.kernels_launched, second_after.kernels_launched, 5'000'000'000);
    double events_us = 0, tolerance_us = 0;
    for (int i = 0; i < second.kernel_count; ++i) {
      events_us += second.kernels[i].event_ms * 1e3;
      tolerance_us += std::max(0.05 * second.kernels[i].event_ms * 1e3, 20.0);
    }
    std::printf("cupti_check: without activity: the ledger's kernel time %.1f µs, the events' %.1f µs\n",
                kernels_ns / 1e3, events_us);
    expect(kernels_ns > 0 && std::abs(kernels_ns / 1e3 - events_us) <= tolerance_us,
           "without activity, the ledger's kernel time is the events'");
    gpu::stop(2'000'000'000);
    expect(gpu::take_completed().empty(), "no activity kept when keep_activity is false");
  }

  if (failures) {
    std::printf("cupti_check: %d checks FAILED\n", failures);
    return 1;
  }
  std::printf("cupti_check: all checks held\n");
  return 0;
}
