// Time per MPI call for mpi_call_overhead.py: ranks 0 and 1 bounce an 8-byte message back and forth
// (MPI_Send, MPI_Recv), then every rank runs MPI_Allreduce of one value, each `calls` times.
// Prints "pingpong_ns N allreduce_ns M" from rank 0: per call, half a round trip for the ping-pong.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  long message = 0;
  auto pingpong = [&] {
    for (int i = 0; i < calls; ++i) {
      if (rank == 0) {
        MPI_Send(&message, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(&message, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(&message, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ++message;
        MPI_Send(&message, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
      }
    }
  };
  pingpong();  // warm-up: connections, caches
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  pingpong();
  const double pingpong_s = MPI_Wtime() - start;
  MPI_Barrier(MPI_COMM_WORLD);
  long sum = 0;
  start = MPI_Wtime();
  for (int i = 0; i < calls; ++i) MPI_Allreduce(&message, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const double allreduce_s = MPI_Wtime() - start;
  if (rank == 0)
    std::printf("pingpong_ns %.1f allreduce_ns %.1f\n", pingpong_s * 1e9 / (2.0 * calls), allreduce_s * 1e9 / calls);
  MPI_Finalize();
  return 0;
}
