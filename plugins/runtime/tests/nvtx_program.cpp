// A program annotated with NVTX v3 (header-only, no GPU), knowing nothing of kairos
// (tests/annotations_tests.py, benchmarks/annotations/). NVTX calls the tool that
// NVTX_INJECTION64_PATH names, if any; else every call is a no-op.
//   nvtx_program nested OUTER INNER   OUTER ranges "outer", each around INNER ranges "inner" (a
//                                     registered string in the domain "solver": "solver: inner"),
//                                     a mark "tick" in each outer range, and two start/end ranges
//                                     "phase" (the second ended on another thread)
//   nvtx_program ranges COUNT         COUNT pushed and popped ranges (the cost of a range)
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

volatile long sink = 0;

void work(long amount) {
  for (long i = 0; i < amount; ++i) sink = sink + i;
}

int nested(int outer, int inner) {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("solver");
  nvtxStringHandle_t inner_name = nvtxDomainRegisterStringA(domain, "inner");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = inner_name;
  const nvtxRangeId_t first_phase = nvtxRangeStartA("phase");
  for (int i = 0; i < outer; ++i) {
    nvtxRangePushA("outer");
    nvtxMarkA("tick");
    for (int j = 0; j < inner; ++j) {
      nvtxDomainRangePushEx(domain, &attributes);
      work(1000);
      nvtxDomainRangePop(domain);
    }
    nvtxRangePop();
  }
  nvtxRangeEnd(first_phase);
  const nvtxRangeId_t second_phase = nvtxRangeStartA("phase");
  work(1000);
  std::thread ender{[second_phase] { nvtxRangeEnd(second_phase); }};
  ender.join();
  nvtxDomainDestroy(domain);
  std::printf("outer %d inner %d\n", outer, inner);
  return 0;
}

int ranges(long count) {
  for (long i = 0; i < count; ++i) {
    nvtxRangePushA("range");
    sink = sink + i;
    nvtxRangePop();
  }
  std::printf("ranges %ld\n", count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "nested") == 0) return nested(std::atoi(argv[2]), std::atoi(argv[3]));
  if (argc == 3 && std::strcmp(argv[1], "ranges") == 0) return ranges(std::atol(argv[2]));
  std::fprintf(stderr, "usage: %s nested OUTER INNER | ranges COUNT\n", argv[0]);
  return 2;
}
