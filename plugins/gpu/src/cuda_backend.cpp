// The CUDA backend: CUDA work observed through CUPTI, loaded at run time (dlopen, never linked:
// libkairos.so is preloaded into programs that may have no CUDA at all).
//
// Two CUPTI interfaces, each for what it alone gives:
// - The activity API gives the device's view: kernels (CONCURRENT_KERNEL), copies (MEMCPY), memsets
//   (MEMSET), devices (DEVICE) and, when activity is kept, the runtime and driver API calls (RUNTIME,
//   DRIVER). CUPTI hands them over in buffers (8 MiB each) when they are complete: to its own worker
//   thread when a buffer fills, to whoever calls cuptiActivityFlushAll (poll(), drain()) otherwise.
// - The callback API (runtime and driver domains) runs on the calling thread at each API call's
//   entry and exit, which is the only place the caller is known: at the entry of a launch, a copy or
//   a memset the call site is captured (capture_call_site) and the thread's tallies and device-time
//   ledger entry taken (tally_kernel, tally_copy), keyed by CUPTI's correlation id; at the exit of the
//   outermost call the host time inside it is tallied (tally_api). When the work's activity record
//   arrives (carrying the same correlation id) it is emitted with that call site and its ledger entry
//   resolved with its device time (end - start).
//
// Nesting: the runtime calls the driver (cudaLaunchKernel calls cuLaunchKernel), and the callback
// API reports both. Only the outermost call counts: it is the one tallied (the thread's depth of
// calls tells). CUPTI 13.0 gives the nested driver calls the runtime call's correlation id and no
// activity record of their own, so only the outermost calls become api_calls. Should a nested driver
// launch or copy come with an id of its own (CUpti_ActivityMemcpy6 still has a runtimeCorrelationId
// besides its correlationId), that id is aliased to the outer call's, and the work's record finds
// its call site by either.
//
// Clocks: CUPTI stamps records on its own clock (cuptiGetTimestamp: CLOCK_REALTIME on Linux; device
// timestamps are converted to it by CUPTI). kairos maps it onto CLOCK_MONOTONIC with an offset: the
// host clock is read before and after a cuptiGetTimestamp read, five times; the pair with the
// narrowest bracket wins, and the CUPTI reading is taken to have happened at that bracket's midpoint
// (off by at most half the bracket: two clock reads and a cuptiGetTimestamp, well under a
// microsecond). offset = midpoint - CUPTI reading; a record's host time is its CUPTI time + offset.
// The offset is measured at start() and again at every poll(), so a step of the realtime clock
// (settimeofday, a leap second) is followed from the next poll on (NTP's slewing moves both clocks
// alike); the records converted at a poll use the offset of that moment.
//
// Threads: CUPTI calls the callbacks from any thread (the API callbacks on the program's threads,
// the buffer callbacks on its worker or on the thread flushing); the correlation maps are behind one
// mutex, never held while calling the collector or flushing.
#include "backend.hpp"
#include "work_table.hpp"

#include <atomic>
#include <cstdint>

#if KAIROS_GPU_HAVE_CUPTI

#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <kairos/demangle.hpp>

#include <cupti.h>  // with the API parameters' structures (generated_cuda*_meta.h, no include guards)

