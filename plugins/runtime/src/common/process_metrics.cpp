#include <kairos/runtime/process_metrics.hpp>

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "proc_file.hpp"

namespace kairos::runtime {
namespace {

std::optional<std::int64_t> leading_integer(std::string_view& text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{}) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

std::string last_dl_error() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

template <class Function>
Function symbol(void* library, const char* name) {
  return reinterpret_cast<Function>(dlsym(library, name));
}

// NVML (nvml.h of the CUDA toolkit): a C API whose functions and structs are stable across driver
// versions; only the few used here are declared.
class nvml_library final : public gpu_metrics_library {
 public:
  using device_handle = void*;
  struct utilization {
    unsigned gpu, memory;
  };
  struct memory {
    unsigned long long total, free, used;
  };

  static result<std::unique_ptr<gpu_metrics_library>> open() {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return problem{"NVML: " + last_dl_error()};
    auto self = std::unique_ptr<nvml_library>{new nvml_library{library}};
    if (auto failure = self->start()) return failure;
    return std::unique_ptr<gpu_metrics_library>{std::move(self)};
  }
  ~nvml_library() override {
    if (started_ && shutdown_) shutdown_();
    dlclose(library_);
  }
  std::string_view name() const override { return "NVML"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  gpu_reading read(int device) override {
    gpu_reading reading;
    const auto handle = devices_[static_cast<std::size_t>(device)];
    unsigned value = 0;
    if (power_ && power_(handle, &value) == 0) reading.power_watts = value * 1e-3;  // mW
    if (temperature_ && temperature_(handle, 0 /* NVML_TEMPERATURE_GPU */, &value) == 0)
      reading.temperature_celsius = value;
    utilization busy{};
    if (utilization_ && utilization_(handle, &busy) == 0) reading.utilization_percent = busy.gpu;
    memory used{};
    if (memory_ && memory_(handle, &used) == 0) reading.memory_used_bytes = static_cast<double>(used.used);
    return reading;
  }

 private:
  explicit nvml_library(void* library) : library_{library} {}

  problem start() {
    const auto init = symbol<int (*)()>(library_, "nvmlInit_v2");
    const auto count = symbol<int (*)(unsigned*)>(library_, "nvmlDeviceGetCount_v2");
    const auto handle = symbol<int (*)(unsigned, device_handle*)>(library_, "nvmlDeviceGetHandleByIndex_v2");
    const auto error_text = symbol<const char* (*)(int)>(library_, "nvmlErrorString");
    shutdown_ = symbol<int (*)()>(library_, "nvmlShutdown");
    power_ = symbol<int (*)(device_handle, unsigned*)>(library_, "nvmlDeviceGetPowerUsage");
    temperature_ = symbol<int (*)(device_handle, int, unsigned*)>(library_, "nvmlDeviceGetTemperature");
    utilization_ = symbol<int (*)(device_handle, utilization*)>(library_, "nvmlDeviceGetUtilizationRates");
    memory_ = symbol<int (*)(device_handle, memory*)>(library_, "nvmlDeviceGetMemoryInfo");
    if (!init || !count || !handle) return problem{"NVML: libnvidia-ml.so.1 lacks nvmlInit_v2 or its device calls"};
    auto said = [&](const char* call, int code) {
      return problem{fmt::format("NVML: {} failed: {}", call,
                                 error_text ? error_text(code) : fmt::format("error {}", code).c_str())};
    };
    if (const int code = init(); code != 0) return said("nvmlInit_v2", code);
    started_ = true;
    unsigned devices = 0;
    if (const int code = count(&devices); code != 0) return said("nvmlDeviceGetCount_v2", code);
    for (unsigned index = 0; index < devices; ++index) {
      device_handle device = nullptr;
      if (const int code = handle(index, &device); code != 0) return said("nvmlDeviceGetHandleByIndex_v2", code);
      devices_.push_back(device);
    }
    if (devices_.empty()) return problem{"NVML: no GPU"};
    return {};
  }

  void* library_;
  bool started_ = false;
  std::vector<device_handle> devices_;
  int (*shutdown_)() = nullptr;
  int (*power_)(device_handle, unsigned*) = nullptr;
  int (*temperature_)(device_handle, int, unsigned*) = nullptr;
  int (*utilization_)(device_handle, utilization*) = nullptr;
  int (*memory_)(device_handle, memory*) = nullptr;
};

// ROCm SMI (rocm_smi/rocm_smi.h): devices by index; power in microwatts, temperature in
// millidegrees.
class rocm_smi_library final : public gpu_metrics_library {
 public:
  static result<std::unique_ptr<gpu_metrics_library>> open() {
    void* library = dlopen("librocm_smi64.so", RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen("librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return problem{"ROCm SMI: " + last_dl_error()};
    auto self = std::unique_ptr<rocm_smi_library>{new rocm_smi_library{library}};
    if (auto failure = self->start()) return failure;
    return std::unique_ptr<gpu_metrics_library>{std::move(self)};
  }
  ~rocm_smi_library() override {
    if (started_ && shutdown_) shutdown_();
    dlclose(library_);
  }
  std::string_view name() const override { return "ROCm SMI"; }
  int device_count() const override { return static_cast<int>(devices_); }
  gpu_reading read(int device) override {
    gpu_reading reading;
    const auto index = static_cast<std::uint32_t>(device);
    std::uint64_t power = 0, used = 0;
    std::int64_t temperature = 0;
    std::uint32_t busy = 0;
    if (power_ && power_(index, 0, &power) == 0) reading.power_watts = static_cast<double>(power) * 1e-6;
    // RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT
    if (temperature_ && temperature_(index, 0, 0, &temperature) == 0)
      reading.temperature_celsius = static_cast<double>(temperature) * 1e-3;
    if (busy_ && busy_(index, &busy) == 0) reading.utilization_percent = busy;
    if (memory_ && memory_(index, 0 /* RSMI_MEM_TYPE_VRAM */, &used) == 0)
      reading.memory_used_bytes = static_cast<double>(used);
    return reading;
  }

 private:
  explicit rocm_smi_library(void* library) : library_{library} {}

  problem start() {
    const auto init = symbol<int (*)(std::uint64_t)>(library_, "rsmi_init");
    const auto count = symbol<int (*)(std::uint32_t*)>(library_, "rsmi_num_monitor_devices");
    shutdown_ = symbol<int (*)()>(library_, "rsmi_shut_down");
    power_ = symbol<int (*)(std::uint32_t, std::uint32_t, std::uint64_t*)>(library_, "rsmi_dev_power_ave_get");
    temperature_ =
        symbol<int (*)(std::uint32_t, std::uint32_t, int, std::int64_t*)>(library_, "rsmi_dev_temp_metric_get");
    busy_ = symbol<int (*)(std::uint32_t, std::uint32_t*)>(library_, "rsmi_dev_busy_percent_get");
    memory_ = symbol<int (*)(std::uint32_t, int, std::uint64_t*)>(library_, "rsmi_dev_memory_usage_get");
    if (!init || !count) return problem{"ROCm SMI: librocm_smi64.so lacks rsmi_init or rsmi_num_monitor_devices"};
    if (const int code = init(0); code != 0)
      return problem{fmt::format("ROCm SMI: rsmi_init failed (status {})", code)};
    started_ = true;
    if (const int code = count(&devices_); code != 0)
      return problem{fmt::format("ROCm SMI: rsmi_num_monitor_devices failed (status {})", code)};
    if (devices_ == 0) return problem{"ROCm SMI: no GPU"};
    return {};
  }

  void* library_;
  bool started_ = false;
  std::uint32_t devices_ = 0;
  int (*shutdown_)() = nullptr;
  int (*power_)(std::uint32_t, std::uint32_t, std::uint64_t*) = nullptr;
  int (*temperature_)(std::uint32_t, std::uint32_t, int, std::int64_t*) = nullptr;
  int (*busy_)(std::uint32_t, std::uint32_t*) = nullptr;
  int (*memory_)(std::uint32_t, int, std::uint64_t*) = nullptr;
};

}  // namespace

std::optional<process_metric> find_process_metric(std::string_view name) {
  for (const auto& row : process_metric_table)
    if (row.name == name) return row.metric;
  return std::nullopt;
}

std::vector<process_metric> chosen_process_metrics(const std::vector<std::string>& names) {
  std::vector<bool> chosen(process_metric_count, false);
  for (const auto& name : names) {
    if (name == "all") chosen.assign(process_metric_count, true);
    if (const auto metric = find_process_metric(name)) chosen[static_cast<std::size_t>(*metric)] = true;
  }
  std::vector<process_metric> metrics;
  for (std::size_t i = 0; i < process_metric_count; ++i)
    if (chosen[i]) metrics.push_back(static_cast<process_metric>(i));
  return metrics;
}

std::string cpu_frequency_path(std::string_view cpu_root, int core) {
  return fmt::format("{}/cpu{}/cpufreq/scaling_cur_freq", cpu_root, core);
}

std::vector<int> cores_of_this_process() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int core = 0; core < CPU_SETSIZE; ++core)
    if (CPU_ISSET(core, &set)) cores.push_back(core);
  return cores;
}

std::optional<statm_values> parse_statm(std::string_view text, std::int64_t page_bytes) {
  const auto size = leading_integer(text);
  const auto resident = leading_integer(text);
  if (!size || !resident) return std::nullopt;
  return statm_values{*size * page_bytes, *resident * page_bytes};
}

std::optional<io_values> parse_proc_io(std::string_view text) {
  std::optional<std::int64_t> read, written;
  while (!text.empty()) {
    const auto end = text.find('\n');
    auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = line.substr(0, colon);
    line.remove_prefix(colon + 1);
    if (key == "rchar") read = leading_integer(line);
    if (key == "wchar") written = leading_integer(line);
  }
  if (!read || !written) return std::nullopt;
  return io_values{*read, *written};
}

std::optional<double> parse_frequency_khz(std::string_view text) {
  const auto khz = leading_integer(text);
  if (!khz || *khz <= 0) return std::nullopt;
  return static_cast<double>(*khz) * 1e-3;
}

result<std::unique_ptr<gpu_metrics_library>> gpu_metrics_library::open() {
  auto nvml = nvml_library::open();
  if (nvml.has_value()) return std::move(nvml).value();
  auto rocm = rocm_smi_library::open();
  if (rocm.has_value()) return std::move(rocm).value();
  return problem{nvml.failure().text() + "; " + rocm.failure().text()};
}

std::vector<process_metric_availability> probe_process_metrics(std::string_view cpu_root) {
  std::vector<process_metric_availability> rows;
  auto readable = [](const std::string& path) { return read_proc_file(path).has_value(); };
  const bool statm = readable("/proc/self/statm"), io = readable("/proc/self/io");
  const auto cores = cores_of_this_process();
  int frequency_cores = 0;
  std::string first_missing;
  for (const int core : cores) {
    const auto path = cpu_frequency_path(cpu_root, core);
    const auto text = read_proc_file(path);
    if (text && parse_frequency_khz(*text))
      ++frequency_cores;
    else if (first_missing.empty())
      first_missing = path;
  }
  auto gpu = gpu_metrics_library::open();
  for (const auto& row : process_metric_table) {
    process_metric_availability entry{row.metric};
    switch (row.scope) {
      case metric_scope::process:
        if (row.source.starts_with("/proc/self/statm")) {
          entry.available = statm;
          entry.detail = statm ? "/proc/self/statm" : "/proc/self/statm cannot be read";
        } else if (row.source.starts_with("/proc/self/io")) {
          entry.available = io;
          entry.detail = io ? "/proc/self/io" : "/proc/self/io cannot be read (no task I/O accounting in this kernel?)";
        } else {
          entry.available = true;
          entry.detail = std::string{row.source};
        }
        break;
      case metric_scope::thread:
        entry.available = true;
        entry.detail = std::string{row.source};
        break;
      case metric_scope::cpu_core:
        entry.available = frequency_cores > 0;
        entry.detail = frequency_cores > 0
                           ? fmt::format("{} of {} cores of this process", frequency_cores, cores.size())
                           : fmt::format(
                                 "{} cannot be read (the kernel offers no CPU frequency scaling here, as "
                                 "in most virtual machines)",
                                 first_missing.empty() ? std::string{cpu_root} : first_missing);
        break;
      case metric_scope::gpu:
        entry.available = gpu.has_value();
        entry.detail = gpu.has_value() ? fmt::format("{}, {} GPU{}", gpu.value()->name(), gpu.value()->device_count(),
                                                     gpu.value()->device_count() == 1 ? "" : "s")
                                       : gpu.failure().text();
        break;
    }
    rows.push_back(std::move(entry));
  }
  return rows;
}

}  // namespace kairos::runtime
