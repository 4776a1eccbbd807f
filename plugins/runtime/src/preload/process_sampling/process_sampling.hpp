#pragma once
// Producer: process sampling (docs/runtime.md, "Process sampling"). A thread of kairos's own reads
// the process's metrics (kairos/runtime/process_metrics.hpp) every period: memory, CPU use in
// total and per thread, context switches, page faults, I/O bytes, its cores' frequencies, and the
// GPUs' power, temperature, utilization and memory where NVML or ROCm SMI is present. The rows
// wait in a bounded buffer until the pipeline takes them.
#include <cstdint>
#include <string>
#include <vector>

#include <kairos/runtime/process_metrics.hpp>

#include "preload/process_sampling/process_sample_batch.hpp"

namespace kairos::runtime {

struct process_sampling_options {
  std::int64_t period_ns = 50'000'000;
  std::vector<process_metric> metrics;
  bool metrics_named = false;  // named one by one, not "all": one that is absent here is said
  std::string cpu_root;        // KAIROS_PROCESS_SAMPLING_CPU_ROOT
};

// At init: opens what the metrics need and starts the thread. The lines say what is absent (a
// metric named and not offered here) or what failed; the notes, for KAIROS_VERBOSE, what runs.
struct process_sampling_start {
  std::vector<std::string> problems;
  std::vector<std::string> notes;
};
process_sampling_start start_process_sampling(process_sampling_options options);
// Ends the thread (bounded wait); the rows it read stay to be taken.
void stop_process_sampling() noexcept;
// The rows read since the last take, into `batch` (cleared first).
void take_process_samples(process_sample_batch& batch);

struct process_sampling_totals {
  bool running = false;
  std::int64_t period_ns = 0;
  std::uint64_t periods = 0;       // samples taken
  std::uint64_t rows_dropped = 0;  // rows the bounded buffer could not hold
  std::string metrics;             // the metrics sampled, comma-separated
};
process_sampling_totals process_sampling_totals_now();

// fork child (async-signal-safe): the parent's thread does not exist there; a child is not sampled.
void process_sampling_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