namespace kairos::gpu::detail {
namespace {

constexpr std::size_t buffer_bytes = 8u << 20;           // each activity buffer: 8 MiB
constexpr std::size_t buffer_alignment = 8;              // CUPTI's ACTIVITY_RECORD_ALIGNMENT
constexpr std::int64_t flush_interval_ns = 100'000'000;  // poll(): a non-forced flush at most every 100 ms

std::atomic<std::uint64_t> dropped_records{0};

// The CUPTI functions kairos calls, found with dlsym (types from CUPTI's headers).
struct cupti_functions {
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;  // optional: gettid in API records
};

// The driver's, to describe the devices at start() (optional: only when the driver is initialised).
struct driver_functions {
  decltype(&cuDeviceGetCount) get_count = nullptr;
  decltype(&cuDeviceGet) get = nullptr;
  decltype(&cuDeviceGetName) get_name = nullptr;
  decltype(&cuDeviceTotalMem_v2) total_memory = nullptr;
  decltype(&cuDeviceGetAttribute) get_attribute = nullptr;
};

// What an API call issues, from its callback id and parameters (read at its entry).
struct work {
  work_kind kind = work_kind::call;
  copy_kind copy = copy_kind::unknown;
  std::uint64_t bytes = 0;
};

static_assert(numbered_as_memcpy_direction<cudaMemcpyKind>({cudaMemcpyHostToHost, cudaMemcpyHostToDevice,
                                                            cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice,
                                                            cudaMemcpyDefault}),
              "cudaMemcpyKind numbers the directions as work_table.hpp reads them");

copy_kind kind_of(CUmemorytype source, CUmemorytype destination) {
  const bool from_host = source == CU_MEMORYTYPE_HOST, to_host = destination == CU_MEMORYTYPE_HOST;
  if (source == CU_MEMORYTYPE_UNIFIED || destination == CU_MEMORYTYPE_UNIFIED) return copy_kind::unknown;
  if (from_host) return to_host ? copy_kind::host_to_host : copy_kind::host_to_device;
  return to_host ? copy_kind::device_to_host : copy_kind::device_to_device;
}

copy_kind kind_of_activity(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return copy_kind::host_to_device;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return copy_kind::device_to_host;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return copy_kind::device_to_device;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return copy_kind::host_to_host;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return copy_kind::peer;
    default:
      return copy_kind::unknown;
  }
}

// The readers of the tables' rows: each takes a call's functionParams (CUPTI's structure of its
// arguments, named `<function>_params`).
template <class Params>
const Params& params_of(const void* parameters) {
  return *static_cast<const Params*>(parameters);
}

template <class Params>
copied counted(const void* parameters) {
  const auto& p = params_of<Params>(parameters);
  return {copy_kind_of(p.kind), p.count};
}

template <class Params>
copied counted_2d(const void* parameters) {
  const auto& p = params_of<Params>(parameters);
  return {copy_kind_of(p.kind), std::uint64_t{p.width} * p.height};
}

copied runtime_3d(const void* parameters) {
  const cudaMemcpy3DParms* p = params_of<cudaMemcpy3D_v3020_params>(parameters).p;
  if (p == nullptr) return {};
  return {copy_kind_of(p->kind), std::uint64_t{p->extent.width} * p->extent.height * p->extent.depth};
}

copied runtime_peer(const void* parameters) {
  return {copy_kind::peer, params_of<cudaMemcpyPeer_v4000_params>(parameters).count};
}

copied runtime_3d_peer(const void* parameters) {
  const cudaMemcpy3DPeerParms* p = params_of<cudaMemcpy3DPeer_v4000_params>(parameters).p;
  return {copy_kind::peer, p ? std::uint64_t{p->extent.width} * p->extent.height * p->extent.depth : 0};
}

copied told_by_record(const void*) { return {}; }

template <class Params>
copied memset_count(const void* parameters) {
  return {copy_kind::memset, params_of<Params>(parameters).count};
}

copied runtime_memset_2d(const void* parameters) {
  const auto& p = params_of<cudaMemset2D_v3020_params>(parameters);
  return {copy_kind::memset, std::uint64_t{p.width} * p.height};
}

copied runtime_memset_3d(const void* parameters) {
  const cudaExtent& e = params_of<cudaMemset3D_v3020_params>(parameters).extent;
  return {copy_kind::memset, std::uint64_t{e.width} * e.height * e.depth};
}

template <copy_kind Kind, class Params>
copied byte_count(const void* parameters) {
  return {Kind, params_of<Params>(parameters).ByteCount};
}

copied driver_2d(const void* parameters) {
  const CUDA_MEMCPY2D* p = params_of<cuMemcpy2D_v2_params>(parameters).pCopy;
  if (p == nullptr) return {};
  return {kind_of(p->srcMemoryType, p->dstMemoryType), std::uint64_t{p->WidthInBytes} * p->Height};
}

copied driver_3d(const void* parameters) {
  const CUDA_MEMCPY3D* p = params_of<cuMemcpy3D_v2_params>(parameters).pCopy;
  if (p == nullptr) return {};
  return {kind_of(p->srcMemoryType, p->dstMemoryType), std::uint64_t{p->WidthInBytes} * p->Height * p->Depth};
}

template <class Params, std::uint64_t ElementBytes>
copied elements(const void* parameters) {
  return {copy_kind::memset, std::uint64_t{params_of<Params>(parameters).N} * ElementBytes};
}

template <class Params, std::uint64_t ElementBytes>
copied elements_2d(const void* parameters) {
  const auto& p = params_of<Params>(parameters);
  return {copy_kind::memset, std::uint64_t{p.Width} * p.Height * ElementBytes};
}

using cuda_row = work_row<CUpti_CallbackId, const void*>;
constexpr cuda_row kernel_row(CUpti_CallbackId id) { return {id, work_kind::kernel}; }
constexpr cuda_row copy_row(CUpti_CallbackId id, copied (*read)(const void*)) { return {id, work_kind::copy, read}; }

// The runtime API's calls that issue work; every other call issues none.
constexpr cuda_row runtime_work[] = {
    // Kernel launches (CUDA 13 adds the <<<>>> launches' own).
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060),
#if CUPTI_API_VERSION >= 130000
    kernel_row(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000),
    kernel_row(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000),
#endif
    // Copies that name their cudaMemcpyKind and byte count (the Async variants' parameters begin
    // alike).
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, &counted<cudaMemcpy_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000, &counted<cudaMemcpy_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &counted<cudaMemcpy_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, &counted<cudaMemcpy_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020, &counted<cudaMemcpyToSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000, &counted<cudaMemcpyToSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020, &counted<cudaMemcpyToSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000, &counted<cudaMemcpyToSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020, &counted<cudaMemcpyFromSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000, &counted<cudaMemcpyFromSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020, &counted<cudaMemcpyFromSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
             &counted<cudaMemcpyFromSymbol_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020, &counted_2d<cudaMemcpy2D_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000, &counted_2d<cudaMemcpy2D_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020, &counted_2d<cudaMemcpy2D_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000, &counted_2d<cudaMemcpy2D_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020, &runtime_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000, &runtime_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020, &runtime_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000, &runtime_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, &runtime_peer),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000, &runtime_peer),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000, &runtime_3d_peer),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000, &runtime_3d_peer),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000, &runtime_3d_peer),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000, &runtime_3d_peer),
    // Arrays and batches: copies of unknown kind and size (the records tell them).
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080, &told_by_record),
#if CUPTI_API_VERSION >= 130000
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000, &told_by_record),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000, &told_by_record),
#endif
    // Memsets.
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, &memset_count<cudaMemset_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000, &memset_count<cudaMemset_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &memset_count<cudaMemset_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, &memset_count<cudaMemset_v3020_params>),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020, &runtime_memset_2d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000, &runtime_memset_2d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020, &runtime_memset_2d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000, &runtime_memset_2d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020, &runtime_memset_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000, &runtime_memset_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020, &runtime_memset_3d),
    copy_row(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000, &runtime_memset_3d),
};

