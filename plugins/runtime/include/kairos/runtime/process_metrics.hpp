#pragma once
// Process sampling's metrics (docs/runtime.md, "Process sampling"): one table of what kairos reads
// about the process and the machine under it every KAIROS_PROCESS_SAMPLING_PERIOD, where each is
// read, and what this machine offers (kairos-avail --process-metrics). The GPU metrics come from
// the vendor's management library, loaded at run time with dlopen (NVML's libnvidia-ml.so.1, ROCm
// SMI's librocm_smi64.so): no build or package depends on either.
#include <kairos/problem.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kairos::runtime {

enum class process_metric : std::uint8_t {
  memory_resident_bytes,
  memory_virtual_bytes,
  cpu_percent,
  thread_cpu_percent,
  context_switches_per_s,
  page_faults_per_s,
  read_bytes_per_s,
  written_bytes_per_s,
  cpu_frequency_mhz,
  gpu_power_watts,
  gpu_temperature_celsius,
  gpu_utilization_percent,
  gpu_memory_used_bytes,
};

// What one value is of: the process, one of its threads, one CPU core, one GPU.
enum class metric_scope : std::uint8_t { process, thread, cpu_core, gpu };

struct process_metric_definition {
  process_metric metric;
  std::string_view name;  // as KAIROS_PROCESS_SAMPLING_METRICS, the database and the traces name it
  std::string_view unit;
  metric_scope scope;
  std::string_view source;  // where it is read
  std::string_view description;
};

// In process_metric's order (checked below).
inline constexpr process_metric_definition process_metric_table[] = {
    {process_metric::memory_resident_bytes, "memory_resident_bytes", "bytes", metric_scope::process, "/proc/self/statm",
     "resident set: the process's pages in memory"},
    {process_metric::memory_virtual_bytes, "memory_virtual_bytes", "bytes", metric_scope::process, "/proc/self/statm",
     "virtual memory the process has mapped"},
    {process_metric::cpu_percent, "cpu_percent", "%", metric_scope::process, "CLOCK_PROCESS_CPUTIME_ID",
     "CPU time of every thread over the period's wall time (100: one core busy)"},
    {process_metric::thread_cpu_percent, "thread_cpu_percent", "%", metric_scope::thread,
     "each thread's CPU clock (clock_gettime)", "CPU time of each of the program's threads over the period"},
    {process_metric::context_switches_per_s, "context_switches_per_s", "1/s", metric_scope::process,
     "getrusage(RUSAGE_SELF)", "voluntary and involuntary context switches a second"},
    {process_metric::page_faults_per_s, "page_faults_per_s", "1/s", metric_scope::process, "getrusage(RUSAGE_SELF)",
     "minor and major page faults a second"},
    {process_metric::read_bytes_per_s, "read_bytes_per_s", "bytes/s", metric_scope::process, "/proc/self/io (rchar)",
     "bytes read by system calls a second (files, pipes, sockets)"},
    {process_metric::written_bytes_per_s, "written_bytes_per_s", "bytes/s", metric_scope::process,
     "/proc/self/io (wchar)", "bytes written by system calls a second"},
    {process_metric::cpu_frequency_mhz, "cpu_frequency_mhz", "MHz", metric_scope::cpu_core,
     "/sys/devices/system/cpu/cpu<N>/cpufreq/scaling_cur_freq",
     "current frequency of each core the process may run on (its affinity mask)"},
    {process_metric::gpu_power_watts, "gpu_power_watts", "W", metric_scope::gpu, "NVML or ROCm SMI",
     "each GPU's power draw"},
    {process_metric::gpu_temperature_celsius, "gpu_temperature_celsius", "C", metric_scope::gpu, "NVML or ROCm SMI",
     "each GPU's temperature"},
    {process_metric::gpu_utilization_percent, "gpu_utilization_percent", "%", metric_scope::gpu, "NVML or ROCm SMI",
     "share of the last sample period in which a kernel ran on each GPU"},
    {process_metric::gpu_memory_used_bytes, "gpu_memory_used_bytes", "bytes", metric_scope::gpu, "NVML or ROCm SMI",
     "each GPU's memory in use (by every process)"},
};
inline constexpr std::size_t process_metric_count = std::size(process_metric_table);

