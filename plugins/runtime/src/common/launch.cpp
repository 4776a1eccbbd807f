#include <kairos/runtime/launch.hpp>

#include <unistd.h>

#include <limits.h>
#include <array>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <vector>

#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

#include "proc_file.hpp"

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
  const auto stat = read_proc_file("/proc/stat");
  if (!stat) return 0;
  const auto at = stat->find("\nbtime ");
  return at == std::string::npos ? 0 : std::strtoll(stat->c_str() + at + 7, nullptr, 10);
}

}  // namespace

namespace {

// /proc/PID/stat's fields from the third on (state, ppid, ...): the command name before them may
// hold spaces and parentheses, so they are counted from its closing parenthesis.
std::vector<std::string> stat_fields(pid_t pid) {
  const auto text = read_proc_file("/proc/" + std::to_string(pid) + "/stat").value_or("");
  std::vector<std::string> fields;
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos || name_end + 2 > text.size()) return fields;
  for (auto begin = text.find_first_not_of(" \n", name_end + 1); begin != std::string::npos;) {
    const auto end = text.find_first_of(" \n", begin);
    fields.push_back(text.substr(begin, end - begin));
    begin = end == std::string::npos ? end : text.find_first_not_of(" \n", end);
  }
  return fields;
}

// Whether PID was started with `variable` in its environment (/proc/PID/environ: the environment
// it was executed with); nullopt when it cannot be read.
std::optional<bool> started_with(pid_t pid, std::string_view variable) {
  const auto environment = read_proc_file("/proc/" + std::to_string(pid) + "/environ");
  if (!environment) return std::nullopt;
  const std::string prefix = std::string{variable} + "=";
  for (std::size_t begin = 0; begin < environment->size();) {
    auto end = environment->find('\0', begin);
    if (end == std::string::npos) end = environment->size();
    if (std::string_view{*environment}.substr(begin, end - begin).starts_with(prefix)) return true;
    begin = end + 1;
  }
  return false;
}

}  // namespace

std::optional<process_start> start_of_process(pid_t pid) {
  const auto fields = stat_fields(pid);
  constexpr std::size_t starttime = 22 - 3;
  if (fields.size() <= starttime) return std::nullopt;
  const auto ticks = integer_of(fields[starttime]);
  const auto boot = boot_unix_seconds();
  if (!ticks || boot == 0) return std::nullopt;
  return process_start{pid, *ticks, boot + *ticks / sysconf(_SC_CLK_TCK)};
}

std::optional<process_start> launcher_of_this_process(std::string_view rank_variable) {
  constexpr int ancestors_looked_at = 16;
  pid_t ancestor = getppid();
  for (int depth = 0; depth < ancestors_looked_at && ancestor > 1; ++depth) {
    // An environment kairos may not read is another user's process: a launcher's daemon
    // (slurmstepd runs as root), never a wrapper script of the user's.
    const auto has_rank = started_with(ancestor, rank_variable);
    if (!has_rank || !*has_rank) return start_of_process(ancestor);
    const auto fields = stat_fields(ancestor);
    constexpr std::size_t ppid = 4 - 3;
    const auto parent = fields.size() > ppid ? integer_of(fields[ppid]) : std::nullopt;
    if (!parent) return std::nullopt;
    ancestor = static_cast<pid_t>(*parent);
  }
  return std::nullopt;
}

launch_identity launch_from_environment(const environment_reader& read, const launcher_finder& launcher_process,
                                        std::string_view hostname) {
  launch_identity launch;
  std::string_view rank_variable;
  for (const auto& candidate : launchers) {
    const auto rank = integer_of(read(candidate.rank));
    if (!rank) continue;
    rank_variable = candidate.rank;
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
  const auto parent = launcher_process(rank_variable);
  if (launch.id.empty() && parent)
    launch.id =
        std::string{hostname} + "-" + std::to_string(parent->pid) + "-" + std::to_string(parent->ticks_after_boot);
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
      &launcher_of_this_process, host.data());
}

// An empty KAIROS_LAUNCH_ID is an answer too (no launch): children need not look again.
void export_launch_variables(bool replace) {
  const auto date = environment_value(setting::launch_date);
  const bool has_id = environment_value_if_set(setting::launch_id).has_value();
  if (!replace && !date.empty() && has_id) return;
  const auto launch = launch_of_this_process();
  if (replace || date.empty())
    set_environment_value(setting::launch_date,
                          format_launch_date(launch.start_unix_seconds.value_or(std::time(nullptr))));
  if (replace || !has_id) set_environment_value(setting::launch_id, launch.id);
}

}  // namespace kairos::runtime
