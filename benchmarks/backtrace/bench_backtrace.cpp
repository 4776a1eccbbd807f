// Run: bench_backtrace [--benchmark_filter=...]
// Google Benchmark tables, then side-by-side ratios (median of interleaved rounds, one process):
//   capture of a 20-frame stack: kairos::backtrace<64>::record() vs libgcc _Unwind_Backtrace and
//   glibc backtrace(); kairos's unwind tables (the sampling handler's walk, from registers as a
//   signal context gives them) and a frame-pointer walk (what it costs and how many of the frames
//   it finds where libc has no frame pointers); symbolization of 1,000 distinct addresses: cached
//   vs uncached vs cold.
#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <kairos/plugins/backtrace.hpp>
#include <kairos/plugins/backtrace/symbolizer.hpp>

#include "median.hpp"

namespace {

using glibc_backtrace_function = int (*)(void**, int);
glibc_backtrace_function glibc_backtrace = nullptr;  // from libc.so.6 itself (libunwind exports one too)

// Calls `work` from the bottom of a chain so that it sees exactly `frames` frames below main's
// caller side: 20 frames for the capture benchmarks.
[[gnu::noinline]] void at_depth(int depth, const std::function<void()>& work) {
  if (depth <= 0) {
    work();
    return;
  }
  at_depth(depth - 1, work);
  asm volatile("" ::: "memory");
}
constexpr int chain_depth = 13;           // + the lambda, std::function, main, libc: 20 frames
constexpr int benchmark_chain_depth = 5;  // Google Benchmark's runner adds 8 more frames

int capture_kairos() {
  const auto stack = kairos::backtrace<64>::record();
  return static_cast<int>(stack.size());
}
int capture_libunwind() {
#if KAIROS_BACKTRACE_HAVE_LIBUNWIND
  void* frames[64];
  return unw_backtrace(frames, 64);
#else
  return 0;
#endif
}
int capture_libgcc() {
  void* frames[64];
  return kairos::backtrace_detail::unwind_with_libgcc(frames, 64);
}
int capture_glibc() {
  void* frames[64];
  return glibc_backtrace(frames, 64);
}

// A frame-pointer walk as a signal handler could do it: each frame's saved frame pointer must lie
// above the last, inside the thread's stack, or the walk stops (a module built without frame
// pointers ends it early: libc's start-up frames here).
std::uintptr_t stack_top() {
  static const std::uintptr_t top = [] {
    pthread_attr_t attributes;
    void* low = nullptr;
    std::size_t size = 0;
    pthread_getattr_np(pthread_self(), &attributes);
    pthread_attr_getstack(&attributes, &low, &size);
    pthread_attr_destroy(&attributes);
    return reinterpret_cast<std::uintptr_t>(low) + size;
  }();
  return top;
}
[[gnu::noinline]] int capture_frame_pointers() {
  void* frames[64];
  int count = 0;
  auto* frame = static_cast<std::uintptr_t*>(__builtin_frame_address(0));
  const std::uintptr_t top = stack_top();
  while (count < 64) {
    const auto here = reinterpret_cast<std::uintptr_t>(frame);
    if (here + 2 * sizeof(std::uintptr_t) > top || frame[1] == 0) break;
    frames[count++] = reinterpret_cast<void*>(frame[1]);
    const auto next = frame[0];
    if (next <= here || next >= top) break;
    frame = reinterpret_cast<std::uintptr_t*>(next);
  }
  benchmark::DoNotOptimize(frames);
  return count;
}

// The handler's walk over kairos's unwind tables, from this function's own registers (what a
// signal context holds).
[[gnu::noinline]] int capture_tables() {
  std::uintptr_t frames[64];
  const auto walk = kairos::backtrace_detail::walk_from_here(frames, 64);
  benchmark::DoNotOptimize(frames);
  return walk.finished() ? walk.count : -walk.count;
}

void BM_capture(benchmark::State& state, int (*capture)()) {
  kairos::backtrace_prewarm();
  at_depth(benchmark_chain_depth, [&] {
    int frames = 0;
    for (auto _ : state) {
      frames = capture();
      benchmark::DoNotOptimize(frames);
    }
    state.counters["frames"] = frames;
  });
}
BENCHMARK_CAPTURE(BM_capture, kairos_record, &capture_kairos);
BENCHMARK_CAPTURE(BM_capture, libunwind_unw_backtrace, &capture_libunwind);
BENCHMARK_CAPTURE(BM_capture, libgcc_Unwind_Backtrace, &capture_libgcc);
BENCHMARK_CAPTURE(BM_capture, glibc_backtrace, &capture_glibc);
BENCHMARK_CAPTURE(BM_capture, frame_pointer_walk, &capture_frame_pointers);
BENCHMARK_CAPTURE(BM_capture, kairos_unwind_tables, &capture_tables);

// 1,000 distinct code addresses: half in this program (built with -g: names and file:line), half
// in libstdc++ (Debian ships it stripped of DWARF: names from .dynsym only).
std::vector<std::uintptr_t> distinct_addresses() {
  struct text_segment {
    const char* wanted;
    std::uintptr_t start = 0, size = 0;
  };
  text_segment segments[2] = {{""}, {"libstdc++"}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* found = static_cast<text_segment*>(data);
        for (int s = 0; s < 2; ++s) {
          const bool is_main = found[s].wanted[0] == '\0' && info->dlpi_name[0] == '\0';
          const bool matches = found[s].wanted[0] != '\0' && std::strstr(info->dlpi_name, found[s].wanted);
          if (!(is_main || matches) || found[s].size != 0) continue;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& header = info->dlpi_phdr[i];
            if (header.p_type == PT_LOAD && (header.p_flags & PF_X)) {
              found[s].start = info->dlpi_addr + header.p_vaddr;
              found[s].size = header.p_memsz;
            }
          }
        }
        return 0;
      },
      segments);
  std::vector<std::uintptr_t> addresses;
  for (const auto& segment : segments)
    for (int i = 0; i < 500; ++i) addresses.push_back(segment.start + 16 + segment.size * i / 500);
  return addresses;
}

