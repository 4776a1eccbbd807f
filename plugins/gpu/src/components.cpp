// What the components share: the collector started once, and why nothing can be observed.
#include <kairos/plugins/gpu.hpp>

#include <mutex>

namespace kairos::gpu {

const std::vector<backend_status>& ensure_started() {
  static const std::vector<backend_status> statuses = [] {
    collector_options options;
    options.keep_activity = false;  // components read tallies; nobody takes activity batches
    return start(options);
  }();
  return statuses;
}

std::string unavailable_reason() {
  std::string reasons;
  for (const auto& status : ensure_started()) {
    if (status.observing) return {};
    if (!reasons.empty()) reasons += "; ";
    reasons += std::string{name_of(status.api)} + ": " + status.failure.text();
  }
  return reasons;
}

}  // namespace kairos::gpu
