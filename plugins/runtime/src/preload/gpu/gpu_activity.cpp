#include "preload/gpu/gpu_activity.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/capture.hpp>
#include <kairos/plugins/gpu/collector.hpp>

#include "preload/support/clock.hpp"
#include "preload/support/own_frames.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

constexpr std::int64_t runtime_recheck_ns = 500'000'000;

std::atomic<bool> wanted{false};
std::atomic<bool> with_stacks{false};
std::atomic<bool> observed{false};
std::atomic<std::int64_t> last_check_ns{0};

// The caller of the GPU API call, leaf first, from the program's frame on (kairos's unwind tables
// on a thread the sampler registered, else libgcc's unwinder: a wrapper is ordinary code, not a
// signal handler, so the loader's tables are safe to walk).
std::size_t capture_caller(std::uint64_t* frames, std::size_t capacity) {
  std::uintptr_t captured[96];
  bool truncated = false;
  const auto result = backtrace_detail::capture_frames(captured, 0, false, truncated);
  // kairos's frames (the wrapper, the collector above the program's; its thread-start trampoline
  // below) are left out: a call site is the program's path (support/own_frames.hpp).
  const auto own = own_code();
  std::size_t count = 0;
  for (int i = 0; i < result.count && count < capacity; ++i)
    if (!own.holds(captured[i] - 1)) frames[count++] = captured[i];
  return count;
}

std::vector<std::string> describe(const std::vector<gpu::backend_status>& statuses) {
  std::vector<std::string> notes;
  for (const auto& status : statuses)
    if (status.observing) notes.push_back(fmt::format("GPU: observing the {} runtime", gpu::name_of(status.api)));
  return notes;
}

std::vector<std::string> check_runtimes() {
  reentry_guard guard;
  gpu::collector_options options;
  if (with_stacks.load(std::memory_order_relaxed)) options.capture_stack = &capture_caller;
  const auto statuses = gpu::start(options);
  last_check_ns.store(steady_now_ns(), std::memory_order_relaxed);
  const bool now = gpu::observing();
  if (now && !observed.exchange(true)) return describe(statuses);
  return {};
}

// Whether this process can reach CUDA from its start: a CUDA library is loaded (linked by the
// program or a library it needs), or the executable carries device code (a section nvcc names
// .nv_fatbin or .nvFatBinSegment: its runtime, linked statically by default, loads libcuda only at
// the first CUDA call). Three reads of /proc/self/exe's headers.
bool can_reach_cuda() {
  int found = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const std::string_view name{info->dlpi_name ? info->dlpi_name : ""};
        const auto file = name.substr(name.rfind('/') + 1);
        if (file.starts_with("libcuda.so") || file.starts_with("libcudart.so")) *static_cast<int*>(data) = 1;
        return *static_cast<int*>(data);
      },
      &found);
  if (found) return true;
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool device_code = false;
  ElfW(Ehdr) header{};
  std::vector<ElfW(Shdr)> sections;
  if (::pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_shentsize == sizeof(ElfW(Shdr)) &&
      header.e_shnum > 0 && header.e_shstrndx < header.e_shnum) {
    sections.resize(header.e_shnum);
    const auto bytes = static_cast<ssize_t>(sections.size() * sizeof(ElfW(Shdr)));
    if (::pread(fd, sections.data(), static_cast<std::size_t>(bytes), static_cast<off_t>(header.e_shoff)) == bytes) {
      const auto& names = sections[header.e_shstrndx];
      std::string text(std::min<std::size_t>(names.sh_size, 1 << 20), '\0');
      if (::pread(fd, text.data(), text.size(), static_cast<off_t>(names.sh_offset)) ==
          static_cast<ssize_t>(text.size()))
        for (const auto& section : sections)
          if (section.sh_name < text.size()) {
            const std::string_view name{text.c_str() + section.sh_name};
            device_code = device_code || name == ".nv_fatbin" || name == ".nvFatBinSegment";
          }
    }
  }
  ::close(fd);
  return device_code;
}

// CUDA loads the library CUDA_INJECTION64_PATH names when the program initialises the driver
// (cuInit), and calls its InitializeInjection before any context exists: CUPTI is set up in time
// for the first kernel. Set only where the program can reach CUDA (can_reach_cuda), never in every
// process's environment; a program that loads CUDA later with dlopen is found at kairos's next
// look. A value already there is another tool's (Nsight Systems): it is kept, and kairos finds
// CUDA at its next look instead.
constexpr const char* cuda_injection_variable = "CUDA_INJECTION64_PATH";

void ask_cuda_to_call_kairos() {
  if (std::getenv(cuda_injection_variable) != nullptr || !can_reach_cuda()) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ask_cuda_to_call_kairos), &info) && info.dli_fname)
    setenv(cuda_injection_variable, info.dli_fname, 1);
}

}  // namespace

std::vector<std::string> start_gpu(bool want, bool stacks) {
  with_stacks.store(stacks, std::memory_order_relaxed);
  wanted.store(want, std::memory_order_release);
  if (!want) return {};
  ask_cuda_to_call_kairos();
  if (stacks) {  // the unwinder and kairos's own code range serve the stacks alone: no cost without
    backtrace_detail::prewarm_process();
    own_code();
  }
  return check_runtimes();
}

void gpu_tick() {
  if (!wanted.load(std::memory_order_acquire)) return;
  if (!observed.load(std::memory_order_acquire) &&
      steady_now_ns() - last_check_ns.load(std::memory_order_relaxed) >= runtime_recheck_ns)
    check_runtimes();  // a runtime the program loaded with dlopen since the last look
  if (!observed.load(std::memory_order_acquire)) return;
  reentry_guard guard;
  gpu::poll();
}

void take_gpu_activity(gpu::activity_batch& batch) {
  if (observed.load(std::memory_order_acquire)) gpu::take_completed(batch);
}

void stop_gpu(std::int64_t timeout_ns) {
  if (!observed.load(std::memory_order_acquire)) return;
  reentry_guard guard;
  gpu::stop(timeout_ns);
}

bool gpu_observed() noexcept { return observed.load(std::memory_order_acquire); }

std::uint64_t gpu_records_dropped() { return gpu_observed() ? gpu::records_dropped() : 0; }

void gpu_forget_after_fork_in_child() noexcept {
  if (!observed.load(std::memory_order_acquire)) return;
  gpu::forget_after_fork();
}

}  // namespace kairos::runtime

// Called by CUDA's driver inside cuInit (see ask_cuda_to_call_kairos); 1 tells it all went well,
// whatever kairos could do (a failure is kairos's to report, never the program's).
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  using namespace kairos::runtime;
  if (wanted.load(std::memory_order_acquire) && !observed.load(std::memory_order_acquire))
    report(kairos::capture_problem("observing CUDA failed", [] {
      for (const auto& note : check_runtimes())
        if (verbosity() > 0) report(note);
    }));
  return 1;
}
