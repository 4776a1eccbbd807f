// The collector: the backends, what they completed (until the host takes it) and each thread's
// tallies and device-time ledger (for the components).
#include <kairos/plugins/gpu/collector.hpp>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "backend.hpp"

namespace kairos::gpu {
namespace {

// The device time of each kernel and copy a thread issued, by ordinal: -1 while pending. Only kept
// while device times are retained (components); it outlives its thread (the process holds every
// ledger until it ends) because work is resolved after the thread that issued it may be gone.
struct device_ledger {
  std::mutex mutex;
  std::deque<std::int64_t> kernel_ns, copy_ns;  // a deque: growing never moves what is there
};

struct collector_state {
  std::mutex mutex;  // the backends' start, poll and stop; the ledgers' list
  collector_options options;
  bool started = false;
  bool stop_at_exit_registered = false;
  // Taken by emit from any thread (wrappers, poll, CUPTI's own), never while taking `mutex`.
  std::mutex activity_mutex;
  activity_batch completed;
  std::vector<device_info> devices;
  std::vector<std::unique_ptr<device_ledger>> ledgers;
};
collector_state& state() {
  static auto* kept = new collector_state;  // never destroyed: backends emit until the process ends
  return *kept;
}

std::atomic<std::uint64_t> correlations{0};
std::atomic<int> device_time_users{0};  // 1 once any thread asked for its ledger

thread_local thread_tally tally{};
thread_local device_ledger* ledger = nullptr;

std::array<detail::backend*, 2> backends() { return {&detail::hip_backend(), &detail::cuda_backend()}; }

device_ledger* this_thread_ledger() {
  if (device_time_users.load(std::memory_order_relaxed) == 0) return nullptr;
  if (ledger == nullptr) {
    auto made = std::make_unique<device_ledger>();
    ledger = made.get();
    std::lock_guard lock{state().mutex};
    state().ledgers.push_back(std::move(made));
  }
  return ledger;
}

// Sums [first, last) of the calling thread's ledger `which`, waiting (polling the backends) for
// pending entries until `timeout_ns`.
std::int64_t sum_device_ns(device_ledger_handle handle, std::deque<std::int64_t> device_ledger::*which,
                           std::uint64_t first, std::uint64_t last, std::int64_t timeout_ns) {
  if (first >= last) return 0;
  auto* ledger = const_cast<device_ledger*>(static_cast<const device_ledger*>(handle));
  if (ledger == nullptr) return -1;
  const std::int64_t deadline = detail::host_now_ns() + timeout_ns;
  for (;;) {
    std::int64_t total = 0;
    bool pending = false;
    {
      std::lock_guard lock{ledger->mutex};
      const auto& entries = ledger->*which;
      if (last > entries.size()) return -1;  // issued before device times were retained
      for (std::uint64_t ordinal = first; ordinal < last; ++ordinal) {
        if (entries[ordinal] < 0) {
          pending = true;
          break;
        }
        total += entries[ordinal];
      }
    }
    if (!pending) return total;
    if (detail::host_now_ns() >= deadline) return -1;
    poll();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// GPU runtimes tear themselves down at exit (CUPTI's and HIP's static destructors, CUDA's atexit
// handlers): a backend must be stopped before. An atexit handler registered once a backend has
// started runs before everything the runtime registered when it was loaded or initialised, which
// was earlier (seen on an H100: cuptiActivityDisable crashed in a finalize that ran after CUPTI's
// destructors). What it drains stays in the collector for the host's last take.
constexpr std::int64_t exit_drain_timeout_ns = 2'000'000'000;
void stop_before_runtimes_exit() { stop(exit_drain_timeout_ns); }

}  // namespace

std::vector<backend_status> start(const collector_options& options) {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  if (!s.started) s.options = options;
  s.started = true;
  std::vector<backend_status> statuses;
  bool started_one = false;
  for (auto* backend : backends()) {
    backend_status status{backend->api(), backend->observing(), {}};
    if (!status.observing) {
      status.failure = backend->start();
      started_one |= status.observing = !status.failure;
    }
    statuses.push_back(std::move(status));
  }
  if (started_one && !s.stop_at_exit_registered)
    s.stop_at_exit_registered = std::atexit(&stop_before_runtimes_exit) == 0;
  return statuses;
}

bool observing() {
  for (auto* backend : backends())
    if (backend->observing()) return true;
  return false;
}

void poll() {
  std::lock_guard lock{state().mutex};
  for (auto* backend : backends())
    if (backend->observing()) backend->poll();
}

activity_batch take_completed() {
  activity_batch batch;
  take_completed(batch);
  return batch;
}

void take_completed(activity_batch& batch) {
  batch.devices.clear();
  batch.kernels.clear();
  batch.copies.clear();
  batch.calls.clear();
  std::lock_guard lock{state().activity_mutex};
  std::swap(batch, state().completed);
}

void stop(std::int64_t timeout_ns) {
  std::lock_guard lock{state().mutex};
  state().started = false;  // a later start() takes its options anew
  for (auto* backend : backends()) {
    if (!backend->observing()) continue;
    backend->drain(timeout_ns);
    backend->stop();
  }
}

std::uint64_t records_dropped() { return detail::cuda_dropped_records(); }

void forget_after_fork() noexcept {
  for (auto* backend : backends()) backend->forget_after_fork();
}

thread_tally current_thread_tally() noexcept { return tally; }

device_ledger_handle this_thread_device_ledger() {
  device_time_users.store(1, std::memory_order_relaxed);
  return this_thread_ledger();
}
std::int64_t kernel_device_ns(device_ledger_handle ledger, std::uint64_t first, std::uint64_t last,
                              std::int64_t timeout_ns) {
  return sum_device_ns(ledger, &device_ledger::kernel_ns, first, last, timeout_ns);
}
std::int64_t copy_device_ns(device_ledger_handle ledger, std::uint64_t first, std::uint64_t last,
                            std::int64_t timeout_ns) {
  return sum_device_ns(ledger, &device_ledger::copy_ns, first, last, timeout_ns);
}

std::vector<device_info> devices() {
  std::lock_guard lock{state().activity_mutex};
  return state().devices;
}

namespace detail {

const collector_options& options() { return state().options; }

std::int64_t host_now_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1'000'000'000ll + now.tv_nsec;
}

std::int64_t current_tid() noexcept {
  // A fork child's first thread has a new tid; GPU work of fork children is not observed.
  thread_local const auto tid = static_cast<std::int64_t>(::syscall(SYS_gettid));
  return tid;
}

call_site capture_call_site(std::int64_t call_ns) {
  call_site site{current_tid(), call_ns, {}};
  if (const auto capture = state().options.capture_stack) {
    std::uint64_t frames[64];
    site.stack.assign(frames, frames + capture(frames, std::size(frames)));
  }
  return site;
}

std::uint64_t next_correlation() noexcept { return correlations.fetch_add(1, std::memory_order_relaxed) + 1; }

void tally_api(std::int64_t ns) noexcept { tally.api_ns += ns; }

ledger_entry tally_kernel() {
  ledger_entry entry{nullptr, tally.kernels_launched++};
  if (auto* kept = this_thread_ledger()) {
    std::lock_guard lock{kept->mutex};
    kept->kernel_ns.resize(entry.ordinal + 1, -1);
    entry.ledger = kept;
  }
  return entry;
}

ledger_entry tally_copy(copy_kind kind, std::uint64_t bytes) {
  tally.copy_bytes[static_cast<std::size_t>(kind)] += bytes;
  ledger_entry entry{nullptr, tally.copies_issued++, true};
  if (auto* kept = this_thread_ledger()) {
    std::lock_guard lock{kept->mutex};
    kept->copy_ns.resize(entry.ordinal + 1, -1);
    entry.ledger = kept;
  }
  return entry;
}

void resolve(const ledger_entry& entry, std::int64_t device_ns) {
  if (entry.ledger == nullptr) return;
  auto& kept = *static_cast<device_ledger*>(entry.ledger);
  std::lock_guard lock{kept.mutex};
  auto& entries = entry.copy ? kept.copy_ns : kept.kernel_ns;
  if (entry.ordinal < entries.size()) entries[entry.ordinal] = device_ns < 0 ? 0 : device_ns;
}

void emit(device_info device) {
  auto& s = state();
  std::lock_guard lock{s.activity_mutex};
  for (const auto& known : s.devices)
    if (known.api == device.api && known.index == device.index) return;
  s.devices.push_back(device);
  if (s.options.keep_activity) s.completed.devices.push_back(std::move(device));
}
void emit(kernel_activity kernel) {
  auto& s = state();
  if (!s.options.keep_activity) return;
  std::lock_guard lock{s.activity_mutex};
  s.completed.kernels.push_back(std::move(kernel));
}
void emit(copy_activity copy) {
  auto& s = state();
  if (!s.options.keep_activity) return;
  std::lock_guard lock{s.activity_mutex};
  s.completed.copies.push_back(std::move(copy));
}
void emit(const api_call& call) {
  auto& s = state();
  if (!s.options.keep_activity) return;
  std::lock_guard lock{s.activity_mutex};
  s.completed.calls.push_back(call);
}

}  // namespace detail
}  // namespace kairos::gpu
