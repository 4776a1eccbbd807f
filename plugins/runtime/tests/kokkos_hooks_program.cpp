// Calls the Kokkos Tools hooks the way Kokkos's runtime does (tests/annotations_tests.py): the
// library KOKKOS_TOOLS_LIBS names is opened with dlopen, its kokkosp_ functions looked up with
// dlsym (each optional), kokkosp_init_library called first and kokkosp_finalize_library last; a
// kernel's end gets the id its begin wrote. Without the variable it runs the same, untooled.
//   kokkos_hooks_program STEPS   a profile region "solve" around STEPS x (parallel_for "axpy",
//                                parallel_reduce "dot", a fence "step fence"), one scan "prefix",
//                                an event "checkpoint" and a profile section "io" started twice
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

struct hooks {
  void (*init)(int, std::uint64_t, std::uint32_t, void*) = nullptr;
  void (*finalize)() = nullptr;
  void (*begin_for)(const char*, std::uint32_t, std::uint64_t*) = nullptr;
  void (*end_for)(std::uint64_t) = nullptr;
  void (*begin_reduce)(const char*, std::uint32_t, std::uint64_t*) = nullptr;
  void (*end_reduce)(std::uint64_t) = nullptr;
  void (*begin_scan)(const char*, std::uint32_t, std::uint64_t*) = nullptr;
  void (*end_scan)(std::uint64_t) = nullptr;
  void (*begin_fence)(const char*, std::uint32_t, std::uint64_t*) = nullptr;
  void (*end_fence)(std::uint64_t) = nullptr;
  void (*push_region)(const char*) = nullptr;
  void (*pop_region)() = nullptr;
  void (*event)(const char*) = nullptr;
  void (*create_section)(const char*, std::uint32_t*) = nullptr;
  void (*start_section)(std::uint32_t) = nullptr;
  void (*stop_section)(std::uint32_t) = nullptr;
};

template <class Function>
void find(void* library, Function& function, const char* name) {
  function = reinterpret_cast<Function>(dlsym(library, name));
}

hooks load() {
  hooks found;
  const char* path = std::getenv("KOKKOS_TOOLS_LIBS");
  if (path == nullptr || *path == '\0') return found;
  void* library = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) return found;
  find(library, found.init, "kokkosp_init_library");
  find(library, found.finalize, "kokkosp_finalize_library");
  find(library, found.begin_for, "kokkosp_begin_parallel_for");
  find(library, found.end_for, "kokkosp_end_parallel_for");
  find(library, found.begin_reduce, "kokkosp_begin_parallel_reduce");
  find(library, found.end_reduce, "kokkosp_end_parallel_reduce");
  find(library, found.begin_scan, "kokkosp_begin_parallel_scan");
  find(library, found.end_scan, "kokkosp_end_parallel_scan");
  find(library, found.begin_fence, "kokkosp_begin_fence");
  find(library, found.end_fence, "kokkosp_end_fence");
  find(library, found.push_region, "kokkosp_push_profile_region");
  find(library, found.pop_region, "kokkosp_pop_profile_region");
  find(library, found.event, "kokkosp_profile_event");
  find(library, found.create_section, "kokkosp_create_profile_section");
  find(library, found.start_section, "kokkosp_start_profile_section");
  find(library, found.stop_section, "kokkosp_stop_profile_section");
  return found;
}

volatile double sink = 0;
double kernel(int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += i * 0.5;
  sink = sum;
  return sum;
}

// A kernel as Kokkos dispatches one: begin (the tool writes an id), run, end with that id.
template <class Begin, class End>
void dispatch(Begin begin, End end, const char* name) {
  std::uint64_t id = 0;
  if (begin) begin(name, 0, &id);
  kernel(10000);
  if (end) end(id);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const auto tool = load();
  if (tool.init) tool.init(0, 20211015, 0, nullptr);
  std::uint32_t io = 0;
  if (tool.create_section) tool.create_section("io", &io);
  if (tool.push_region) tool.push_region("solve");
  for (int step = 0; step < steps; ++step) {
    dispatch(tool.begin_for, tool.end_for, "axpy");
    dispatch(tool.begin_reduce, tool.end_reduce, "dot");
    dispatch(tool.begin_fence, tool.end_fence, "step fence");
  }
  dispatch(tool.begin_scan, tool.end_scan, "prefix");
  if (tool.pop_region) tool.pop_region();
  if (tool.event) tool.event("checkpoint");
  for (int write = 0; write < 2; ++write) {
    if (tool.start_section) tool.start_section(io);
    kernel(1000);
    if (tool.stop_section) tool.stop_section(io);
  }
  if (tool.finalize) tool.finalize();
  std::printf("steps %d\n", steps);
  return 0;
}