// The driver API's.
constexpr cuda_row driver_work[] = {
    // Kernel launches.
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunch),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx),
    kernel_row(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz),
    // Two addresses then the byte count, in each of these (cuMemcpy: unified addressing, the record
    // tells the kind).
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, &byte_count<copy_kind::host_to_device, cuMemcpyHtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
             &byte_count<copy_kind::host_to_device, cuMemcpyHtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
             &byte_count<copy_kind::host_to_device, cuMemcpyHtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
             &byte_count<copy_kind::host_to_device, cuMemcpyHtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, &byte_count<copy_kind::device_to_host, cuMemcpyDtoH_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
             &byte_count<copy_kind::device_to_host, cuMemcpyDtoH_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
             &byte_count<copy_kind::device_to_host, cuMemcpyDtoH_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
             &byte_count<copy_kind::device_to_host, cuMemcpyDtoH_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, &byte_count<copy_kind::device_to_device, cuMemcpyDtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
             &byte_count<copy_kind::device_to_device, cuMemcpyDtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
             &byte_count<copy_kind::device_to_device, cuMemcpyDtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
             &byte_count<copy_kind::device_to_device, cuMemcpyDtoD_v2_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, &byte_count<copy_kind::unknown, cuMemcpy_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds, &byte_count<copy_kind::unknown, cuMemcpy_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, &byte_count<copy_kind::unknown, cuMemcpy_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, &byte_count<copy_kind::unknown, cuMemcpy_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer, &byte_count<copy_kind::peer, cuMemcpyPeer_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds, &byte_count<copy_kind::peer, cuMemcpyPeer_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, &byte_count<copy_kind::peer, cuMemcpyPeer_params>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, &byte_count<copy_kind::peer, cuMemcpyPeer_params>),
    // Copies described by a structure.
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz, &driver_2d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2, &driver_3d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds, &driver_3d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2, &driver_3d),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz, &driver_3d),
    // Arrays, 3D peers and batches: copies of unknown kind and size (the records tell them).
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz, &told_by_record),
#if CUPTI_API_VERSION >= 130000
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2, &told_by_record),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz, &told_by_record),
#endif
    // A destination, a value (padded to 8 bytes), then the element count, in each of these.
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, &elements<cuMemsetD8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, &elements<cuMemsetD8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, &elements<cuMemsetD8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz, &elements<cuMemsetD8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2, &elements<cuMemsetD16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds, &elements<cuMemsetD16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async, &elements<cuMemsetD16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz, &elements<cuMemsetD16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2, &elements<cuMemsetD32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds, &elements<cuMemsetD32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, &elements<cuMemsetD32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz, &elements<cuMemsetD32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2, &elements_2d<cuMemsetD2D8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds, &elements_2d<cuMemsetD2D8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async, &elements_2d<cuMemsetD2D8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz, &elements_2d<cuMemsetD2D8_v2_params, 1>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2, &elements_2d<cuMemsetD2D16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds, &elements_2d<cuMemsetD2D16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async, &elements_2d<cuMemsetD2D16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz, &elements_2d<cuMemsetD2D16_v2_params, 2>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2, &elements_2d<cuMemsetD2D32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds, &elements_2d<cuMemsetD2D32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async, &elements_2d<cuMemsetD2D32_v2_params, 4>),
    copy_row(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz, &elements_2d<cuMemsetD2D32_v2_params, 4>),
};

