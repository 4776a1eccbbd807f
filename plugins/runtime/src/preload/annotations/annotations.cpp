#include "preload/annotations/annotations.hpp"

#include <atomic>

namespace kairos::runtime {
namespace {

std::atomic<bool> nvtx_on{false}, kokkos_on{false}, roctx_on{false};
std::atomic<bool> nvtx_seen{false}, kokkos_seen{false}, roctx_seen{false};

}  // namespace

void start_annotations(annotation_sources sources) noexcept {
  nvtx_on.store(sources.nvtx, std::memory_order_release);
  kokkos_on.store(sources.kokkos, std::memory_order_release);
  roctx_on.store(sources.roctx, std::memory_order_release);
}

void stop_annotations() noexcept {
  nvtx_on.store(false, std::memory_order_release);
  kokkos_on.store(false, std::memory_order_release);
  roctx_on.store(false, std::memory_order_release);
}

bool nvtx_recording() noexcept { return nvtx_on.load(std::memory_order_relaxed); }
bool kokkos_recording() noexcept { return kokkos_on.load(std::memory_order_relaxed); }
bool roctx_recording() noexcept { return roctx_on.load(std::memory_order_relaxed); }
void set_nvtx_attached() noexcept { nvtx_seen.store(true, std::memory_order_release); }
void set_kokkos_attached() noexcept { kokkos_seen.store(true, std::memory_order_release); }
void set_roctx_attached() noexcept { roctx_seen.store(true, std::memory_order_release); }
bool nvtx_attached() noexcept { return nvtx_seen.load(std::memory_order_acquire); }
bool kokkos_attached() noexcept { return kokkos_seen.load(std::memory_order_acquire); }
bool roctx_attached() noexcept { return roctx_seen.load(std::memory_order_acquire); }

}  // namespace kairos::runtime
