#include "preload/process_sampling/process_sampling.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"

namespace kairos::runtime {
namespace {

// Rows waiting for the pipeline: it takes them every service tick (100 ms), and keeps them here
// until the database exists, which 65,536 rows outlast at the default period by minutes.
constexpr std::size_t pending_rows_limit = 1 << 16;

// A small /proc or /sys file held open and read again from its start each period: one pread
// instead of open, read and close (the kernel renders the text anew at offset 0). The program
// may close the descriptor under kairos (a daemon closing everything): it is opened again then.
struct held_file {
  std::string path;
  owned_descriptor descriptor;

  bool open() {
    descriptor = owned_descriptor{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    return static_cast<bool>(descriptor);
  }
  // The text, or the errno of the failure (0: it read as empty).
  std::string_view read(char* buffer, std::size_t capacity, int& error) {
    error = 0;
    if (!descriptor.still_ours() && !open()) {
      error = errno;
      return {};
    }
    ssize_t count = 0;
    do count = ::pread(descriptor.get(), buffer, capacity, 0);
    while (count < 0 && errno == EINTR);
    if (count < 0) error = errno;
    return count > 0 ? std::string_view{buffer, static_cast<std::size_t>(count)} : std::string_view{};
  }
  void close() { descriptor.close_if_ours(); }
};

std::string failure_text(int error) { return error == 0 ? "it was empty" : std::strerror(error); }

struct core_frequency {
  int core = 0;
  held_file file;
};

struct previous_totals {
  std::int64_t time_ns = 0, cpu_ns = 0, switches = 0, faults = 0, read_bytes = 0, written_bytes = 0;
  bool io = false;
};

struct sampler_state {
  process_sampling_options options;
  std::array<bool, process_metric_count> wanted{};
  held_file statm{"/proc/self/statm", {}};
  held_file io{"/proc/self/io", {}};
  std::vector<core_frequency> cores;
  std::unique_ptr<gpu_metrics_library> gpu;
  std::int64_t page_bytes = 4096;
  previous_totals previous;
  std::unordered_map<thread_record*, std::int64_t> previous_thread_cpu_ns;
  std::vector<std::pair<thread_record*, pid_t>> threads_now;  // reused each period
  process_sample_batch read_now;                              // likewise

  std::mutex mutex;  // the rows below, taken by the pipeline
  process_sample_batch pending;
  std::uint64_t rows_dropped = 0;
  std::atomic<std::uint64_t> periods{0};

  std::mutex wake_mutex;
  std::condition_variable wake;
  std::atomic<bool> stopping{false}, done{false};
};
std::atomic<sampler_state*> sampler{nullptr};  // never destroyed: the thread may outlive exit's destructors

bool wants(const sampler_state& state, process_metric metric) { return state.wanted[static_cast<std::size_t>(metric)]; }

void unwant(sampler_state& state, std::initializer_list<process_metric> metrics) {
  for (const auto metric : metrics) state.wanted[static_cast<std::size_t>(metric)] = false;
}

std::string names_of(std::initializer_list<process_metric> metrics) {
  std::string text;
  for (const auto metric : metrics)
    text += fmt::format("{}{}", text.empty() ? "" : " and ", definition_of(metric).name);
  return text;
}

// The thread's CPU clock, read from another thread of the process: the kernel's clock id of a
// thread (CPUCLOCK_SCHED of a per-thread clock, include/linux/posix-timers.h), nullopt once it
// has ended.
std::optional<std::int64_t> thread_cpu_ns(pid_t tid) {
  const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return std::nullopt;
  return to_ns(now);
}

std::int64_t process_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return to_ns(now);
}

double per_second(std::int64_t delta, std::int64_t elapsed_ns) {
  return static_cast<double>(delta) * 1e9 / static_cast<double>(elapsed_ns);
}

// One period's reading, shared by the readers of each family of metrics below. Rates cover the
// time since the previous period (the first period's, the time since the thread started); a file
// that cannot be read any more is said once and its metrics end there, the rest go on.
struct period_reading {
  sampler_state& state;
  std::int64_t now_ns = 0;
  std::int64_t elapsed_ns = 1;
  char buffer[1024] = {};
  int error = 0;