static_assert(ids_distinct_and_below<CUPTI_RUNTIME_TRACE_CBID_SIZE>(runtime_work) &&
                  ids_distinct_and_below<CUPTI_DRIVER_TRACE_CBID_SIZE>(driver_work),
              "a callback id listed twice in a table, or beyond its domain");
constexpr auto runtime_index = row_index<CUPTI_RUNTIME_TRACE_CBID_SIZE>(runtime_work);
constexpr auto driver_index = row_index<CUPTI_DRIVER_TRACE_CBID_SIZE>(driver_work);

work work_of_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  const cuda_row* row = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? find_row(runtime_work, runtime_index, cbid)
                                                              : find_row(driver_work, driver_index, cbid);
  if (row == nullptr) return {};
  if (row->kind != work_kind::copy) return {row->kind};
  const copied copy = row->copy(data->functionParams);
  return {work_kind::copy, copy.kind, copy.bytes};
}

// Work issued and not yet seen in an activity record, by the issuing call's correlation id.
struct pending_work {
  call_site site;
  ledger_entry ledger;
  std::uint32_t alias = 0;  // a nested driver call's id aliased to this one, 0 when none
};

// What the calling thread is inside of (the callback API's entries and exits on this thread).
struct thread_calls {
  std::uint32_t generation = 0;  // the subscription these were counted under
  int depth = 0;
  std::int64_t enter_ns = 0;      // the outermost call's
  std::uint32_t correlation = 0;  // the outermost call's
  bool work = false;              // the outermost call issues a kernel or copy
};
thread_local thread_calls calls;

std::uint64_t callback_key(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return std::uint64_t{static_cast<std::uint32_t>(domain)} << 32 | cbid;
}

class cuda : public backend {
 public:
  runtime_api api() const override { return runtime_api::cuda; }
  bool observing() const override { return observing_.load(std::memory_order_acquire); }
  problem start() override;
  void poll() override;
  void drain(std::int64_t timeout_ns) override;
  void stop() override;
  void forget_after_fork() noexcept override {
    // Only flags: the child's CUPTI (and CUDA) is unusable, its maps and buffers are left as they are.
    forked_.store(true, std::memory_order_relaxed);
    observing_.store(false, std::memory_order_relaxed);
  }

  void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
  void consume(std::uint8_t* buffer, std::size_t valid_bytes);
  void count_dropped(CUcontext context, std::uint32_t stream);

 private:
  std::string describe(CUptiResult result) const;
  problem load_cupti();
  std::vector<device_info> describe_devices();
  bool measure_offset();
  std::int64_t host_ns(std::uint64_t cupti_ns) const {
    return static_cast<std::int64_t>(cupti_ns) + offset_ns_.load(std::memory_order_relaxed);
  }
  bool take_pending(std::uint32_t first, std::uint32_t second, pending_work& taken, std::uint32_t& correlation);
  bool pending_empty();
  std::string_view call_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
  problem enable_kinds();
  void disable_kinds();

  cupti_functions cupti_;
  driver_functions driver_;
  void* library_ = nullptr;  // libcupti, never closed (CUPTI keeps threads)
  std::string library_path_;
  bool callbacks_registered_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_kinds_;
  bool keep_calls_ = false;  // RUNTIME and DRIVER records are collected (activity kept)
  std::atomic<bool> observing_{false};
  std::atomic<bool> forked_{false};
  // Each subscription's number: a thread inside a call when kairos unsubscribed never saw its exit,
  // and starts counting anew under the next subscription.
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::int64_t> offset_ns_{0};
  std::int64_t last_flush_ns_ = 0;

  std::mutex mutex_;  // the three maps
  std::unordered_map<std::uint32_t, pending_work> pending_;
  std::unordered_map<std::uint32_t, std::uint32_t> aliases_;  // nested driver call → outer call
  // API functions' names by callback_key, kept until the process ends (api_call's names are views).
  std::unordered_map<std::uint64_t, std::string> names_;
};

cuda& the_backend() {
  static auto* kept = new cuda;  // CUPTI may call back until the process ends
  return *kept;
}

void CUPTIAPI on_api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  the_backend().on_api(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
}

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size = *buffer ? buffer_bytes : 0;  // no buffer: CUPTI drops the records (and counts them)
  *max_records = 0;                    // as many as fit
}

void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                                  std::size_t valid_bytes) {
  if (buffer && valid_bytes > 0) the_backend().consume(buffer, valid_bytes);
  the_backend().count_dropped(context, stream);
  std::free(buffer);
}

std::string cuda::describe(CUptiResult result) const {
  const char* text = nullptr;
  if (cupti_.result_string == nullptr || cupti_.result_string(result, &text) != CUPTI_SUCCESS || !text)
    return "CUptiResult " + std::to_string(static_cast<int>(result));
  return text;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string{} : path.substr(0, slash + 1);
}

