// A real Kokkos program (tests/annotations_tests.py), built against the Kokkos found at configure
// time: Debian's is 3.4.1, inside Trilinos (libtrilinos-kokkos-dev). It knows nothing of kairos:
// Kokkos itself loads the Kokkos Tools library its environment names and calls its hooks.
//   kokkos_program STEPS   a profile region "solve" around STEPS x (a region "step" around a
//                          parallel_for "axpy" and a parallel_reduce "dot"), then a parallel_scan
//                          "prefix", one deep copy, and a profile section "io" started twice;
//                          prints the reduction's total and the scan's last value
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
    constexpr int size = 1000;
    Kokkos::View<double*> x("x", size), y("y", size), copy("copy", size);
    double total = 0;
    Kokkos::Profiling::pushRegion("solve");
    for (int step = 0; step < steps; ++step) {
      Kokkos::Profiling::pushRegion("step");
      Kokkos::parallel_for(
          "axpy", size, KOKKOS_LAMBDA(int i) { y(i) += 2.0 * x(i) + 1.0; });
      double dot = 0;
      Kokkos::parallel_reduce(
          "dot", size, KOKKOS_LAMBDA(int i, double& sum) { sum += y(i); }, dot);
      total += dot;
      Kokkos::Profiling::popRegion();
    }
    Kokkos::Profiling::popRegion();
    long last = 0;
    Kokkos::parallel_scan(
        "prefix", size,
        KOKKOS_LAMBDA(int i, long& partial, bool final) {
          partial += i;
          if (final && i == size - 1) x(0) = static_cast<double>(partial);
        },
        last);
    Kokkos::deep_copy(copy, y);
    std::uint32_t section = 0;
    Kokkos::Profiling::createProfileSection("io", &section);
    for (int round = 0; round < 2; ++round) {
      Kokkos::Profiling::startSection(section);
      Kokkos::Profiling::stopSection(section);
    }
    Kokkos::Profiling::destroyProfileSection(section);
    std::printf("total %.1f prefix %ld\n", total, last);
  }
  Kokkos::finalize();
  return 0;
}
