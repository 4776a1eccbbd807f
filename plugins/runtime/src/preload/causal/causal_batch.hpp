#pragma once
// What the causal experiments hand over: one record per experiment, and at the end the samples
// each location in scope received. The experiments own these types; lifecycle tells them where
// records go, and pipeline/delivery.cpp turns them into database rows.
#include <cstdint>
#include <string>
#include <vector>

namespace kairos::runtime {

struct causal_progress_delta {
  std::string name;
  bool latency = false;
  std::int64_t visits = 0;      // throughput: visits during the experiment; latency: arrivals
  std::int64_t departures = 0;  // latency only
  std::int64_t in_flight = 0;   // latency only: arrivals - departures in total at the end
};

struct causal_experiment_record {
  std::string scope;     // "line" or "function"
  std::string selected;  // "file:line" or the function's name
  double speedup = 0;    // 0..1
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;  // wall time less the delays inserted
  std::int64_t delay_ns = 0;
  std::int64_t selected_samples = 0;
  std::int32_t window = 0;
  std::vector<causal_progress_delta> progress;
};

struct causal_location_samples {
  std::string scope;
  std::string location;
  std::int64_t samples = 0;
};

struct causal_delivery {
  void (*experiment)(const causal_experiment_record&) = nullptr;
  void (*samples)(const std::vector<causal_location_samples>&) = nullptr;
};

}  // namespace kairos::runtime