// The records' layouts are those of the headers kairos was built with, and CUPTI lays them out as
// its own version's (CUpti_ActivityKernel10 in 13.0, 11 from 13.3; Device5, then 6 from 13.2): a
// CUPTI of another major or minor version than the headers' is refused. CUDA 13 numbers versions
// xxyyzz (13.0.1: 130001); CUDA 12's were 19..28.
bool same_layouts(std::uint32_t version) {
  const auto release = [](std::uint32_t v) { return v >= 10000 ? v / 100 : v; };
  return release(version) == release(CUPTI_API_VERSION);
}

problem cuda::load_cupti() {
  if (library_ != nullptr) return {};
  // Where the program's libcudart is (any soname; statically linked runtimes load only libcuda).
  const auto cudart = loaded_object("libcudart.so");
  std::vector<std::string> candidates{"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  if (!cudart.empty()) {
    const std::string here = directory_of(cudart);
    candidates.push_back(here + "libcupti.so");
    candidates.push_back(here + "../extras/CUPTI/lib64/libcupti.so");
  }
  candidates.push_back("/usr/local/cuda/lib64/libcupti.so");
  candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  std::string not_loaded, mismatched;  // the first candidate's dlerror, a CUPTI of other layouts
  for (const auto& candidate : candidates) {
    void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      if (const char* error = dlerror(); error && not_loaded.empty()) not_loaded = error;
      continue;
    }
    const auto get_version = reinterpret_cast<decltype(&cuptiGetVersion)>(dlsym(library, "cuptiGetVersion"));
    std::uint32_t version = 0;
    if (get_version == nullptr || get_version(&version) != CUPTI_SUCCESS || !same_layouts(version)) {
      if (mismatched.empty())
        mismatched = candidate + " is CUPTI API version " + std::to_string(version) +
                     ", kairos was built with CUPTI's headers of version " + std::to_string(CUPTI_API_VERSION);
      dlclose(library);  // nothing of it ran but cuptiGetVersion

      continue;
    }
    library_ = library;
    library_path_ = candidate;
    break;
  }
  if (library_ == nullptr)
    return problem{
        "cannot load CUPTI (libcupti.so, libcupti.so.13, libcupti.so.12, next to libcudart, "
        "/usr/local/cuda): " +
        (mismatched.empty() ? not_loaded : mismatched)};
  problem missing;  // the first required symbol not found
  auto find = [&](auto& pointer, const char* symbol, bool required) {
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(dlsym(library_, symbol));
    if (pointer == nullptr && required && !missing)
      missing = problem{"the CUPTI loaded from " + library_path_ + " has no " + symbol};
  };
  find(cupti_.result_string, "cuptiGetResultString", true);
  find(cupti_.get_version, "cuptiGetVersion", true);
  find(cupti_.get_timestamp, "cuptiGetTimestamp", true);
  find(cupti_.register_callbacks, "cuptiActivityRegisterCallbacks", true);
  find(cupti_.enable, "cuptiActivityEnable", true);
  find(cupti_.disable, "cuptiActivityDisable", true);
  find(cupti_.flush_all, "cuptiActivityFlushAll", true);
  find(cupti_.next_record, "cuptiActivityGetNextRecord", true);
  find(cupti_.dropped_records, "cuptiActivityGetNumDroppedRecords", true);
  find(cupti_.subscribe, "cuptiSubscribe", true);
  find(cupti_.unsubscribe, "cuptiUnsubscribe", true);
  find(cupti_.enable_domain, "cuptiEnableDomain", true);
  find(cupti_.callback_name, "cuptiGetCallbackName", true);
  find(cupti_.set_thread_id_type, "cuptiSetThreadIdType", false);
  if (missing) {
    cupti_ = {};
    library_ = nullptr;  // left loaded (a reference leaked), and tried again at the next start()
  }
  return missing;
}

std::vector<device_info> cuda::describe_devices() {
  // Before subscribing, so these calls are not observed. Only when the program initialised the
  // driver: kairos never calls cuInit itself. The DEVICE records describe devices otherwise.
  std::vector<device_info> devices;
  const auto driver = loaded_object("libcuda.so");
  void* library = driver.empty() ? nullptr : dlopen(driver.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (library == nullptr) return devices;
  driver_.get_count = reinterpret_cast<decltype(driver_.get_count)>(dlsym(library, "cuDeviceGetCount"));
  driver_.get = reinterpret_cast<decltype(driver_.get)>(dlsym(library, "cuDeviceGet"));
  driver_.get_name = reinterpret_cast<decltype(driver_.get_name)>(dlsym(library, "cuDeviceGetName"));
  driver_.total_memory = reinterpret_cast<decltype(driver_.total_memory)>(dlsym(library, "cuDeviceTotalMem_v2"));
  driver_.get_attribute = reinterpret_cast<decltype(driver_.get_attribute)>(dlsym(library, "cuDeviceGetAttribute"));
  dlclose(library);  // RTLD_NOLOAD took a reference; the program's keeps it loaded
  if (!driver_.get_count || !driver_.get || !driver_.get_name || !driver_.total_memory || !driver_.get_attribute)
    return devices;
  int count = 0;
  if (driver_.get_count(&count) != CUDA_SUCCESS) return devices;  // CUDA_ERROR_NOT_INITIALIZED, typically
  for (int index = 0; index < count; ++index) {
    CUdevice device = 0;
    if (driver_.get(&device, index) != CUDA_SUCCESS) continue;
    char name[256] = {};
    std::size_t memory = 0;
    int major = 0, minor = 0, multiprocessors = 0, clock_khz = 0, memory_clock_khz = 0;
    if (driver_.get_name(name, sizeof name - 1, device) != CUDA_SUCCESS) continue;
    driver_.total_memory(&memory, device);
    driver_.get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    driver_.get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    driver_.get_attribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    driver_.get_attribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device);
    driver_.get_attribute(&memory_clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device);
    devices.push_back(device_info{runtime_api::cuda, index, name, "sm_" + std::to_string(major) + std::to_string(minor),
                                  memory, multiprocessors, clock_khz, memory_clock_khz});
  }
  return devices;
}