  void add(process_metric metric, double value, std::int32_t instance = -1, thread_record* thread = nullptr) {
    state.read_now.push_back({now_ns, metric, thread, instance, value});
  }
  bool wants_any(std::initializer_list<process_metric> metrics) const {
    return std::ranges::any_of(metrics, [&](process_metric metric) { return wants(state, metric); });
  }
  // `file` failed: its metrics are said lost and not read again.
  void lose(held_file& file, std::initializer_list<process_metric> metrics) {
    report(fmt::format("process sampling: reading {} failed ({}); {} are not sampled from here on", file.path,
                       failure_text(error), names_of(metrics)));
    unwant(state, metrics);
    file.close();
  }
};

void read_memory(period_reading& reading) {
  const auto metrics = {process_metric::memory_resident_bytes, process_metric::memory_virtual_bytes};
  if (!reading.wants_any(metrics)) return;
  auto& state = reading.state;
  const auto values =
      parse_statm(state.statm.read(reading.buffer, sizeof reading.buffer, reading.error), state.page_bytes);
  if (!values) return reading.lose(state.statm, metrics);
  if (wants(state, process_metric::memory_resident_bytes))
    reading.add(process_metric::memory_resident_bytes, static_cast<double>(values->resident_bytes));
  if (wants(state, process_metric::memory_virtual_bytes))
    reading.add(process_metric::memory_virtual_bytes, static_cast<double>(values->virtual_bytes));
}

void read_process_cpu(period_reading& reading) {
  auto& state = reading.state;
  if (!wants(state, process_metric::cpu_percent)) return;
  const auto cpu_ns = process_cpu_ns();
  reading.add(process_metric::cpu_percent,
              100.0 * static_cast<double>(cpu_ns - state.previous.cpu_ns) / static_cast<double>(reading.elapsed_ns));
  state.previous.cpu_ns = cpu_ns;
}

void read_usage(period_reading& reading) {
  auto& state = reading.state;
  if (!reading.wants_any({process_metric::context_switches_per_s, process_metric::page_faults_per_s})) return;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const std::int64_t switches = usage.ru_nvcsw + usage.ru_nivcsw, faults = usage.ru_minflt + usage.ru_majflt;
  if (wants(state, process_metric::context_switches_per_s))
    reading.add(process_metric::context_switches_per_s,
                per_second(switches - state.previous.switches, reading.elapsed_ns));
  if (wants(state, process_metric::page_faults_per_s))
    reading.add(process_metric::page_faults_per_s, per_second(faults - state.previous.faults, reading.elapsed_ns));
  state.previous.switches = switches;
  state.previous.faults = faults;
}

void read_io(period_reading& reading) {
  const auto metrics = {process_metric::read_bytes_per_s, process_metric::written_bytes_per_s};
  if (!reading.wants_any(metrics)) return;
  auto& state = reading.state;
  const auto values = parse_proc_io(state.io.read(reading.buffer, sizeof reading.buffer, reading.error));
  if (!values) return reading.lose(state.io, metrics);
  if (state.previous.io) {
    if (wants(state, process_metric::read_bytes_per_s))
      reading.add(process_metric::read_bytes_per_s,
                  per_second(values->read_bytes - state.previous.read_bytes, reading.elapsed_ns));
    if (wants(state, process_metric::written_bytes_per_s))
      reading.add(process_metric::written_bytes_per_s,
                  per_second(values->written_bytes - state.previous.written_bytes, reading.elapsed_ns));
  }
  state.previous.io = true;
  state.previous.read_bytes = values->read_bytes;
  state.previous.written_bytes = values->written_bytes;
}

void read_threads_cpu(period_reading& reading) {
  auto& state = reading.state;
  if (!wants(state, process_metric::thread_cpu_percent)) return;
  // The program's threads still running (kairos's own are not the program's).
  state.threads_now.clear();
  threads().for_each([&](thread_record& thread) {
    if (!thread.kairos_owned && thread.running.load(std::memory_order_acquire))
      state.threads_now.emplace_back(&thread, thread.tid);
  });
  for (const auto& [thread, tid] : state.threads_now) {
    const auto cpu_ns = thread_cpu_ns(tid);
    if (!cpu_ns) {
      state.previous_thread_cpu_ns.erase(thread);
      continue;
    }
    const auto [previous, first] = state.previous_thread_cpu_ns.try_emplace(thread, *cpu_ns);
    // A thread first seen: one that started in this period counts from its start; one that
    // started before (it was registered late) only gives its total for the next period.
    if (first && thread->start_ns < state.previous.time_ns) continue;
    const auto from_cpu_ns = first ? 0 : previous->second;
    const auto since_ns = first ? thread->start_ns : state.previous.time_ns;
    reading.add(process_metric::thread_cpu_percent,
                100.0 * static_cast<double>(*cpu_ns - from_cpu_ns) /
                    static_cast<double>(std::max<std::int64_t>(1, reading.now_ns - since_ns)),
                -1, thread);
    previous->second = *cpu_ns;
  }
  std::erase_if(state.previous_thread_cpu_ns, [](const auto& entry) { return !entry.first->running.load(); });
}

void read_core_frequencies(period_reading& reading) {
  auto& state = reading.state;
  if (!wants(state, process_metric::cpu_frequency_mhz)) return;
  std::erase_if(state.cores, [&](core_frequency& core) {
    if (const auto mhz = parse_frequency_khz(core.file.read(reading.buffer, sizeof reading.buffer, reading.error))) {
      reading.add(process_metric::cpu_frequency_mhz, *mhz, core.core);
      return false;
    }
    report(fmt::format(
        "process sampling: reading {} failed ({}); cpu_frequency_mhz of core {} is not sampled from here on",
        core.file.path, failure_text(reading.error), core.core));
    core.file.close();
    return true;
  });
}

void read_gpus(period_reading& reading) {
  auto& state = reading.state;
  if (!state.gpu) return;
  for (int device = 0; device < state.gpu->device_count(); ++device) {
    const auto values = state.gpu->read(device);
    auto add_gpu = [&](process_metric metric, const std::optional<double>& value) {
      if (value && wants(state, metric)) reading.add(metric, *value, device);
    };
    add_gpu(process_metric::gpu_power_watts, values.power_watts);
    add_gpu(process_metric::gpu_temperature_celsius, values.temperature_celsius);
    add_gpu(process_metric::gpu_utilization_percent, values.utilization_percent);
    add_gpu(process_metric::gpu_memory_used_bytes, values.memory_used_bytes);
  }
}

// One period: every family's reading, then the rows handed to the pipeline's queue.
void sample_once(sampler_state& state) {
  own_cost_timer cost{own_cost::process_sampling};
  state.read_now.clear();
  period_reading reading{state};
  reading.now_ns = steady_now_ns();
  reading.elapsed_ns = std::max<std::int64_t>(1, reading.now_ns - state.previous.time_ns);
  for (auto* read :
       {read_memory, read_process_cpu, read_usage, read_io, read_threads_cpu, read_core_frequencies, read_gpus})
    read(reading);
  state.previous.time_ns = reading.now_ns;
  state.periods.fetch_add(1, std::memory_order_relaxed);
  const auto& rows = state.read_now;
  std::lock_guard lock{state.mutex};
  const auto room = pending_rows_limit - std::min(pending_rows_limit, state.pending.size());
  const auto kept = std::min(room, rows.size());
  state.pending.insert(state.pending.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(kept));
  state.rows_dropped += rows.size() - kept;
}

// The totals the rates start from.
void take_baseline(sampler_state& state) {
  state.previous.time_ns = steady_now_ns();
  state.previous.cpu_ns = process_cpu_ns();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.previous.switches = usage.ru_nvcsw + usage.ru_nivcsw;
  state.previous.faults = usage.ru_minflt + usage.ru_majflt;
  char buffer[1024];
  int error = 0;
  if (state.io.descriptor) {
    if (const auto values = parse_proc_io(state.io.read(buffer, sizeof buffer, error))) {
      state.previous.io = true;
      state.previous.read_bytes = values->read_bytes;
      state.previous.written_bytes = values->written_bytes;
    }
  }
  threads().for_each([&](thread_record& thread) {
    if (thread.kairos_owned || !thread.running.load(std::memory_order_acquire)) return;
    if (const auto cpu_ns = thread_cpu_ns(thread.tid)) state.previous_thread_cpu_ns.emplace(&thread, *cpu_ns);
  });
}

void* sampler_main(void* argument) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-process");
  auto& state = *static_cast<sampler_state*>(argument);
  const auto period = std::chrono::nanoseconds{state.options.period_ns};
  auto next = std::chrono::steady_clock::now() + period;
  while (true) {
    {
      std::unique_lock lock{state.wake_mutex};
      state.wake.wait_until(lock, next, [&] { return state.stopping.load(); });
    }
    if (state.stopping.load()) break;
    sample_once(state);
    next += period;
    // Late (a machine too busy to run this thread): the next period starts now, none is caught up.
    if (const auto now = std::chrono::steady_clock::now(); next < now) next = now + period;
  }
  state.done.store(true, std::memory_order_release);
  return nullptr;
}

}  // namespace