void BM_symbolize_1000_cached(benchmark::State& state) {
  const auto addresses = distinct_addresses();
  kairos::backtrace_symbolizer symbolizer;
  for (const auto address : addresses) symbolizer.resolve(address);
  for (auto _ : state)
    for (const auto address : addresses) benchmark::DoNotOptimize(symbolizer.resolve(address).line);
}
BENCHMARK(BM_symbolize_1000_cached)->Unit(benchmark::kMicrosecond);

void BM_symbolize_1000_uncached(benchmark::State& state) {
  const auto addresses = distinct_addresses();
  kairos::backtrace_symbolizer symbolizer;
  for (const auto address : addresses) symbolizer.resolve_uncached(address);  // libdw's tables parsed
  for (auto _ : state)
    for (const auto address : addresses) benchmark::DoNotOptimize(symbolizer.resolve_uncached(address).line);
}
BENCHMARK(BM_symbolize_1000_uncached)->Unit(benchmark::kMillisecond);

void BM_symbolize_1000_cold(benchmark::State& state) {
  const auto addresses = distinct_addresses();
  for (auto _ : state) {
    kairos::backtrace_symbolizer symbolizer;  // new libdw session: modules scanned, DWARF re-read
    for (const auto address : addresses) benchmark::DoNotOptimize(symbolizer.resolve(address).line);
  }
}
BENCHMARK(BM_symbolize_1000_cold)->Unit(benchmark::kMillisecond)->Iterations(3);

// Side by side: each round times every contender once, in turn; the ratio is taken per round.
using kairos::benchmarks::median;

