#pragma once
// Who a process is in a parallel launch (MPI ranks under mpirun, mpiexec or srun): its rank, the
// launch's size, and an id and start time that every rank of the launch computes alike from its
// launcher's environment, with no communication (docs/mpi.md).
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kairos::runtime {

// A process's start, read from /proc: what ties the ranks a launcher started on one node together
// when its environment names no launch.
struct process_start {
  pid_t pid = 0;
  std::int64_t ticks_after_boot = 0;  // /proc/PID/stat's starttime: stable, unlike a wall time
  std::int64_t unix_seconds = 0;
};
std::optional<process_start> start_of_process(pid_t pid);

// The launcher process of this one on its node: the nearest ancestor started without
// `rank_variable` in its environment (mpirun, orted, hydra_pmi_proxy, slurmstepd), so that wrapper
// scripts between the launcher and the program change nothing. nullopt when none can be read.
std::optional<process_start> launcher_of_this_process(std::string_view rank_variable);

struct launch_identity {
  std::string launcher;  // "openmpi", "pmi" (MPICH's Hydra), "slurm", "pmix", "mvapich"; "" outside
  std::optional<std::int64_t> rank, size;
  std::string id;                                  // shared by the launch's ranks; "" outside a launch
  std::optional<std::int64_t> start_unix_seconds;  // the launch's start, shared by its ranks
  bool in_launch() const { return !launcher.empty(); }
};

using environment_reader = std::function<std::optional<std::string>(std::string_view name)>;

// The launch as the environment describes it; the first launcher whose rank variable is set wins:
// OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS, PMIX_RANK, MV2_COMM_WORLD_RANK/SIZE.
// The id comes from the launcher's job (PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid, SLURM_JOB_ID
// and SLURM_STEP_ID), else from the launcher process on this node (`launcher_process(rank_variable)`,
// asked only inside a launch), whose start is also the launch's start unless SLURM_JOB_START_TIME
// says otherwise.
using launcher_finder = std::function<std::optional<process_start>(std::string_view rank_variable)>;
launch_identity launch_from_environment(const environment_reader& read, const launcher_finder& launcher_process,
                                        std::string_view hostname);

// This process's launch: its environment, its launcher process, its host.
launch_identity launch_of_this_process();

// Puts the launch's date (%launch_date%: the launch's start, else now) and id in the environment as
// KAIROS_LAUNCH_DATE and KAIROS_LAUNCH_ID, for the process's execs and children. `replace`:
// kairos-run starts a launch; the runtime preloaded without it only fills in what is missing.
void export_launch_variables(bool replace);

}  // namespace kairos::runtime