// KAIROS_PROCESS_SAMPLING_METRICS' accepted words: "all", then every metric's name in the table's
// order (the settings row names this string; the check below ties it to the table).
inline constexpr std::string_view process_metric_choices =
    "all,memory_resident_bytes,memory_virtual_bytes,cpu_percent,thread_cpu_percent,context_switches_per_s,"
    "page_faults_per_s,read_bytes_per_s,written_bytes_per_s,cpu_frequency_mhz,gpu_power_watts,"
    "gpu_temperature_celsius,gpu_utilization_percent,gpu_memory_used_bytes";

namespace process_metrics_detail {
constexpr bool table_agrees() {
  std::string_view rest = process_metric_choices;
  if (!rest.starts_with("all,")) return false;
  rest.remove_prefix(4);
  for (std::size_t i = 0; i < process_metric_count; ++i) {
    if (process_metric_table[i].metric != static_cast<process_metric>(i)) return false;
    const auto comma = rest.find(',');
    if (rest.substr(0, comma) != process_metric_table[i].name) return false;
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return rest.empty();
}
static_assert(table_agrees(), "process_metric, process_metric_table and process_metric_choices disagree");
}  // namespace process_metrics_detail

inline const process_metric_definition& definition_of(process_metric metric) {
  return process_metric_table[static_cast<std::size_t>(metric)];
}
std::optional<process_metric> find_process_metric(std::string_view name);

// The metrics a KAIROS_PROCESS_SAMPLING_METRICS list names ("all": every one), in the table's order.
std::vector<process_metric> chosen_process_metrics(const std::vector<std::string>& names);

// Where a core's current frequency is read: <cpu_root>/cpu<N>/cpufreq/scaling_cur_freq.
std::string cpu_frequency_path(std::string_view cpu_root, int core);
// The cores this process may run on (sched_getaffinity), ascending.
std::vector<int> cores_of_this_process();

// Readers of the /proc texts: nullopt when the text is not what the kernel writes.
struct statm_values {
  std::int64_t virtual_bytes = 0, resident_bytes = 0;
};
std::optional<statm_values> parse_statm(std::string_view text, std::int64_t page_bytes);
struct io_values {
  std::int64_t read_bytes = 0, written_bytes = 0;  // rchar, wchar
};
std::optional<io_values> parse_proc_io(std::string_view text);
// scaling_cur_freq's kHz as MHz.
std::optional<double> parse_frequency_khz(std::string_view text);

// One GPU's readings; a field is nullopt when the library does not answer it for that device.
struct gpu_reading {
  std::optional<double> power_watts, temperature_celsius, utilization_percent, memory_used_bytes;
};

// A GPU management library loaded with dlopen and initialized: NVML first, else ROCm SMI. Devices
// are numbered from 0 in the library's order. Reading is not thread-safe (one sampler thread).
class gpu_metrics_library {
 public:
  // The library this machine offers, or why none: each vendor's reason ("libnvidia-ml.so.1: cannot
  // open shared object file"; "nvmlInit_v2 failed: Driver Not Loaded").
  static result<std::unique_ptr<gpu_metrics_library>> open();
  virtual ~gpu_metrics_library() = default;
  virtual std::string_view name() const = 0;  // "NVML", "ROCm SMI"
  virtual int device_count() const = 0;
  virtual gpu_reading read(int device) = 0;
};

// What this machine offers of each metric, for kairos-avail: available or not, and where it is
// read (e.g. "2 cores", "NVML, 1 GPU") or why not.
struct process_metric_availability {
  process_metric metric;
  bool available = false;
  std::string detail;
};
std::vector<process_metric_availability> probe_process_metrics(std::string_view cpu_root);

}  // namespace kairos::runtime