template <class Work>
double seconds_for(Work&& work) {
  const auto begin = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

void print_capture_ratios() {
  constexpr int rounds = 11, captures = 20000;
  std::vector<double> vs_libgcc, vs_glibc, kairos_ns, walk_vs_libgcc, walk_ns, tables_vs_libgcc, tables_ns,
      libunwind_ns;
  int frames = 0, libgcc_frames = 0, walked_frames = 0, table_frames = 0;
  at_depth(chain_depth, [&] {
    frames = capture_kairos();
    libgcc_frames = capture_libgcc();
    walked_frames = capture_frame_pointers();
    table_frames = capture_tables();
    for (int round = 0; round < rounds; ++round) {
      const double kairos = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_kairos());
      });
      const double libgcc = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_libgcc());
      });
      const double glibc = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_glibc());
      });
      const double walk = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_frame_pointers());
      });
      const double tables = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_tables());
      });
      const double libunwind = seconds_for([] {
        for (int i = 0; i < captures; ++i) benchmark::DoNotOptimize(capture_libunwind());
      });
      libunwind_ns.push_back(libunwind / captures * 1e9);
      kairos_ns.push_back(kairos / captures * 1e9);
      walk_ns.push_back(walk / captures * 1e9);
      vs_libgcc.push_back(kairos / libgcc);
      vs_glibc.push_back(kairos / glibc);
      walk_vs_libgcc.push_back(walk / libgcc);
      tables_ns.push_back(tables / captures * 1e9);
      tables_vs_libgcc.push_back(tables / libgcc);
    }
  });
  std::printf(
      "capture of a %d-frame stack: kairos::backtrace %.0f ns by its %s path, libunwind's unw_backtrace %.0f ns "
      "(median of %d)\n",
      frames, median(kairos_ns), std::string(kairos::to_string(kairos::backtrace<64>::record().path())).c_str(),
      median(libunwind_ns), rounds);
  std::printf("ratio kairos::backtrace vs libgcc _Unwind_Backtrace: %.3f (median of %d)\n", median(vs_libgcc), rounds);
  std::printf("ratio kairos::backtrace vs glibc backtrace(): %.3f (median of %d)\n", median(vs_glibc), rounds);
  std::printf("frame-pointer walk: %.0f ns for %d of the %d frames libgcc finds (median of %d)\n", median(walk_ns),
              walked_frames, libgcc_frames, rounds);
  std::printf("ratio frame-pointer walk vs libgcc _Unwind_Backtrace: %.3f (median of %d)\n", median(walk_vs_libgcc),
              rounds);
  // libgcc's count includes the frame of capture_libgcc's own callee, the tables' starts in capture_tables.
  std::printf("kairos unwind tables: %.0f ns for %d frames%s (median of %d)\n", median(tables_ns),
              table_frames < 0 ? -table_frames : table_frames, table_frames < 0 ? ", walk unfinished" : "", rounds);
  std::printf("ratio kairos unwind tables vs libgcc _Unwind_Backtrace: %.3f (median of %d)\n", median(tables_vs_libgcc),
              rounds);
}

void print_symbolization_ratios() {
  constexpr int rounds = 7;
  const auto addresses = distinct_addresses();
  kairos::backtrace_symbolizer symbolizer;
  std::size_t with_source = 0, with_function = 0;
  for (const auto address : addresses) {
    const auto& symbol = symbolizer.resolve(address);
    with_source += symbol.has_source();
    with_function += symbol.has_function();
  }
  std::vector<double> uncached_vs_cached, cached_us, uncached_us;
  for (int round = 0; round < rounds; ++round) {
    const double cached = seconds_for([&] {
      for (const auto a : addresses) benchmark::DoNotOptimize(symbolizer.resolve(a).line);
    });
    const double uncached = seconds_for([&] {
      for (const auto a : addresses) benchmark::DoNotOptimize(symbolizer.resolve_uncached(a).line);
    });
    cached_us.push_back(cached * 1e6);
    uncached_us.push_back(uncached * 1e6);
    uncached_vs_cached.push_back(uncached / cached);
  }
  std::printf(
      "symbolization of %zu distinct addresses (%zu named, %zu with file:line): cached %.0f us, uncached %.0f us\n",
      addresses.size(), with_function, with_source, median(cached_us), median(uncached_us));
  std::printf("ratio symbolization uncached vs cached: %.1f (median of %d)\n", median(uncached_vs_cached), rounds);
}

}  // namespace

int main(int argc, char** argv) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  glibc_backtrace = reinterpret_cast<glibc_backtrace_function>(dlsym(libc, "backtrace"));
  kairos::backtrace_prewarm();
  kairos::unwind_tables_register_thread();
  kairos::build_unwind_tables(true);  // every loaded module's functions: a warm run's tables
  void* warm[64];
  glibc_backtrace(warm, 64);  // glibc loads libgcc_s on its first call
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_capture_ratios();
  print_symbolization_ratios();
  return 0;
}
