#pragma once
// What a backend (hip_backend.cpp, cuda_backend.cpp) gives the collector (collector.cpp) and what
// it may call on it. Internal to the plugin.
#include <link.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <kairos/plugins/gpu/activity.hpp>
#include <kairos/plugins/gpu/collector.hpp>
#include <kairos/problem.hpp>

namespace kairos::gpu::detail {

struct backend {
  virtual ~backend() = default;
  virtual runtime_api api() const = 0;
  // Tries to start observing (the runtime may have been loaded since the last try); the problem
  // says why it cannot (empty: observing). Called under the collector's lock.
  virtual problem start() = 0;
  virtual bool observing() const = 0;
  virtual void poll() = 0;                          // resolve completed work, non-blocking
  virtual void drain(std::int64_t timeout_ns) = 0;  // resolve everything launched, bounded
  virtual void stop() = 0;
  virtual void forget_after_fork() noexcept = 0;
};

// A backend in a build without its runtime's headers: never observing, and saying why.
class unavailable_backend : public backend {
 public:
  unavailable_backend(runtime_api api, const char* reason) : api_{api}, reason_{reason} {}
  runtime_api api() const override { return api_; }
  problem start() override { return problem{reason_}; }
  bool observing() const override { return false; }
  void poll() override {}
  void drain(std::int64_t) override {}
  void stop() override {}
  void forget_after_fork() noexcept override {}

 private:
  runtime_api api_;
  const char* reason_;
};

// The path of a loaded object whose file name is `soname` or `soname` + ".N..." (any version),
// or "" when none is. Asks the loader's list, never the file system: dlopen(RTLD_NOLOAD) with a
// bare name searched about 60 paths at every profiled process's start, for runtimes the program
// did not load.
inline std::string loaded_object(std::string_view soname) {
  struct search {
    std::string_view soname;
    std::string path;
  } wanted{soname, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& wanted = *static_cast<search*>(data);
        if (info->dlpi_name == nullptr) return 0;
        const char* slash = std::strrchr(info->dlpi_name, '/');
        const std::string_view name{slash ? slash + 1 : info->dlpi_name};
        if (!name.starts_with(wanted.soname)) return 0;
        if (name.size() > wanted.soname.size() && name[wanted.soname.size()] != '.') return 0;
        wanted.path = info->dlpi_name;
        return 1;
      },
      &wanted);
  return wanted.path;
}

backend& hip_backend();
backend& cuda_backend();  // reports itself unavailable where the build had no CUDA toolkit
// Activity records CUPTI dropped (it could not get a buffer in time); 0 when CUDA was not observed.
std::uint64_t cuda_dropped_records();

// The collector's side, for backends. Thread-safe.
const collector_options& options();
std::int64_t host_now_ns() noexcept;  // CLOCK_MONOTONIC
std::int64_t current_tid() noexcept;  // gettid, kept per thread (no system call per API call)
call_site capture_call_site(std::int64_t call_ns);
std::uint64_t next_correlation() noexcept;

// Tallies of the calling thread.
void tally_api(std::int64_t ns) noexcept;
// Ordinals of the calling thread's kernel/copy (what the device-time ledger is indexed by).
struct ledger_entry {
  void* ledger = nullptr;  // the issuing thread's; nullptr when device times are not retained
  std::uint64_t ordinal = 0;
  bool copy = false;  // a copy's ordinal (tally_copy), else a kernel's
};
ledger_entry tally_kernel();
ledger_entry tally_copy(copy_kind kind, std::uint64_t bytes);
void resolve(const ledger_entry& entry, std::int64_t device_ns);

// Completed activity (ignored when options().keep_activity is false). Any thread, any lock.
void emit(device_info device);
void emit(kernel_activity kernel);
void emit(copy_activity copy);
void emit(const api_call& call);

}  // namespace kairos::gpu::detail
