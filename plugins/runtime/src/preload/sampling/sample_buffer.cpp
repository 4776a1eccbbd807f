#include "preload/sampling/sample_buffer.hpp"

#include <sys/mman.h>

#include <mutex>
#include <new>
#include <vector>

namespace kairos::runtime {
namespace {

// Buffers of ended threads, kept for the next threads: a program that churns short threads would
// otherwise map and unmap two buffers per thread, and every munmap of touched pages costs a TLB
// shootdown on every core. Bounded: past it, buffers are unmapped.
constexpr std::size_t spare_buffers_kept = 64;

struct spare_buffers {
  std::mutex mutex;
  std::vector<sample_buffer*> buffers;
};
spare_buffers& spares() {
  static auto* kept = new spare_buffers;  // never destroyed: used until the process ends
  return *kept;
}

}  // namespace

sample_buffer* map_sample_buffer(thread_sampler* owner) noexcept {
  {
    std::lock_guard lock{spares().mutex};
    if (!spares().buffers.empty()) {
      auto* buffer = spares().buffers.back();
      spares().buffers.pop_back();
      buffer->owner = owner;
      return buffer;
    }
  }
  void* memory = mmap(nullptr, sizeof(sample_buffer), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  auto* buffer = new (memory) sample_buffer;  // only the header is written: pages stay untouched
  buffer->owner = owner;
  return buffer;
}

void unmap_sample_buffer(sample_buffer* buffer) noexcept {
  if (!buffer) return;
  buffer->committed.store(0, std::memory_order_relaxed);
  buffer->consumed = 0;
  buffer->state.store(sample_buffer::free_state, std::memory_order_relaxed);
  buffer->next_full = nullptr;
  buffer->owner = nullptr;
  try {
    std::lock_guard lock{spares().mutex};
    if (spares().buffers.size() < spare_buffers_kept) {
      spares().buffers.push_back(buffer);
      return;
    }
  } catch (...) {  // no memory for the list: the buffer is unmapped instead
  }
  munmap(buffer, sizeof(sample_buffer));
}

}  // namespace kairos::runtime