// The offset from CUPTI's clock to CLOCK_MONOTONIC (see "Clocks" at the top): the midpoint of the
// narrowest of five host-clock brackets around a CUPTI reading.
bool cuda::measure_offset() {
  std::int64_t best_width = INT64_MAX, best_offset = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::uint64_t cupti_ns = 0;
    const std::int64_t before = host_now_ns();
    const CUptiResult result = cupti_.get_timestamp(&cupti_ns);
    const std::int64_t after = host_now_ns();
    if (result != CUPTI_SUCCESS) continue;
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = before + (after - before) / 2 - static_cast<std::int64_t>(cupti_ns);
    }
  }
  if (best_width == INT64_MAX) return false;
  offset_ns_.store(best_offset, std::memory_order_relaxed);
  return true;
}

problem cuda::enable_kinds() {
  struct kind {
    CUpti_ActivityKind kind;
    const char* name;
    bool required;
  };
  std::vector<kind> kinds{{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", true},
                          {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", true},
                          {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", true},
                          {CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", false}};
  if (keep_calls_) {
    kinds.push_back({CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", true});
    kinds.push_back({CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", true});
  }
  for (const auto& k : kinds) {
    const CUptiResult result = cupti_.enable(k.kind);
    if (result == CUPTI_SUCCESS) {
      enabled_kinds_.push_back(k.kind);
    } else if (k.required) {
      return problem{std::string{"cuptiActivityEnable(CUPTI_ACTIVITY_KIND_"} + k.name + "): " + describe(result)};
    }
  }
  return {};
}

void cuda::disable_kinds() {
  for (const auto kind : enabled_kinds_) cupti_.disable(kind);
  enabled_kinds_.clear();
}

problem cuda::start() {
  if (forked_.load(std::memory_order_relaxed))
    return problem{"a fork child does not observe the CUDA runtime its parent started"};
  if (observing()) return {};
  if (loaded_object("libcuda.so").empty() && loaded_object("libcudart.so").empty())
    return problem{"no CUDA runtime loaded"};
  if (problem unloaded = load_cupti()) return unloaded;
  std::vector<device_info> devices = describe_devices();
  if (!measure_offset()) {
    std::uint64_t ignored = 0;
    return problem{"cuptiGetTimestamp: " + describe(cupti_.get_timestamp(&ignored))};
  }
  if (cupti_.set_thread_id_type) cupti_.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  if (!callbacks_registered_) {
    if (const CUptiResult result = cupti_.register_callbacks(on_buffer_requested, on_buffer_completed);
        result != CUPTI_SUCCESS)
      return problem{"cuptiActivityRegisterCallbacks: " + describe(result)};
    callbacks_registered_ = true;
  }
  // The activity first, then the callbacks: work issued in between has a record without a call site
  // (emitted with none), never a call site waiting for a record that will not come.
  keep_calls_ = options().keep_activity;
  generation_.fetch_add(1, std::memory_order_relaxed);
  if (problem not_enabled = enable_kinds()) {
    disable_kinds();
    return not_enabled;
  }
  if (const CUptiResult result = cupti_.subscribe(&subscriber_, on_api_callback, nullptr); result != CUPTI_SUCCESS) {
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another tool (Nsight Systems, ...) has CUPTI.
    subscriber_ = nullptr;
    disable_kinds();
    return problem{"cuptiSubscribe: " + describe(result)};
  }
  for (const auto& [domain, name] :
       {std::pair{CUPTI_CB_DOMAIN_RUNTIME_API, "RUNTIME_API"}, std::pair{CUPTI_CB_DOMAIN_DRIVER_API, "DRIVER_API"}}) {
    if (const CUptiResult result = cupti_.enable_domain(1, subscriber_, domain); result != CUPTI_SUCCESS) {
      problem not_enabled{std::string{"cuptiEnableDomain(CUPTI_CB_DOMAIN_"} + name + "): " + describe(result)};
      cupti_.unsubscribe(subscriber_);
      subscriber_ = nullptr;
      disable_kinds();
      return not_enabled;
    }
  }
  for (auto& device : devices) emit(std::move(device));
  last_flush_ns_ = host_now_ns();
  observing_.store(true, std::memory_order_release);
  return {};
}

void cuda::on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  if (forked_.load(std::memory_order_relaxed) || data == nullptr) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  auto& thread = calls;
  if (const auto generation = generation_.load(std::memory_order_relaxed); thread.generation != generation)
    thread = {generation};
  if (data->callbackSite == CUPTI_API_ENTER) {
    const int depth = thread.depth++;
    if (depth > 0) {
      // Nested in a call of the program's (the runtime's own driver calls): if it issues the outer
      // call's work under another correlation id, that id is aliased to the outer one.
      if (!thread.work || data->correlationId == thread.correlation) return;
      const work issued = work_of_call(domain, cbid, data);
      if (issued.kind == work_kind::call) return;
      std::lock_guard lock{mutex_};
      const auto outer = pending_.find(thread.correlation);
      if (outer != pending_.end() && outer->second.alias == 0) {
        outer->second.alias = data->correlationId;
        aliases_[data->correlationId] = thread.correlation;
      }
      return;
    }
    thread.enter_ns = host_now_ns();
    thread.correlation = data->correlationId;
    const work issued = work_of_call(domain, cbid, data);
    thread.work = issued.kind != work_kind::call;
    if (!thread.work) return;
    pending_work entry{capture_call_site(thread.enter_ns),
                       issued.kind == work_kind::kernel ? tally_kernel() : tally_copy(issued.copy, issued.bytes)};
    std::lock_guard lock{mutex_};
    pending_[data->correlationId] = std::move(entry);
    return;
  }
  // CUPTI_API_EXIT
  if (thread.depth == 0) return;  // entered before kairos subscribed
  if (--thread.depth > 0) return;
  tally_api(host_now_ns() - thread.enter_ns);
  if (!thread.work) return;
  thread.work = false;
  // A call that failed issued nothing: its ledger entry is resolved as no device time.
  const int returned = data->functionReturnValue ? *static_cast<const int*>(data->functionReturnValue) : 0;
  if (returned == 0) return;
  pending_work failed;
  bool found = false;
  {
    std::lock_guard lock{mutex_};
    if (const auto entry = pending_.find(data->correlationId); entry != pending_.end()) {
      failed = std::move(entry->second);
      if (failed.alias) aliases_.erase(failed.alias);
      pending_.erase(entry);
      found = true;
    }
  }
  if (found) resolve(failed.ledger, 0);
}

bool cuda::take_pending(std::uint32_t first, std::uint32_t second, pending_work& taken, std::uint32_t& correlation) {
  std::lock_guard lock{mutex_};
  for (const std::uint32_t id : {first, second}) {
    if (id == 0) continue;
    auto entry = pending_.find(id);
    if (entry == pending_.end()) {
      const auto alias = aliases_.find(id);
      if (alias == aliases_.end()) continue;
      entry = pending_.find(alias->second);
      aliases_.erase(alias);
      if (entry == pending_.end()) continue;
    }
    correlation = entry->first;
    taken = std::move(entry->second);
    if (taken.alias) aliases_.erase(taken.alias);
    pending_.erase(entry);
    return true;
  }
  return false;
}

// The function's name, as the program calls it: cuptiGetCallbackName's runtime names carry CUPTI's
// version suffix ("cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000"), dropped here; the
// driver's are its symbols ("cuMemcpyHtoD_v2"), kept.
std::string_view cuda::call_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard lock{mutex_};
  const auto [entry, added] = names_.try_emplace(callback_key(domain, cbid));
  if (added) {
    const char* name = nullptr;
    if (cupti_.callback_name(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
      entry->second =
          (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "cuda runtime call " : "cuda driver call ") + std::to_string(cbid);
    } else {
      std::string_view text{name};
      if (const auto suffix = text.rfind("_v");
          domain == CUPTI_CB_DOMAIN_RUNTIME_API && suffix != std::string_view::npos && suffix > 0 &&
          suffix + 2 < text.size() && text.find_first_not_of("0123456789", suffix + 2) == std::string_view::npos)
        text = text.substr(0, suffix);
      entry->second = text;
    }
  }
  return entry->second;
}

bool cuda::pending_empty() {
  std::lock_guard lock{mutex_};
  return pending_.empty();
}

void cuda::consume(std::uint8_t* buffer, std::size_t valid_bytes) {
  if (forked_.load(std::memory_order_relaxed)) return;
  CUpti_Activity* record = nullptr;
  while (cupti_.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        pending_work work;
        std::uint32_t correlation = k->correlationId;
        const bool issued = take_pending(k->correlationId, 0, work, correlation);
        const bool timed = k->start != 0 && k->end >= k->start;  // a forced flush's may have none
        if (!timed) break;  // its device time is unknown: its ledger entry stays unresolved
        if (issued) resolve(work.ledger, static_cast<std::int64_t>(k->end - k->start));
        const auto to_u32 = [](std::int32_t v) { return static_cast<std::uint32_t>(v < 0 ? 0 : v); };
        emit(kernel_activity{runtime_api::cuda,
                             static_cast<int>(k->deviceId),
                             k->streamId,
                             demangle(k->name),
                             0,
                             host_ns(k->start),
                             host_ns(k->end),
                             {to_u32(k->gridX), to_u32(k->gridY), to_u32(k->gridZ)},
                             {to_u32(k->blockX), to_u32(k->blockY), to_u32(k->blockZ)},
                             to_u32(k->staticSharedMemory) + to_u32(k->dynamicSharedMemory),
                             correlation,
                             std::move(work.site)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        pending_work work;
        std::uint32_t correlation = m->runtimeCorrelationId ? m->runtimeCorrelationId : m->correlationId;
        const bool issued = take_pending(m->runtimeCorrelationId, m->correlationId, work, correlation);
        const bool timed = m->start != 0 && m->end >= m->start;
        if (!timed) break;
        if (issued) resolve(work.ledger, static_cast<std::int64_t>(m->end - m->start));
        emit(copy_activity{runtime_api::cuda, static_cast<int>(m->deviceId), m->streamId, kind_of_activity(m->copyKind),
                           m->bytes, host_ns(m->start), host_ns(m->end),
                           (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0, correlation, std::move(work.site)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        pending_work work;
        std::uint32_t correlation = m->correlationId;
        const bool issued = take_pending(m->correlationId, 0, work, correlation);
        const bool timed = m->start != 0 && m->end >= m->start;
        if (!timed) break;
        if (issued) resolve(work.ledger, static_cast<std::int64_t>(m->end - m->start));
        emit(copy_activity{runtime_api::cuda, static_cast<int>(m->deviceId), m->streamId, copy_kind::memset, m->bytes,
                           host_ns(m->start), host_ns(m->end), (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0,
                           correlation, std::move(work.site)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_DEVICE: {
        const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(record);
        emit(device_info{runtime_api::cuda, static_cast<int>(d->id), d->name ? d->name : "",
                         "sm_" + std::to_string(d->computeCapabilityMajor) + std::to_string(d->computeCapabilityMinor),
                         d->globalMemorySize, static_cast<int>(d->numMultiprocessors),
                         static_cast<int>(d->coreClockRate), 0});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const auto domain =
            record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
        emit(api_call{runtime_api::cuda, call_name(domain, a->cbid), host_ns(a->start), host_ns(a->end),
                      a->correlationId, static_cast<std::int64_t>(a->threadId)});
        break;
      }
      default:
        break;
    }
  }
}

void cuda::count_dropped(CUcontext context, std::uint32_t stream) {
  std::size_t dropped = 0;
  if (cupti_.dropped_records && cupti_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
    dropped_records.fetch_add(dropped, std::memory_order_relaxed);
}

void cuda::poll() {
  if (!observing() || forked_.load(std::memory_order_relaxed)) return;
  measure_offset();
  const std::int64_t now = host_now_ns();
  if (now - last_flush_ns_ < flush_interval_ns) return;
  last_flush_ns_ = now;
  cupti_.flush_all(0);  // the buffers whose records are all complete, at once (no waiting)
}

void cuda::drain(std::int64_t timeout_ns) {
  if (!observing() || forked_.load(std::memory_order_relaxed)) return;
  // The records of work issued come complete within `timeout_ns`, or not at all: then a forced flush
  // hands over every buffer, incomplete records included (those are dropped, see consume()).
  const std::int64_t deadline = host_now_ns() + timeout_ns;
  measure_offset();
  for (;;) {
    cupti_.flush_all(0);
    if (pending_empty() || host_now_ns() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  last_flush_ns_ = host_now_ns();
}

void cuda::stop() {
  if (forked_.load(std::memory_order_relaxed)) {
    observing_.store(false, std::memory_order_relaxed);
    return;
  }
  if (!observing_.exchange(false)) return;
  disable_kinds();
  if (subscriber_) {
    cupti_.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
    cupti_.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
    cupti_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
  cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lock{mutex_};
  pending_.clear();  // their ledger entries stay unresolved: their device time is unknown
  aliases_.clear();
}

}  // namespace

backend& cuda_backend() { return the_backend(); }
std::uint64_t cuda_dropped_records() { return dropped_records.load(std::memory_order_relaxed); }

}  // namespace kairos::gpu::detail

#else  // built without the CUDA toolkit

namespace kairos::gpu::detail {
backend& cuda_backend() {
  static unavailable_backend kept{runtime_api::cuda, "kairos was built without the CUDA toolkit (CUPTI)"};
  return kept;
}
std::uint64_t cuda_dropped_records() { return 0; }
}  // namespace kairos::gpu::detail

#endif