process_sampling_start start_process_sampling(process_sampling_options options) {
  process_sampling_start started;
  auto state = std::make_unique<sampler_state>();
  state->options = std::move(options);
  for (const auto metric : state->options.metrics) state->wanted[static_cast<std::size_t>(metric)] = true;
  state->page_bytes = sysconf(_SC_PAGESIZE);
  auto absent = [&](std::initializer_list<process_metric> metrics, const std::string& why) {
    for (const auto metric : metrics) {
      if (!wants(*state, metric)) continue;
      auto line = fmt::format("process sampling: {} is not available here ({})", definition_of(metric).name, why);
      (state->options.metrics_named ? started.problems : started.notes).push_back(std::move(line));
      unwant(*state, {metric});
    }
  };
  if ((wants(*state, process_metric::memory_resident_bytes) || wants(*state, process_metric::memory_virtual_bytes)) &&
      !state->statm.open())
    absent({process_metric::memory_resident_bytes, process_metric::memory_virtual_bytes},
           fmt::format("{}: {}", state->statm.path, std::strerror(errno)));
  if ((wants(*state, process_metric::read_bytes_per_s) || wants(*state, process_metric::written_bytes_per_s)) &&
      !state->io.open())
    absent({process_metric::read_bytes_per_s, process_metric::written_bytes_per_s},
           fmt::format("{}: {}", state->io.path, std::strerror(errno)));
  if (wants(*state, process_metric::cpu_frequency_mhz)) {
    std::string first_failure;
    for (const int core : cores_of_this_process()) {
      core_frequency entry{core, {cpu_frequency_path(state->options.cpu_root, core), {}}};
      if (entry.file.open())
        state->cores.push_back(std::move(entry));
      else if (first_failure.empty())
        first_failure = fmt::format("{}: {}", entry.file.path, std::strerror(errno));
    }
    if (state->cores.empty())
      absent({process_metric::cpu_frequency_mhz},
             first_failure.empty() ? "no core in the affinity mask" : first_failure);
  }
  const auto gpu_metrics = {process_metric::gpu_power_watts, process_metric::gpu_temperature_celsius,
                            process_metric::gpu_utilization_percent, process_metric::gpu_memory_used_bytes};
  bool gpu_wanted = false;
  for (const auto metric : gpu_metrics) gpu_wanted = gpu_wanted || wants(*state, metric);
  if (gpu_wanted) {
    reentry_guard guard;  // the library's own threads and calls are not the program's
    auto library = gpu_metrics_library::open();
    if (library.has_value()) {
      state->gpu = std::move(library).value();
      started.notes.push_back(fmt::format("process sampling: GPU metrics of {} GPU{} from {}",
                                          state->gpu->device_count(), state->gpu->device_count() == 1 ? "" : "s",
                                          state->gpu->name()));
    } else {
      absent(gpu_metrics, library.failure().text());
    }
  }
  bool any = false;
  for (const bool wanted : state->wanted) any = any || wanted;
  if (!any) {
    started.notes.push_back("process sampling: no metric to read here; it is off");
    return started;
  }
  take_baseline(*state);
  auto* raw = state.release();
  if (const int error = start_internal_thread(&sampler_main, raw, 256 * 1024); error != 0) {
    started.problems.push_back(fmt::format(
        "could not start kairos's process-sampling thread ({}); the process is not sampled", std::strerror(error)));
    delete raw;
    return started;
  }
  sampler.store(raw, std::memory_order_release);
  started.notes.push_back(fmt::format("process sampling: every {:.0f} ms", raw->options.period_ns / 1e6));
  return started;
}

