// What a wrapped call costs over a plain call through the PLT, with an empty bundle and with a
// wall clock, and what patching all loaded objects (this program + 20 libraries + libc, libstdc++,
// ...) costs. Ends with ratios of medians measured in the same run, repetitions interleaved.
#include <dlfcn.h>
#include <link.h>

#include <string>
#include <string_view>

#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/plugins/gotcha.hpp>

#include "ratio_report.hpp"

extern "C" int bench_target(int);
extern "C" int bench_caller_1(int);

namespace {

struct empty_tag;
struct clock_tag;
struct patch_tag;
using empty_bundle = kairos::gotcha<1, kairos::component_tuple<>, empty_tag>;
using timed = kairos::gotcha<1, kairos::component_tuple<kairos::wall_clock>, clock_tag>;
using patched = kairos::gotcha<1, kairos::component_tuple<>, patch_tag>;

void unwrapped_call(benchmark::State& state) {
  int x = 0;
  for (auto _ : state) {
    x = bench_target(x);
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(unwrapped_call);

void wrapped_call_empty_bundle(benchmark::State& state) {
  if (!empty_bundle::wrap<0, int(int)>("bench_target").ok()) state.SkipWithError("not wrapped");
  int x = 0;
  for (auto _ : state) {
    x = bench_target(x);
    benchmark::DoNotOptimize(x);
  }
  empty_bundle::unwrap_all();
}
BENCHMARK(wrapped_call_empty_bundle);

// The same work written by hand: what the wrapper does per call (gotcha.hpp, make_bundle), a
// wall_clock bundle labelled with the stored function name, started and stopped around the call.
void hand_timed_call(benchmark::State& state) {
  static const std::string function_name{"bench_target"};
  int x = 0;
  for (auto _ : state) {
    kairos::component_tuple<kairos::wall_clock> bundle{std::string_view{function_name}};
    bundle.start();
    x = bench_target(x);
    bundle.stop();
    benchmark::DoNotOptimize(x);
    benchmark::DoNotOptimize(bundle);
  }
}
BENCHMARK(hand_timed_call);

void wrapped_call_wall_clock(benchmark::State& state) {
  if (!timed::wrap<0, int(int)>("bench_target").ok()) state.SkipWithError("not wrapped");
  int x = 0;
  for (auto _ : state) {
    x = bench_target(x);
    benchmark::DoNotOptimize(x);
  }
  timed::unwrap_all();
}
BENCHMARK(wrapped_call_wall_clock);

int count_loaded_objects() {
  int objects = 0;
  dl_iterate_phdr([](dl_phdr_info*, std::size_t, void* count) { return ++*static_cast<int*>(count), 0; }, &objects);
  return objects;
}

// Wrapping one symbol: every loaded object's relocations scanned, 21 slots rewritten.
void patch_all_objects_wrap(benchmark::State& state) {
  std::size_t slots = 0;
  for (auto _ : state) {
    slots = patched::wrap<0, int(int)>("bench_target").slots_patched;
    state.PauseTiming();
    patched::unwrap_all();
    state.ResumeTiming();
  }
  state.counters["objects"] = count_loaded_objects();
  state.counters["slots"] = static_cast<double>(slots);
}
BENCHMARK(patch_all_objects_wrap)->Unit(benchmark::kMicrosecond);

void patch_all_objects_unwrap(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    patched::wrap<0, int(int)>("bench_target");
    state.ResumeTiming();
    patched::unwrap_all();
  }
  state.counters["objects"] = count_loaded_objects();
}
BENCHMARK(patch_all_objects_unwrap)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::DoNotOptimize(bench_caller_1(1));  // the generated libraries are really used
  return kairos::benchmarks::run_and_print_ratios(
      argc, argv,
      {{"wrapped_call_empty_bundle", "unwrapped_call", 5.0}, {"wrapped_call_wall_clock", "hand_timed_call", 1.5}});
}
