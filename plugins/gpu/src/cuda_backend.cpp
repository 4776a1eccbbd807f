// Placeholder until the CUPTI backend lands: reports itself unavailable.
#include "backend.hpp"

namespace kairos::gpu::detail {
namespace {
class cuda_unavailable : public backend {
 public:
  runtime_api api() const override { return runtime_api::cuda; }
  bool start(std::string& reason) override {
    reason = "kairos was built without the CUDA toolkit (CUPTI)";
    return false;
  }
  bool observing() const override { return false; }
  void poll() override {}
  void drain(std::int64_t) override {}
  void stop() override {}
  void forget_after_fork() noexcept override {}
};
}  // namespace
backend& cuda_backend() {
  static cuda_unavailable kept;
  return kept;
}
}  // namespace kairos::gpu::detail
