#pragma once
// The MPI producer's batch (mpi_calls.hpp): the calls the program's threads made since the last
// take, and the world MPI_Init told (the rank and size MPI itself gives, beside the launcher's).
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kairos::runtime {

struct thread_record;

// The wrapped communication calls, in the order of their names below.
enum class mpi_function : std::uint8_t {
  send,
  recv,
  isend,
  irecv,
  wait,
  waitall,
  waitany,
  waitsome,
  barrier,
  bcast,
  reduce,
  allreduce,
  alltoall,
  alltoallv,
  gather,
  gatherv,
  allgather,
  allgatherv,
  scatter,
  scatterv,
};
inline constexpr std::array<std::string_view, 20> mpi_function_names{
    "MPI_Send",     "MPI_Recv",    "MPI_Isend",     "MPI_Irecv",      "MPI_Wait",      "MPI_Waitall",  "MPI_Waitany",
    "MPI_Waitsome", "MPI_Barrier", "MPI_Bcast",     "MPI_Reduce",     "MPI_Allreduce", "MPI_Alltoall", "MPI_Alltoallv",
    "MPI_Gather",   "MPI_Gatherv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Scatter",   "MPI_Scatterv"};
constexpr std::string_view name_of(mpi_function function) {
  return mpi_function_names[static_cast<std::size_t>(function)];
}

// No default member initializers: a thread's log is mapped, not constructed, and rows are written
// only as calls happen.
struct mpi_call_row {
  std::int64_t start_ns;  // CLOCK_MONOTONIC, around the original call
  std::int64_t end_ns;
  std::int64_t bytes;   // -1: the call moves no data of its own (waits, barriers)
  std::int32_t peer;    // rank in the call's communicator (destination, source, root); -1: none
  std::int32_t window;  // 0: no windows
  mpi_function function;
};

struct mpi_world {
  std::int64_t rank = 0;
  std::int64_t size = 1;
};

struct mpi_call_batch {
  struct call {
    thread_record* thread;
    mpi_call_row row;
  };
  std::vector<call> calls;
  std::optional<mpi_world> world;  // set in the first take after MPI_Init returned
  void clear() {
    calls.clear();
    world.reset();
  }
};

}  // namespace kairos::runtime
