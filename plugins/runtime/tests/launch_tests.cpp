#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <string>

#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/output_path.hpp>

using namespace kairos::runtime;

namespace {

// A launcher's environment, and the launcher process ranks on this node would see as their parent.
struct launch_environment {
  std::map<std::string, std::string, std::less<>> variables;
  std::optional<process_start> parent = process_start{4242, 987654, 1'700'000'000};
  int parent_asked = 0;
  std::string rank_variable_given;

  launch_identity launch() {
    return launch_from_environment(
        [this](std::string_view name) -> std::optional<std::string> {
          const auto found = variables.find(name);
          if (found == variables.end()) return std::nullopt;
          return found->second;
        },
        [this](std::string_view rank_variable) {
          ++parent_asked;
          rank_variable_given = rank_variable;
          return parent;
        },
        "node7");
  }
};

}  // namespace

TEST_CASE("Open MPI: rank and size from OMPI_COMM_WORLD_*, the launch id from the PMIx namespace") {
  launch_environment environment{{{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"PMIX_NAMESPACE", "1378484225"},
                                  {"PMIX_RANK", "3"},
                                  {"OMPI_MCA_ess_base_jobid", "1378484225"}}};
  const auto launch = environment.launch();
  CHECK(launch.launcher == "openmpi");
  CHECK(launch.rank == 3);
  CHECK(launch.size == 4);
  CHECK(launch.id == "openmpi-1378484225");
  CHECK(launch.start_unix_seconds == 1'700'000'000);  // mpirun's start: the same for every rank
}

TEST_CASE("Open MPI without PMIx: the launch id from the job id") {
  launch_environment environment{
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_MCA_ess_base_jobid", "55"}}};
  CHECK(environment.launch().id == "openmpi-55");
}

TEST_CASE("MPICH's Hydra (PMI): rank and size from PMI_*, the id from the launcher process") {
  launch_environment environment{{{"PMI_RANK", "1"}, {"PMI_SIZE", "8"}}};
  const auto launch = environment.launch();
  CHECK(launch.launcher == "pmi");
  CHECK(launch.rank == 1);
  CHECK(launch.size == 8);
  CHECK(launch.id == "node7-4242-987654");
  CHECK(launch.start_unix_seconds == 1'700'000'000);
  CHECK(environment.rank_variable_given == "PMI_RANK");  // the launcher is the ancestor started without it
}

TEST_CASE("Slurm: rank and size from SLURM_PROCID/NTASKS, the id from the job and step, the start from the job") {
  launch_environment environment{{{"SLURM_PROCID", "5"},
                                  {"SLURM_NTASKS", "16"},
                                  {"SLURM_JOB_ID", "9001"},
                                  {"SLURM_STEP_ID", "2"},
                                  {"SLURM_JOB_START_TIME", "1690000000"}}};
  const auto launch = environment.launch();
  CHECK(launch.launcher == "slurm");
  CHECK(launch.rank == 5);
  CHECK(launch.size == 16);
  CHECK(launch.id == "slurm-9001.2");
  CHECK(launch.start_unix_seconds == 1'690'000'000);
  CHECK(environment.parent_asked == 0);  // the environment said everything
}

TEST_CASE("Slurm without a job start time: the start of slurmstepd, the parent") {
  launch_environment environment{
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "0"}}};
  CHECK(environment.launch().start_unix_seconds == 1'700'000'000);
}

TEST_CASE("the launcher that started the process wins over an allocation's variables") {
  // mpirun inside a Slurm allocation: the ranks see both; the ranks are Open MPI's.
  launch_environment environment{{{"OMPI_COMM_WORLD_RANK", "2"},
                                  {"OMPI_COMM_WORLD_SIZE", "3"},
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "1"},
                                  {"SLURM_JOB_ID", "7"},
                                  {"PMIX_NAMESPACE", "ns"}}};
  const auto launch = environment.launch();
  CHECK(launch.launcher == "openmpi");
  CHECK(launch.rank == 2);
  CHECK(launch.size == 3);
}

TEST_CASE("PMIx alone gives a rank without a size, MVAPICH gives both") {
  launch_environment pmix{{{"PMIX_RANK", "4"}, {"PMIX_NAMESPACE", "slurm.pmix.12.0"}}};
  const auto by_pmix = pmix.launch();
  CHECK(by_pmix.launcher == "pmix");
  CHECK(by_pmix.rank == 4);
  CHECK_FALSE(by_pmix.size.has_value());
  CHECK(by_pmix.id == "pmix-slurm.pmix.12.0");
  launch_environment mvapich{{{"MV2_COMM_WORLD_RANK", "6"}, {"MV2_COMM_WORLD_SIZE", "7"}}};
  CHECK(mvapich.launch().launcher == "mvapich");
  CHECK(mvapich.launch().size == 7);
}

TEST_CASE("outside a launch: no rank, no id, and the parent is not even asked") {
  launch_environment environment{{{"HOME", "/root"}}};
  const auto launch = environment.launch();
  CHECK_FALSE(launch.in_launch());
  CHECK_FALSE(launch.rank.has_value());
  CHECK(launch.id.empty());
  CHECK(environment.parent_asked == 0);
}

TEST_CASE("a rank that is not a number is no rank") {
  launch_environment environment{{{"OMPI_COMM_WORLD_RANK", "x1"}, {"PMI_RANK", "-1"}, {"SLURM_PROCID", "2"}}};
  const auto launch = environment.launch();
  CHECK(launch.launcher == "slurm");
  CHECK(launch.rank == 2);
}

TEST_CASE("the start of a real process: this test's parent, the same on every read") {
  const auto first = start_of_process(getppid());
  REQUIRE(first.has_value());
  CHECK(first->pid == getppid());
  CHECK(first->unix_seconds <= std::time(nullptr));
  CHECK(first->unix_seconds > 1'500'000'000);
  const auto again = start_of_process(getppid());
  REQUIRE(again.has_value());
  CHECK(again->ticks_after_boot == first->ticks_after_boot);
  CHECK(again->unix_seconds == first->unix_seconds);
}

TEST_CASE("the launcher is the nearest ancestor started without the rank variable") {
  // Nothing started this test with such a variable: its parent is the launcher.
  const auto launcher = launcher_of_this_process("KAIROS_TEST_NO_PROCESS_HAS_THIS");
  const auto parent = start_of_process(getppid());
  REQUIRE(launcher.has_value());
  REQUIRE(parent.has_value());
  CHECK(launcher->pid == parent->pid);
  CHECK(launcher->ticks_after_boot == parent->ticks_after_boot);
}

TEST_CASE("%launch_id% is the launch's id as one path component, and 'none' outside a launch") {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("PMIX_NAMESPACE", "prterun-node3/1@1", 1);
  unsetenv("KAIROS_LAUNCH_ID");
  CHECK(expand_path("out/%launch_id%/rank%rank%", path_values::of_this_process()).value() ==
        "out/openmpi-prterun-node3_1@1/rank1");
  setenv("KAIROS_LAUNCH_ID", "openmpi-9", 1);  // what kairos-run exported: the process row's
  CHECK(expand_path("%launch_id%", path_values::of_this_process()).value() == "openmpi-9");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("PMIX_NAMESPACE");
  setenv("KAIROS_LAUNCH_ID", "", 1);  // kairos-run outside a launch
  CHECK(expand_path("%launch_id%", path_values::of_this_process()).value() == "none");
  unsetenv("KAIROS_LAUNCH_ID");
}

TEST_CASE("%rank%, %size% and %launch_date% of a process under Open MPI's mpirun") {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("PMIX_NAMESPACE", "77", 1);
  unsetenv("KAIROS_LAUNCH_DATE");
  unsetenv("KAIROS_LAUNCH_ID");
  export_launch_variables(false);
  const auto parent = start_of_process(getppid());
  REQUIRE(parent.has_value());
  CHECK(std::string{std::getenv("KAIROS_LAUNCH_DATE")} == format_launch_date(parent->unix_seconds));
  CHECK(std::string{std::getenv("KAIROS_LAUNCH_ID")} == "openmpi-77");
  const auto values = path_values::of_this_process();
  CHECK(expand_path("out/%launch_date%/rank%rank%-of-%size%", values).value() ==
        "out/" + format_launch_date(parent->unix_seconds) + "/rank2-of-4");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  CHECK(expand_path("%rank%-%size%", path_values::of_this_process()).value() == "0-1");
}