void stop_process_sampling() noexcept {
  auto* state = sampler.load(std::memory_order_acquire);
  if (!state || state->stopping.exchange(true)) return;
  { std::lock_guard lock{state->wake_mutex}; }
  state->wake.notify_all();
  wait_until([&] { return state->done.load(std::memory_order_acquire); }, std::chrono::seconds{2});
}

void take_process_samples(process_sample_batch& batch) {
  batch.clear();
  auto* state = sampler.load(std::memory_order_acquire);
  if (!state) return;
  std::lock_guard lock{state->mutex};
  batch.swap(state->pending);
}

process_sampling_totals process_sampling_totals_now() {
  process_sampling_totals totals;
  auto* state = sampler.load(std::memory_order_acquire);
  if (!state) return totals;
  totals.running = true;
  totals.period_ns = state->options.period_ns;
  totals.periods = state->periods.load(std::memory_order_relaxed);
  {
    std::lock_guard lock{state->mutex};
    totals.rows_dropped = state->rows_dropped;
  }
  for (std::size_t i = 0; i < process_metric_count; ++i)
    if (state->wanted[i])
      totals.metrics += fmt::format("{}{}", totals.metrics.empty() ? "" : ",", process_metric_table[i].name);
  return totals;
}

void process_sampling_forget_after_fork_in_child() noexcept { sampler.store(nullptr, std::memory_order_release); }

}  // namespace kairos::runtime
