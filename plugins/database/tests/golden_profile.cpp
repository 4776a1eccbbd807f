// kairos_golden_profile DIR: the fixed profile databases the outputs' golden test renders
// (golden_outputs_tests.py, plugins/database/tests/golden/). Every value is a formula of its index,
// never a random draw or a clock (std::uniform_int_distribution differs between standard
// libraries), so the same source writes the same rows everywhere:
//   DIR/single.db  one process as kairos-run writes it: three threads (one kairos's own), three
//                  time windows, samples with stacks (native, Python, JIT frames and names that
//                  need escaping), wall-time samples, regions (counted calls on one thread, rows on
//                  the other), annotations, counters, process sampling, GPU work, causal
//                  experiments, and the metadata the coverage, children and summary lines read
//   DIR/ranks.db   two MPI ranks of one launch, with MPI calls, as kairos-merge leaves them
//   DIR/capped.db  single.db's rows with a KAIROS_TRACE_MAX_BYTES the Chrome trace reaches
#include <array>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database.hpp>
#include <kairos/plugins/database/metadata_keys.hpp>

namespace db = kairos::database;
namespace fs = std::filesystem;
namespace key = db::metadata_key;

namespace {

constexpr std::int64_t origin_ns = 10'000'000'000;  // the process's start on CLOCK_MONOTONIC
constexpr std::int64_t sample_period_ns = 1'000'000;
constexpr int samples_per_thread = 240;

struct function_entry {
  std::string_view name, module, file, language;
};
// Function k lives at 0x1000 + 0x100 k.
constexpr std::array<function_entry, 9> functions{{
    {"main", "/usr/bin/app", "app.cpp", "native"},
    {"solve(int)", "/usr/bin/app", "app.cpp", "native"},
    {"step<double, 3>", "/usr/bin/app", "step.hpp", "native"},
    {"compute \"inner\" & <outer>", "/usr/bin/app", "", "native"},
    {"read_input", "/usr/lib/libio.so", "", "native"},
    {"memcpy", "/usr/lib/libc.so.6", "", "native"},
    {"train (model.py:12)", "model.py", "model.py", "python"},
    {"jitted_loop", "", "", "jit"},
    {"[kairos]", "", "", "native"},
}};
constexpr std::uint64_t address_of(std::size_t function) { return 0x1000 + 0x100 * function; }

db::frame_info symbolize(std::uint64_t address) {
  const auto index = static_cast<std::size_t>((address - 0x1000) / 0x100);
  const auto& entry = functions.at(index);
  db::frame_info info;
  info.address = address;
  info.module = entry.module;
  info.offset = entry.module.empty() ? 0 : address - 0x1000 + 0x40;
  info.function = entry.name;
  info.file = entry.file;
  info.line = entry.file.empty() ? 0 : static_cast<std::uint32_t>(10 + index);
  info.language = entry.language;
  return info;
}

// The program's stacks, leaf first, main last.
std::vector<std::int64_t> add_stacks(db::profile_writer& writer) {
  const std::vector<std::vector<std::size_t>> stacks{{0},       {1, 0},       {2, 1, 0}, {3, 2, 1, 0},
                                                     {3, 1, 0}, {4, 0},       {5, 4, 0}, {5, 3, 2, 1, 0},
                                                     {6, 1, 0}, {7, 2, 1, 0}, {8, 0}};
  std::vector<std::int64_t> ids;
  for (const auto& stack : stacks) {
    std::vector<std::uint64_t> addresses;
    for (const auto function : stack) addresses.push_back(address_of(function));
    ids.push_back(writer.add_stack(addresses));
  }
  return ids;
}

void set_run_metadata(db::profile_writer& writer, std::string_view trace_limit) {
  writer.set_metadata("command", "/usr/bin/app --size 3");
  writer.set_metadata("host", "node-7");
  writer.set_metadata("end_reason", "exit");
  writer.set_metadata("setting.KAIROS_SAMPLING_FREQ", "1000");
  writer.set_metadata("setting.KAIROS_LAUNCH_DATE", "20261123-111210");
  writer.set_metadata("setting.KAIROS_OUTPUT_FORMATS", "db,text,html");
  writer.set_metadata("setting.KAIROS_TRACE_PERIODS", "0.05:0.06,0.12:0.2");
  if (!trace_limit.empty()) writer.set_metadata("setting.KAIROS_TRACE_MAX_BYTES", trace_limit);
  writer.set_metadata(key::sampling_cpu_source, "perf task-clock");
  writer.set_metadata(key::program_cpu_ns, "900000000");
  writer.set_metadata(key::unsampled_cpu_ns, "40000000");
  writer.set_metadata(key::unsampled_threads, "1");
  writer.set_metadata(key::kairos_own_cpu_ns, "12000000");
  writer.set_metadata(key::lost_cpu_ns, "3000000");
  writer.set_metadata(key::dropped_samples, "3");
  writer.set_metadata(key::before_sampling_cpu_ns, "25000000");
  writer.set_metadata(key::paused_cpu_ns, "80000000");
  writer.set_metadata(key::after_last_sample_cpu_ns, "2000000");
  writer.set_metadata(key::signal_handler_cpu_ns, "1500000");
  writer.set_metadata(key::weights_shortfall_ns, "-4000000");
  writer.set_metadata(key::clock_boottime_monotonic_ns, "15000000000 10000000000");
  writer.set_metadata(key::children_unprofiled_by_name, "gzip\t1\t2300000000\nsed\t2\t1000000");
}

// Three windows: the first two opened, the third planned and never opened.
void add_windows(db::profile_writer& writer) {
  writer.add_window({1, "0.05:0.06", "wall", 50'000'000, 60'000'000, 50'000'000, 60'000'000, origin_ns + 50'000'000,
                     origin_ns + 60'000'000});
  writer.add_window({2, "0.12:0.2", "wall", 120'000'000, 200'000'000, 120'000'100, 199'999'000, origin_ns + 120'000'100,
                     origin_ns + 199'999'000});
  writer.add_window(
      {3, "5:6", "wall", 5'000'000'000, 6'000'000'000, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
}

std::int64_t window_at(std::int64_t time_ns) {
  const auto offset = time_ns - origin_ns;
  if (offset >= 50'000'000 && offset < 60'000'000) return 1;
  if (offset >= 120'000'100 && offset < 199'999'000) return 2;
  return 0;
}

void add_samples(db::profile_writer& writer, const std::vector<std::int64_t>& threads,
                 const std::vector<std::int64_t>& stacks) {
  for (int index = 0; index < samples_per_thread; ++index) {
    for (std::size_t t = 0; t < threads.size(); ++t) {
      const auto time_ns = origin_ns + 2'000'000 + index * sample_period_ns + static_cast<std::int64_t>(t) * 137'000;
      const auto weight_ns = 900'000 + (index * 7919 + static_cast<int>(t) * 104'729) % 200'000;
      // The kairos thread's samples are all [kairos]; the program's walk their stacks unevenly.
      const auto stack = t == 2 ? stacks.back() : stacks[static_cast<std::size_t>((index * index + 3 * t) % 10)];
      if (index % 53 == 7 && t == 0)
        writer.add_sample(threads[t], time_ns, weight_ns, -1, window_at(time_ns));  // no stack
      else
        writer.add_sample(threads[t], time_ns, weight_ns, stack, window_at(time_ns));
      if (index % 4 == 0 && t < 2)
        writer.add_realtime_sample(threads[t], time_ns, 4 * sample_period_ns, stack, window_at(time_ns));
    }
  }
}

// The main thread's calls are counted (call_tree) and its long ones stored; the worker's are rows
// only, as a killed program leaves them.
void add_regions(db::profile_writer& writer, std::int64_t main_thread, std::int64_t worker) {
  for (int iteration = 0; iteration < 12; ++iteration) {
    const auto start = origin_ns + 5'000'000 + iteration * 20'000'000;
    const auto window = window_at(start);
    writer.add_region(main_thread, "iteration", start, start + 18'000'000, 0, window);
    writer.add_region(main_thread, "assemble", start + 1'000'000, start + 6'000'000, 1, window);
    writer.add_region(main_thread, "omp parallel", start + 7'000'000, start + 16'000'000 + iteration * 10'000, 1,
                      window);
    writer.add_function_region(main_thread, address_of(2), start + 8'000'000, start + 9'000'000, 2, window);
    writer.add_region(worker, iteration % 3 == 0 ? "io <batch>" : "io", start + 2'000'000,
                      start + 2'000'000 + (iteration + 1) * 700'000, 0, window);
    writer.add_region(worker, "decode", start + 2'100'000, start + 2'500'000, 1, window);
  }
  // A region the second window cut at its opening.
  writer.add_region(worker, "late", origin_ns + 120'000'100, origin_ns + 125'000'000, 0, 2, 1);
  const std::vector<db::profile_writer::call_tree_input> calls{
      {1, 0, "iteration", 0, 0, 12, 216'000'000, 18'000'000, 18'000'000, 12 * 18.0 * 18.0},
      {2, 1, "assemble", 0, 0, 12, 60'000'000, 5'000'000, 5'000'000, 12 * 25.0},
      {3, 1, "omp parallel", 0, 0, 12, 108'660'000, 9'000'000, 9'110'000, 12 * 81.9},
      {4, 3, "", address_of(2), 0, 480, 24'000'000, 40'000, 1'000'000, 3.1},
  };
  writer.add_call_tree(main_thread, calls);
  writer.add_region_kind("omp parallel", "openmp");
  writer.add_openmp_thread_time("omp parallel", main_thread, 12, 100'000'000, 8'660'000);
  writer.add_annotation_range(main_thread, worker, "nvtx", "load \"model\"", origin_ns + 3'000'000,
                              origin_ns + 33'000'000, 0);
}

void add_counters_and_metrics(db::profile_writer& writer, std::int64_t main_thread, std::int64_t worker) {
  for (int tick = 0; tick < 26; ++tick) {
    const auto time_ns = origin_ns + tick * 10'000'000;
    const auto window = window_at(time_ns);
    writer.add_counter(main_thread, time_ns, "PAPI_TOT_INS", 1.5e6 * tick, window);
    writer.add_process_metric(time_ns, "memory_resident_bytes", std::nullopt, std::nullopt,
                              64.0 * 1024 * 1024 + tick * 524288.0, window);
    writer.add_process_metric(time_ns, "thread_cpu_percent", worker, std::nullopt, 20.0 + (tick % 5) * 15.5, window);
    writer.add_process_metric(time_ns, "cpu_frequency_mhz", std::nullopt, 3, 2400.0 + (tick % 3) * 100.0, window);
    writer.add_process_metric(time_ns, "gpu_power_watts", std::nullopt, 0, 75.25 + tick, window);
  }
}

void add_gpu(db::profile_writer& writer, std::int64_t main_thread) {
  const auto device =
      writer.add_gpu_device({"hip", 0, "AMD Instinct MI210", "gfx90a", 68'702'699'520, 104, 1'700'000, 1'600'000});
  constexpr std::array<std::string_view, 3> kernels{"gemm_kernel<float>", "reduce", "scale & shift"};
  for (int launch = 0; launch < 9; ++launch) {
    const auto call_ns = origin_ns + 30'000'000 + launch * 15'000'000;
    const db::gpu_work_origin origin{main_thread, std::nullopt, call_ns, 100 + launch, window_at(call_ns)};
    writer.add_gpu_api_call("hip", "hipLaunchKernel", call_ns, call_ns + 20'000, origin);
    db::gpu_kernel_info kernel;
    kernel.name = kernels[static_cast<std::size_t>(launch % 3)];
    kernel.stream = launch % 2 == 0 ? 0 : 0x7f00aa;
    kernel.start_ns = call_ns + 50'000;
    kernel.end_ns = kernel.start_ns + 2'000'000 + launch * 125'000;
    kernel.grid = {256, launch + 1, 1};
    kernel.block = {128, 1, 1};
    kernel.shared_bytes = 4096;
    writer.add_gpu_kernel(device, kernel, origin);
    const auto copy_start = kernel.end_ns + 100'000;
    writer.add_gpu_copy(device,
                        {launch % 3 == 2 ? "memset" : (launch % 2 == 0 ? "HtoD" : "DtoH"), kernel.stream,
                         (launch + 1) * 1'048'576, copy_start, copy_start + 300'000 + launch * 10'000, launch % 2 == 1},
                        origin);
  }
}

// Two lines of `step`, each slowed or sped up virtually in turn, with one throughput point.
void add_causal(db::profile_writer& writer) {
  constexpr std::array<std::string_view, 2> locations{"step.hpp:12", "app.cpp:11"};
  constexpr std::array<double, 4> speedups{0.0, 0.2, 0.4, 0.0};
  std::int64_t start = origin_ns + 10'000'000;
  for (int round = 0; round < 5; ++round)
    for (std::size_t where = 0; where < locations.size(); ++where)
      for (std::size_t s = 0; s < speedups.size(); ++s) {
        const auto visits = 100 + static_cast<std::int64_t>(speedups[s] * (where == 0 ? 60 : 5)) + round;
        const db::causal_progress_info progress{"iteration", "throughput", visits, 0, 0, 0};
        writer.add_causal_experiment({"line", locations[where], speedups[s], start, 20'000'000 - round * 1000,
                                      static_cast<std::int64_t>(speedups[s] * 1e6), 40 + round, 0},
                                     std::span{&progress, 1});
        start += 21'000'000;
      }
  writer.add_causal_samples("line", "step.hpp:12", 400);
  writer.add_causal_samples("line", "app.cpp:11", 90);
}

void write_single(const fs::path& path, std::string_view trace_limit) {
  db::profile_writer writer{path.string(), symbolize};
  set_run_metadata(writer, trace_limit);
  const auto process = writer.add_process({4242, 4200, std::nullopt, "node-7", "/usr/bin/app --size 3", origin_ns});
  const auto main_thread = writer.add_thread(process, {0, 0, 4242, "app", origin_ns});
  const auto worker = writer.add_thread(process, {1, 1, 4243, "worker <io>", origin_ns + 1'000'000});
  const auto kairos_thread = writer.add_thread(process, {2, 1'000'000, 4244, "kairos-writer", origin_ns});
  add_windows(writer);
  const auto stacks = add_stacks(writer);
  add_samples(writer, {main_thread, worker, kairos_thread}, stacks);
  add_regions(writer, main_thread, worker);
  add_counters_and_metrics(writer, main_thread, worker);
  add_gpu(writer, main_thread);
  add_causal(writer);
  writer.end_thread(worker, origin_ns + 250'000'000);
  writer.end_process(process, origin_ns + 262'000'000);
  writer.count_window_rows();
  writer.commit();
}

// Rank 1 does twice rank 0's work in `solve`, and waits less in MPI_Wait.
void write_ranks(const fs::path& path) {
  db::profile_writer writer{path.string(), symbolize};
  set_run_metadata(writer, {});
  const auto stacks = add_stacks(writer);
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    const auto start_ns = origin_ns + rank * 1'000;
    const auto process = writer.add_process(
        {5000 + rank, 4999, rank, fmt::format("node-{}", rank), "/usr/bin/app --size 3", start_ns, 2, "launch-1"});
    std::vector<std::int64_t> threads;
    for (std::int64_t t = 0; t < 2; ++t)
      threads.push_back(writer.add_thread(process, {t, t, 5000 + rank * 10 + t, t == 0 ? "app" : "", start_ns}));
    for (int index = 0; index < 150; ++index)
      for (std::size_t t = 0; t < threads.size(); ++t) {
        const auto time_ns = start_ns + index * sample_period_ns + static_cast<std::int64_t>(t) * 91'000;
        const auto stack = stacks[static_cast<std::size_t>((index + rank * index % 3 + 2 * t) % 8)];
        writer.add_sample(threads[t], time_ns, 1'000'000 + rank * (index % 7) * 50'000, stack);
      }
    for (int call = 0; call < 10; ++call) {
      const auto start = start_ns + 4'000'000 + call * 14'000'000;
      writer.add_region(threads[0], "solve", start, start + 8'000'000 * (rank + 1), 0);
      writer.add_mpi_call(threads[0], "MPI_Wait", start + 8'000'000 * (rank + 1),
                          start + 8'000'000 * (rank + 1) + (2 - rank) * 2'000'000, std::nullopt, std::nullopt);
      writer.add_mpi_call(threads[0], "MPI_Send", start + 12'500'000, start + 12'600'000, 65'536 * (call + 1),
                          1 - rank);
    }
    writer.end_process(process, start_ns + 160'000'000);
  }
  writer.commit();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "[kairos] usage: kairos_golden_profile DIR (writes DIR/single.db, DIR/ranks.db, DIR/capped.db)\n";
    return 2;
  }
  const fs::path directory{argv[1]};
  try {
    fs::create_directories(directory);
    for (const char* name : {"single.db", "ranks.db", "capped.db"}) fs::remove(directory / name);
    write_single(directory / "single.db", {});
    write_ranks(directory / "ranks.db");
    write_single(directory / "capped.db", "60000");
  } catch (const std::exception& error) {
    std::cerr << "[kairos] " << error.what() << "\n";
    return 1;
  }
  return 0;
}
