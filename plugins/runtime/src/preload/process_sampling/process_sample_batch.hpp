#pragma once
// Process sampling's batch: what one or more periods read, a row a value, handed over to the
// pipeline (pipeline/delivery.cpp turns them into the database's process_metric rows).
#include <cstdint>
#include <vector>

#include <kairos/runtime/process_metrics.hpp>

namespace kairos::runtime {

struct thread_record;

struct process_sample_row {
  std::int64_t time_ns = 0;  // steady clock, when the period ended
  process_metric metric{};
  thread_record* thread = nullptr;  // thread_cpu_percent: whose; else none
  std::int32_t instance = -1;       // cpu_frequency_mhz: the core; gpu_*: the GPU; else -1
  double value = 0;
};

using process_sample_batch = std::vector<process_sample_row>;

}  // namespace kairos::runtime
