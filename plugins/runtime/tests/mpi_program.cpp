/* The MPI test's program (mpi_tests.py): deliberately imbalanced ranks. Rank r does r + 1 units of
   CPU work, then a ring exchange (MPI_Isend to the next rank, MPI_Irecv from the previous one,
   MPI_Waitall), an MPI_Allreduce of everyone's result and an MPI_Barrier: rank 0 finishes its work
   first and waits longest. What it prints depends only on the ranks, never on timing. The work is a
   user-API region ("work", wall time: (r + 1) units exactly, however the ranks share the cores), so
   the merged launch's report has a known imbalance: max / mean = 4 / 2.5 = 1.6, rank 3 slowest. */
#include <kairos/user.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { ring_ints = 1000 };

__attribute__((noinline)) static double work(int units, double unit_seconds) {
  double value = 0;
  for (int unit = 0; unit < units; ++unit) {
    const double start = MPI_Wtime();
    while (MPI_Wtime() - start < unit_seconds)
      for (int i = 1; i < 10000; ++i) value += 1.0 / i;
  }
  return value;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double unit_seconds = argc > 1 ? atof(argv[1]) : 0.2;
  kairos_push_region("work");
  work(rank + 1, unit_seconds);
  kairos_pop_region("work");

  static int outgoing[ring_ints], incoming[ring_ints];
  for (int i = 0; i < ring_ints; ++i) outgoing[i] = rank * ring_ints + i;
  MPI_Request requests[2];
  MPI_Isend(outgoing, ring_ints, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD, &requests[0]);
  MPI_Irecv(incoming, ring_ints, MPI_INT, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &requests[1]);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);

  long mine = incoming[0] + rank, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d of %d: received %d..%d, total %ld\n", rank, size, incoming[0], incoming[ring_ints - 1], total);
  MPI_Finalize();
  return 0;
}
