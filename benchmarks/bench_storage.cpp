// The cost of recording into the call graph: a stored region against the raw clock pair it wraps,
// and how time and memory grow with depth and with the number of distinct labels.
#include <malloc.h>

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <kairos/auto_tuple.hpp>
#include <kairos/report.hpp>

#include "baselines.hpp"
#include "ratio_report.hpp"

namespace {

using kairos::benchmarks::raw_steady_clock_pair;
BENCHMARK(raw_steady_clock_pair);

// Steady state: the node exists, so a region is a lookup, two clock reads and a statistics update.
void auto_tuple_wall_clock_stored(benchmark::State& state) {
  kairos::thread_graphs::instance().clear();
  for (auto _ : state) {
    kairos::auto_tuple<kairos::wall_clock> region{"region"};
    benchmark::DoNotOptimize(region);
  }
}
BENCHMARK(auto_tuple_wall_clock_stored);

void kairos_region_macro(benchmark::State& state) {
  kairos::thread_graphs::instance().clear();
  for (auto _ : state) {
    KAIROS_REGION("region");
  }
}
BENCHMARK(kairos_region_macro);

// A parent with many children switches from scanning to a hash index.
void auto_tuple_among_64_siblings(benchmark::State& state) {
  kairos::thread_graphs::instance().clear();
  std::vector<std::string> labels;
  for (int i = 0; i < 64; ++i) labels.push_back(fmt::format("sibling_{}", i));
  std::size_t next = 0;
  for (auto _ : state) {
    kairos::auto_tuple<kairos::wall_clock> region{labels[next++ % labels.size()]};
    benchmark::DoNotOptimize(region);
  }
}
BENCHMARK(auto_tuple_among_64_siblings);

std::size_t heap_in_use() { return mallinfo2().uordblks; }

void nest(int depth) {
  kairos::auto_tuple<kairos::wall_clock> region{"nest"};
  if (depth > 1) nest(depth - 1);
}

// One-shot measurements of growth, printed once (not repeated by Google Benchmark).
void print_growth() {
  using clock = std::chrono::steady_clock;
  kairos::thread_graphs::instance().clear();
  nest(1);  // registers the thread and the component
  auto heap_before = heap_in_use();
  auto begin = clock::now();
  nest(10'000);
  auto elapsed_ns = std::chrono::duration<double, std::nano>(clock::now() - begin).count();
  auto heap_after = heap_in_use();
  const auto deep_nodes = kairos::this_thread_graph().nodes().size() - 1;
  fmt::print("depth 10,000 recursion (new nodes): {:.0f} ns per region, {:.0f} bytes per node\n", elapsed_ns / 10'000,
             static_cast<double>(heap_after - heap_before) / (deep_nodes - 1));
  begin = clock::now();
  nest(10'000);
  elapsed_ns = std::chrono::duration<double, std::nano>(clock::now() - begin).count();
  fmt::print("depth 10,000 recursion (nodes exist): {:.0f} ns per region\n", elapsed_ns / 10'000);

  kairos::thread_graphs::instance().clear();
  std::vector<std::string> labels;
  for (int i = 0; i < 100'000; ++i) labels.push_back(fmt::format("label_{}", i));
  heap_before = heap_in_use();
  begin = clock::now();
  for (const auto& label : labels) kairos::auto_tuple<kairos::wall_clock> region{label};
  elapsed_ns = std::chrono::duration<double, std::nano>(clock::now() - begin).count();
  heap_after = heap_in_use();
  fmt::print("100,000 distinct labels (new nodes): {:.0f} ns per region, {:.0f} bytes per node\n", elapsed_ns / 100'000,
             static_cast<double>(heap_after - heap_before) / 100'000);
  begin = clock::now();
  for (const auto& label : labels) kairos::auto_tuple<kairos::wall_clock> region{label};
  elapsed_ns = std::chrono::duration<double, std::nano>(clock::now() - begin).count();
  fmt::print("100,000 distinct labels (nodes exist): {:.0f} ns per region\n", elapsed_ns / 100'000);
  begin = clock::now();
  const auto data = kairos::report();
  elapsed_ns = std::chrono::duration<double, std::nano>(clock::now() - begin).count();
  fmt::print("report() of 100,000 nodes: {:.1f} ms\n\n", elapsed_ns * 1e-6);
  kairos::thread_graphs::instance().clear();
}

}  // namespace

int main(int argc, char** argv) {
  print_growth();
  return kairos::benchmarks::run_and_print_ratios(argc, argv,
                                                  {{"auto_tuple_wall_clock_stored", "raw_steady_clock_pair", 2.0},
                                                   {"kairos_region_macro", "raw_steady_clock_pair", 2.0},
                                                   {"auto_tuple_among_64_siblings", "raw_steady_clock_pair", 3.0}});
}
