#include <kairos/runtime/launch.hpp>

#include <unistd.h>

#include <array>
#include <ctime>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits.h>
#include <sstream>

#include <kairos/runtime/output_path.hpp>

namespace kairos::runtime {
namespace {

std::optional<std::int64_t> integer_of(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  std::int64_t value = 0;
  const auto* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc{} || stop != end || value < 0) return std::nullopt;
  return value;
}

struct launcher_variables {
  std::string_view launcher, rank, size;
};
constexpr std::array<launcher_variables, 5> launchers{{
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"pmix", "PMIX_RANK", ""},  // PMIx gives the size only through its API
    {"mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"},
}};

std::int64_t boot_unix_seconds() {
  std::ifstream stat{"/proc/stat"};
  std::string line;
  while (std::getline(stat, line))
    if (line.starts_with("btime ")) return std::strtoll(line.c_str() + 6, nullptr, 10);
  return 0;
}

}  // namespace

std::optional<process_start> start_of_process(pid_t pid) {
  std::ifstream file{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text{std::istreambuf_iterator<char>{file}, {}};
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its end.
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields{text.substr(name_end + 2)};
  std::string field;
  for (int number = 3; number <= 22 && fields >> field; ++number)
    if (number == 22) {
      const auto ticks = integer_of(field);
      const auto boot = boot_unix_seconds();
      if (!ticks || boot == 0) return std::nullopt;
      return process_start{pid, *ticks, boot + *ticks / sysconf(_SC_CLK_TCK)};
    }
  return std::nullopt;
}

launch_identity launch_from_environment(const environment_reader& read,
                                        const std::function<std::optional<process_start>()>& launcher_process,
                                        std::string_view hostname) {
  launch_identity launch;
  for (const auto& candidate : launchers) {
    const auto rank = integer_of(read(candidate.rank));
    if (!rank) continue;
    launch.launcher = candidate.launcher;
    launch.rank = rank;
    if (!candidate.size.empty()) launch.size = integer_of(read(candidate.size));
    break;
  }
  if (!launch.in_launch()) return launch;
  auto text = [&](std::string_view name) { return read(name).value_or(""); };
  if (launch.launcher == "openmpi" || launch.launcher == "pmix") {
    auto job = text("PMIX_NAMESPACE");
    if (job.empty()) job = text("OMPI_MCA_ess_base_jobid");
    if (!job.empty()) launch.id = launch.launcher + "-" + job;
  } else if (launch.launcher == "slurm" && !text("SLURM_JOB_ID").empty()) {
    launch.id = "slurm-" + text("SLURM_JOB_ID") + "." + text("SLURM_STEP_ID");
    launch.start_unix_seconds = integer_of(read("SLURM_JOB_START_TIME"));
  }
  // Ranks on one node share their launcher process; its pid and start tell this launch from any
  // other (pids are reused, starts are not).
  if (!launch.id.empty() && launch.start_unix_seconds) return launch;
  const auto parent = launcher_process();
  if (launch.id.empty() && parent)
    launch.id = std::string{hostname} + "-" + std::to_string(parent->pid) + "-" +
                std::to_string(parent->ticks_after_boot);
  if (!launch.start_unix_seconds && parent) launch.start_unix_seconds = parent->unix_seconds;
  return launch;
}

launch_identity launch_of_this_process() {
  std::array<char, HOST_NAME_MAX + 1> host{};
  gethostname(host.data(), host.size() - 1);
  return launch_from_environment(
      [](std::string_view name) -> std::optional<std::string> {
        const char* value = std::getenv(std::string{name}.c_str());
        if (!value) return std::nullopt;
        return std::string{value};
      },
      [] { return start_of_process(getppid()); }, host.data());
}

}  // namespace kairos::runtime

namespace kairos::runtime {

void export_launch_variables(bool replace) {
  const char* date = std::getenv("KAIROS_LAUNCH_DATE");
  const char* id = std::getenv("KAIROS_LAUNCH_ID");
  if (!replace && date && *date && id) return;
  const auto launch = launch_of_this_process();
  if (replace || !date || !*date)
    setenv("KAIROS_LAUNCH_DATE", format_launch_date(launch.start_unix_seconds.value_or(std::time(nullptr))).c_str(), 1);
  if (replace || !id) setenv("KAIROS_LAUNCH_ID", launch.id.c_str(), 1);
}

}  // namespace kairos::runtime
