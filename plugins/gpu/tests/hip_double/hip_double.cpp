// A test double of the HIP runtime: builds as libamdhip64.so.5 (hip_double.map gives its symbols the
// real runtime's versions) so that a program selects it with LD_LIBRARY_PATH instead of the real
// runtime. It exists to test kairos's interception of HIP's API (GOT patching, kairos's own event
// pairs, kernel names, clocks) on machines without an AMD GPU. It never runs a kernel and models no
// GPU's performance; the real runtime's path is tested where a device exists (and its no-device
// path everywhere).
//
// It simulates one device ("kairos HIP test double", gfx90a) whose streams run work asynchronously
// on a simulated timeline, in host CLOCK_MONOTONIC nanoseconds:
//  - each stream keeps busy_until_ns, the simulated end of its last work; work issued at host time t
//    on stream s starts at max(t, busy_until(s)) and ends start + duration;
//  - a kernel's duration is, by convention, its FIRST argument: *(std::uint64_t*)args[0] nanoseconds
//    (a kernel launched without arguments takes 0 ns); grid, block and shared memory do not change it;
//  - copies and memsets take 1 ns per byte (1 GB/s), and move their bytes at call time ("device"
//    memory is host memory);
//  - the null stream has legacy semantics: its work also waits for every blocking stream's, and a
//    blocking stream's work waits for the null stream's; a hipStreamNonBlocking stream waits only
//    for itself. hipStreamPerThread is a blocking stream of the calling thread's own;
//  - an event's time is when its stream reaches it: max(now, the work before it);
//  - calls return at once (asynchronous) except the synchronous ones (hipMemcpy and the other
//    copies and memsets without a stream argument, hipMemcpyWithStream, the synchronisations), which
//    sleep until their simulated end.
// HIP_DOUBLE_NO_DEVICE=1, read at the first call, makes it a machine without a GPU: hipGetDeviceCount
// reports 0 devices and hipErrorNoDevice, every other call hipErrorNoDevice.
//
// Thread-safe (one mutex); it writes nothing on stdout or stderr.
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <hip/hip_runtime_api.h>

// The handles behind hipStream_t and hipEvent_t (opaque in HIP's headers).
struct ihipStream_t {
  bool blocking = true;  // false: created hipStreamNonBlocking
  std::int64_t busy_until_ns = 0;
};
struct ihipEvent_t {
  static constexpr std::int64_t unrecorded = -1;
  unsigned flags = hipEventDefault;
  std::int64_t time_ns = unrecorded;
};

namespace {

// The simulated device.
constexpr int device_count = 1;
constexpr std::string_view device_name = "kairos HIP test double";
constexpr std::string_view architecture = "gfx90a";
constexpr std::size_t memory_bytes = std::size_t{16} << 30;
constexpr int multiprocessors = 104;
constexpr int clock_khz = 1'700'000;
constexpr int memory_clock_khz = 1'600'000;
constexpr int compute_major = 9, compute_minor = 0;
constexpr std::size_t allocation_alignment = 256;

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

void sleep_until(std::int64_t ns) {
  if (ns <= now_ns()) return;  // an unrecorded event's time (-1) included
  const timespec t{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) == EINTR) {
  }
}

struct allocation {
  std::size_t bytes = 0;
  bool device = false;  // hipMalloc, hipMallocManaged: counts against the device's memory
};

struct interval {
  std::int64_t start_ns, end_ns;
};

struct device_state {
  const bool no_device = [] {
    const char* value = std::getenv("HIP_DOUBLE_NO_DEVICE");
    return value != nullptr && std::string_view{value} == "1";
  }();
  std::mutex mutex;  // everything below
  ihipStream_t null_stream;
  std::unordered_set<ihipStream_t*> streams;  // created ones and threads' hipStreamPerThread
  std::unordered_set<ihipEvent_t*> events;
  std::unordered_map<void*, allocation> allocations;
  std::size_t device_bytes = 0;

  // When the work that a wait on `stream` waits for is done: its own, and for the null stream every
  // blocking stream's.
  std::int64_t completion_ns(const ihipStream_t& stream) const {
    std::int64_t end = stream.busy_until_ns;
    if (&stream == &null_stream)
      for (const ihipStream_t* other : streams)
        if (other->blocking) end = std::max(end, other->busy_until_ns);
    return end;
  }

  // When everything issued so far is done.
  std::int64_t idle_ns() const {
    std::int64_t end = null_stream.busy_until_ns;
    for (const ihipStream_t* stream : streams) end = std::max(end, stream->busy_until_ns);
    return end;
  }

  // Places `duration_ns` of work on `stream`'s timeline, after the work it must follow.
  interval schedule(ihipStream_t& stream, std::int64_t duration_ns) {
    std::int64_t start = std::max(now_ns(), completion_ns(stream));
    if (&stream != &null_stream && stream.blocking) start = std::max(start, null_stream.busy_until_ns);
    stream.busy_until_ns = start + duration_ns;
    return {start, stream.busy_until_ns};
  }

  // The stream a handle names: 0 the null stream, hipStreamPerThread the calling thread's.
  hipError_t find(hipStream_t handle, ihipStream_t*& stream) {
    if (handle == nullptr) {
      stream = &null_stream;
    } else if (handle == hipStreamPerThread) {
      // Created at the thread's first use and kept until the process ends (as the null stream is):
      // one small object per such thread.
      thread_local ihipStream_t* per_thread = nullptr;
      if (per_thread == nullptr) {
        auto created = std::make_unique<ihipStream_t>();
        streams.insert(created.get());
        per_thread = created.release();
      }
      stream = per_thread;
    } else if (streams.contains(handle)) {
      stream = handle;
    } else {
      return hipErrorInvalidHandle;
    }
    return hipSuccess;
  }

  hipError_t check(hipEvent_t event) const { return events.contains(event) ? hipSuccess : hipErrorInvalidHandle; }
};

device_state& device() {
  static auto* state = new device_state;  // calls may come until the process ends
  return *state;
}

thread_local hipError_t last_error = hipSuccess;

// Every API call that returns a hipError_t: no device, or the call's own result, kept as the
// thread's last error when it is one.
template <class Body>
hipError_t api(Body&& body) noexcept {
  hipError_t result = hipErrorNoDevice;
  if (!device().no_device) {
    try {
      result = body();
    } catch (const std::bad_alloc&) {
      result = hipErrorOutOfMemory;
    }
  }
  if (result != hipSuccess) last_error = result;
  return result;
}

std::uint64_t kernel_duration_ns(void** args) {
  return args != nullptr && args[0] != nullptr ? *static_cast<const std::uint64_t*>(args[0]) : 0;
}

hipError_t launch(const void* function, std::uint64_t duration_ns, hipStream_t handle, hipEvent_t start_event = nullptr,
                  hipEvent_t stop_event = nullptr) {
  if (function == nullptr) return hipErrorInvalidDeviceFunction;
  auto& d = device();
  std::lock_guard lock{d.mutex};
  ihipStream_t* stream = nullptr;
  if (const hipError_t error = d.find(handle, stream); error != hipSuccess) return error;
  for (hipEvent_t event : {start_event, stop_event})
    if (event != nullptr && d.check(event) != hipSuccess) return hipErrorInvalidHandle;
  const interval run = d.schedule(*stream, static_cast<std::int64_t>(duration_ns));
  if (start_event != nullptr) start_event->time_ns = run.start_ns;
  if (stop_event != nullptr) stop_event->time_ns = run.end_ns;
  return hipSuccess;
}

// `bytes` of copy or memset work on `handle`: `move` moves the bytes now, after the work is placed
// on the timeline (the host's own time moving them, page faults on fresh memory included, is no part
// of the simulated device's); a synchronous call then waits for the work's simulated end.
template <class Move>
hipError_t transfer(hipStream_t handle, std::size_t bytes, bool synchronous, Move move) {
  auto& d = device();
  std::int64_t end_ns = 0;
  {
    std::lock_guard lock{d.mutex};
    ihipStream_t* stream = nullptr;
    if (const hipError_t error = d.find(handle, stream); error != hipSuccess) return error;
    end_ns = d.schedule(*stream, static_cast<std::int64_t>(bytes)).end_ns;
    move();
  }
  if (synchronous) sleep_until(end_ns);
  return hipSuccess;
}

bool valid(hipMemcpyKind kind) {
  return static_cast<int>(kind) >= hipMemcpyHostToHost && static_cast<int>(kind) <= hipMemcpyDefault;
}

hipError_t copy(void* destination, const void* source, std::size_t bytes, hipMemcpyKind kind, hipStream_t stream,
                bool synchronous) {
  if (!valid(kind)) return hipErrorInvalidMemcpyDirection;
  if (bytes != 0 && (destination == nullptr || source == nullptr)) return hipErrorInvalidValue;
  return transfer(stream, bytes, synchronous, [&] { std::memmove(destination, source, bytes); });
}

hipError_t copy_2d(void* destination, std::size_t destination_pitch, const void* source, std::size_t source_pitch,
                   std::size_t width, std::size_t height, hipMemcpyKind kind, hipStream_t stream, bool synchronous) {
  if (!valid(kind)) return hipErrorInvalidMemcpyDirection;
  if (width > destination_pitch || width > source_pitch) return hipErrorInvalidPitchValue;
  if (width * height != 0 && (destination == nullptr || source == nullptr)) return hipErrorInvalidValue;
  return transfer(stream, width * height, synchronous, [&] {
    for (std::size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char*>(destination) + row * destination_pitch,
                   static_cast<const char*>(source) + row * source_pitch, width);
  });
}

hipError_t set(void* destination, int value, std::size_t bytes, hipStream_t stream, bool synchronous) {
  if (bytes != 0 && destination == nullptr) return hipErrorInvalidValue;
  return transfer(stream, bytes, synchronous, [&] { std::memset(destination, value, bytes); });
}

hipError_t allocate(void** pointer, std::size_t bytes, bool on_device) {
  if (pointer == nullptr) return hipErrorInvalidValue;
  *pointer = nullptr;
  if (bytes == 0) return hipSuccess;
  if (on_device && bytes > memory_bytes) return hipErrorOutOfMemory;
  const std::size_t rounded = (bytes + allocation_alignment - 1) / allocation_alignment * allocation_alignment;
  std::unique_ptr<void, decltype(&std::free)> memory{std::aligned_alloc(allocation_alignment, rounded), &std::free};
  if (memory == nullptr) return hipErrorOutOfMemory;
  // Touched now, so that the host's page faults land in the allocation (where the real runtime has
  // its own costs) and not in the copies, which are to take their simulated time.
  std::memset(memory.get(), 0, rounded);
  auto& d = device();
  std::lock_guard lock{d.mutex};
  if (on_device && bytes > memory_bytes - d.device_bytes) return hipErrorOutOfMemory;
  d.allocations.emplace(memory.get(), allocation{bytes, on_device});
  if (on_device) d.device_bytes += bytes;
  *pointer = memory.release();
  return hipSuccess;
}

// hipFree and hipHostFree alike: either frees any of the double's allocations. No wait for the
// device: copies moved their bytes when issued, so no simulated work still reads the memory.
hipError_t release(void* pointer) {
  if (pointer == nullptr) return hipSuccess;
  auto& d = device();
  std::lock_guard lock{d.mutex};
  const auto found = d.allocations.find(pointer);
  if (found == d.allocations.end()) return hipErrorInvalidValue;
  if (found->second.device) d.device_bytes -= found->second.bytes;
  d.allocations.erase(found);
  std::free(pointer);
  return hipSuccess;
}

hipError_t wait_for_stream(hipStream_t handle, bool block) {
  auto& d = device();
  std::int64_t end_ns = 0;
  {
    std::lock_guard lock{d.mutex};
    ihipStream_t* stream = nullptr;
    if (const hipError_t error = d.find(handle, stream); error != hipSuccess) return error;
    end_ns = d.completion_ns(*stream);
  }
  if (block) {
    sleep_until(end_ns);
    return hipSuccess;
  }
  return now_ns() >= end_ns ? hipSuccess : hipErrorNotReady;
}

hipError_t create_stream(hipStream_t* stream, unsigned flags) {
  if (stream == nullptr || (flags & ~unsigned{hipStreamNonBlocking}) != 0) return hipErrorInvalidValue;
  auto& d = device();
  std::lock_guard lock{d.mutex};
  auto created = std::make_unique<ihipStream_t>((flags & hipStreamNonBlocking) == 0);
  d.streams.insert(created.get());
  *stream = created.release();
  return hipSuccess;
}

hipError_t create_event(hipEvent_t* event, unsigned flags) {
  if (event == nullptr) return hipErrorInvalidValue;
  auto& d = device();
  std::lock_guard lock{d.mutex};
  auto created = std::make_unique<ihipEvent_t>(flags);
  d.events.insert(created.get());
  *event = created.release();
  return hipSuccess;
}

// The names the real runtime (HIP 5.2.3) gives; its hipGetErrorString returns the same name.
const char* error_name(hipError_t error) {
#define KAIROS_HIP_ERROR(name) \
  case name:                   \
    return #name;
  switch (error) {
    KAIROS_HIP_ERROR(hipSuccess)
    KAIROS_HIP_ERROR(hipErrorInvalidValue)
    KAIROS_HIP_ERROR(hipErrorOutOfMemory)
    KAIROS_HIP_ERROR(hipErrorNotInitialized)
    KAIROS_HIP_ERROR(hipErrorDeinitialized)
    KAIROS_HIP_ERROR(hipErrorProfilerDisabled)
    KAIROS_HIP_ERROR(hipErrorProfilerNotInitialized)
    KAIROS_HIP_ERROR(hipErrorProfilerAlreadyStarted)
    KAIROS_HIP_ERROR(hipErrorProfilerAlreadyStopped)
    KAIROS_HIP_ERROR(hipErrorInvalidConfiguration)
    KAIROS_HIP_ERROR(hipErrorInvalidPitchValue)
    KAIROS_HIP_ERROR(hipErrorInvalidSymbol)
    KAIROS_HIP_ERROR(hipErrorInvalidDevicePointer)
    KAIROS_HIP_ERROR(hipErrorInvalidMemcpyDirection)
    KAIROS_HIP_ERROR(hipErrorInsufficientDriver)
    KAIROS_HIP_ERROR(hipErrorMissingConfiguration)
    KAIROS_HIP_ERROR(hipErrorPriorLaunchFailure)
    KAIROS_HIP_ERROR(hipErrorInvalidDeviceFunction)
    KAIROS_HIP_ERROR(hipErrorNoDevice)
    KAIROS_HIP_ERROR(hipErrorInvalidDevice)
    KAIROS_HIP_ERROR(hipErrorInvalidImage)
    KAIROS_HIP_ERROR(hipErrorInvalidContext)
    KAIROS_HIP_ERROR(hipErrorContextAlreadyCurrent)
    KAIROS_HIP_ERROR(hipErrorMapFailed)
    KAIROS_HIP_ERROR(hipErrorUnmapFailed)
    KAIROS_HIP_ERROR(hipErrorArrayIsMapped)
    KAIROS_HIP_ERROR(hipErrorAlreadyMapped)
    KAIROS_HIP_ERROR(hipErrorNoBinaryForGpu)
    KAIROS_HIP_ERROR(hipErrorAlreadyAcquired)
    KAIROS_HIP_ERROR(hipErrorNotMapped)
    KAIROS_HIP_ERROR(hipErrorNotMappedAsArray)
    KAIROS_HIP_ERROR(hipErrorNotMappedAsPointer)
    KAIROS_HIP_ERROR(hipErrorECCNotCorrectable)
    KAIROS_HIP_ERROR(hipErrorUnsupportedLimit)
    KAIROS_HIP_ERROR(hipErrorContextAlreadyInUse)
    KAIROS_HIP_ERROR(hipErrorPeerAccessUnsupported)
    KAIROS_HIP_ERROR(hipErrorInvalidKernelFile)
    KAIROS_HIP_ERROR(hipErrorInvalidGraphicsContext)
    KAIROS_HIP_ERROR(hipErrorInvalidSource)
    KAIROS_HIP_ERROR(hipErrorFileNotFound)
    KAIROS_HIP_ERROR(hipErrorSharedObjectSymbolNotFound)
    KAIROS_HIP_ERROR(hipErrorSharedObjectInitFailed)
    KAIROS_HIP_ERROR(hipErrorOperatingSystem)
    KAIROS_HIP_ERROR(hipErrorInvalidHandle)
    KAIROS_HIP_ERROR(hipErrorIllegalState)
    KAIROS_HIP_ERROR(hipErrorNotFound)
    KAIROS_HIP_ERROR(hipErrorNotReady)
    KAIROS_HIP_ERROR(hipErrorIllegalAddress)
    KAIROS_HIP_ERROR(hipErrorLaunchOutOfResources)
    KAIROS_HIP_ERROR(hipErrorLaunchTimeOut)
    KAIROS_HIP_ERROR(hipErrorPeerAccessAlreadyEnabled)
    KAIROS_HIP_ERROR(hipErrorPeerAccessNotEnabled)
    KAIROS_HIP_ERROR(hipErrorSetOnActiveProcess)
    KAIROS_HIP_ERROR(hipErrorContextIsDestroyed)
    KAIROS_HIP_ERROR(hipErrorAssert)
    KAIROS_HIP_ERROR(hipErrorHostMemoryAlreadyRegistered)
    KAIROS_HIP_ERROR(hipErrorHostMemoryNotRegistered)
    KAIROS_HIP_ERROR(hipErrorLaunchFailure)
    KAIROS_HIP_ERROR(hipErrorCooperativeLaunchTooLarge)
    KAIROS_HIP_ERROR(hipErrorNotSupported)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureUnsupported)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureInvalidated)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureMerge)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureUnmatched)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureUnjoined)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureIsolation)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureImplicit)
    KAIROS_HIP_ERROR(hipErrorCapturedEvent)
    KAIROS_HIP_ERROR(hipErrorStreamCaptureWrongThread)
    KAIROS_HIP_ERROR(hipErrorGraphExecUpdateFailure)
    KAIROS_HIP_ERROR(hipErrorRuntimeMemory)
    KAIROS_HIP_ERROR(hipErrorRuntimeOther)
    KAIROS_HIP_ERROR(hipErrorTbd)
    default:
      return "hipErrorUnknown";
  }
#undef KAIROS_HIP_ERROR
}

struct call_configuration {
  dim3 grid, block;
  std::size_t shared_bytes;
  hipStream_t stream;
};
// What hipcc's <<<...>>> pushes before calling a kernel's stub, which pops it.
thread_local std::vector<call_configuration> call_configurations;

}  // namespace

extern "C" {

// HIP 5.2's headers do not declare it (later ones do): the launch on hipStreamPerThread.
hipError_t hipLaunchKernel_spt(const void* function_address, dim3 numBlocks, dim3 dimBlocks, void** args,
                               size_t sharedMemBytes, hipStream_t stream);

// Device.

hipError_t hipGetDeviceCount(int* count) {
  if (count != nullptr) *count = 0;  // what a machine without a device reports
  return api([&] {
    if (count == nullptr) return hipErrorInvalidValue;
    *count = device_count;
    return hipSuccess;
  });
}

hipError_t hipGetDevice(int* deviceId) {
  return api([&] {
    if (deviceId == nullptr) return hipErrorInvalidValue;
    *deviceId = 0;
    return hipSuccess;
  });
}

hipError_t hipSetDevice(int deviceId) {
  return api([&] { return deviceId == 0 ? hipSuccess : hipErrorInvalidDevice; });
}

hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int deviceId) {
  return api([&] {
    if (prop == nullptr) return hipErrorInvalidValue;
    if (deviceId != 0) return hipErrorInvalidDevice;
    *prop = hipDeviceProp_t{};
    device_name.copy(prop->name, sizeof prop->name - 1);
    architecture.copy(prop->gcnArchName, sizeof prop->gcnArchName - 1);
    prop->totalGlobalMem = memory_bytes;
    prop->multiProcessorCount = multiprocessors;
    prop->clockRate = clock_khz;
    prop->memoryClockRate = memory_clock_khz;
    prop->major = compute_major;
    prop->minor = compute_minor;
    return hipSuccess;
  });
}

hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId) {
  return api([&] {
    if (pi == nullptr) return hipErrorInvalidValue;
    if (deviceId != 0) return hipErrorInvalidDevice;
    switch (attr) {
      case hipDeviceAttributeMultiprocessorCount:
        *pi = multiprocessors;
        break;
      case hipDeviceAttributeClockRate:
        *pi = clock_khz;
        break;
      case hipDeviceAttributeMemoryClockRate:
        *pi = memory_clock_khz;
        break;
      case hipDeviceAttributeComputeCapabilityMajor:
        *pi = compute_major;
        break;
      case hipDeviceAttributeComputeCapabilityMinor:
        *pi = compute_minor;
        break;
      default:
        return hipErrorInvalidValue;  // not simulated
    }
    return hipSuccess;
  });
}

const char* hipGetErrorString(hipError_t hipError) { return error_name(hipError); }
const char* hipGetErrorName(hipError_t hip_error) { return error_name(hip_error); }

// Not through api(): reading the last error must not set it.
hipError_t hipGetLastError() { return device().no_device ? hipErrorNoDevice : std::exchange(last_error, hipSuccess); }
hipError_t hipPeekAtLastError() { return device().no_device ? hipErrorNoDevice : last_error; }

hipError_t hipDriverGetVersion(int* driverVersion) {
  return api([&] {
    if (driverVersion == nullptr) return hipErrorInvalidValue;
    *driverVersion = HIP_VERSION;  // as the real runtime: both versions are HIP's
    return hipSuccess;
  });
}

hipError_t hipRuntimeGetVersion(int* runtimeVersion) {
  return api([&] {
    if (runtimeVersion == nullptr) return hipErrorInvalidValue;
    *runtimeVersion = HIP_VERSION;
    return hipSuccess;
  });
}

// Memory.

hipError_t hipMalloc(void** ptr, size_t size) {
  return api([&] { return allocate(ptr, size, true); });
}
hipError_t hipFree(void* ptr) {
  return api([&] { return release(ptr); });
}
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int) {
  return api([&] { return allocate(ptr, size, false); });
}
hipError_t hipHostFree(void* ptr) {
  return api([&] { return release(ptr); });
}
hipError_t hipMallocManaged(void** dev_ptr, size_t size, unsigned int) {
  return api([&] { return allocate(dev_ptr, size, true); });
}

// Streams.

hipError_t hipStreamCreate(hipStream_t* stream) {
  return api([&] { return create_stream(stream, hipStreamDefault); });
}
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  return api([&] { return create_stream(stream, flags); });
}

// Waits for the stream's work first, so that it counts for the null stream and hipDeviceSynchronize
// until it is done.
hipError_t hipStreamDestroy(hipStream_t stream) {
  return api([&] {
    auto& d = device();
    std::int64_t end_ns = 0;
    {
      std::lock_guard lock{d.mutex};
      if (stream == nullptr || stream == hipStreamPerThread || !d.streams.contains(stream))
        return hipErrorInvalidHandle;
      end_ns = stream->busy_until_ns;
    }
    sleep_until(end_ns);
    std::lock_guard lock{d.mutex};
    if (d.streams.erase(stream) == 0) return hipErrorInvalidHandle;  // destroyed meanwhile
    delete stream;
    return hipSuccess;
  });
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
  return api([&] { return wait_for_stream(stream, true); });
}
hipError_t hipStreamQuery(hipStream_t stream) {
  return api([&] { return wait_for_stream(stream, false); });
}

hipError_t hipDeviceSynchronize() {
  return api([&] {
    auto& d = device();
    std::int64_t end_ns = 0;
    {
      std::lock_guard lock{d.mutex};
      end_ns = d.idle_ns();
    }
    sleep_until(end_ns);
    return hipSuccess;
  });
}

// Kernels.

hipError_t hipLaunchKernel(const void* function_address, dim3, dim3, void** args, size_t, hipStream_t stream) {
  return api([&] { return launch(function_address, kernel_duration_ns(args), stream); });
}

hipError_t hipLaunchKernel_spt(const void* function_address, dim3, dim3, void** args, size_t, hipStream_t) {
  return api([&] { return launch(function_address, kernel_duration_ns(args), hipStreamPerThread); });
}

hipError_t hipExtLaunchKernel(const void* function_address, dim3, dim3, void** args, size_t, hipStream_t stream,
                              hipEvent_t startEvent, hipEvent_t stopEvent, int) {
  return api([&] { return launch(function_address, kernel_duration_ns(args), stream, startEvent, stopEvent); });
}

// `f` is opaque (no module is loaded): any non-null value is a kernel. The duration comes from
// kernelParams; a launch that passes its arguments through `extra` takes 0 ns.
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                 unsigned int, unsigned int, hipStream_t stream, void** kernelParams, void**) {
  return api([&] { return launch(f, kernel_duration_ns(kernelParams), stream); });
}

hipError_t __hipPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, hipStream_t stream) {
  return api([&] {
    call_configurations.push_back({gridDim, blockDim, sharedMem, stream});
    return hipSuccess;
  });
}

hipError_t __hipPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, hipStream_t* stream) {
  return api([&] {
    if (call_configurations.empty()) return hipErrorMissingConfiguration;
    const call_configuration popped = call_configurations.back();
    call_configurations.pop_back();
    if (gridDim != nullptr) *gridDim = popped.grid;
    if (blockDim != nullptr) *blockDim = popped.block;
    if (sharedMem != nullptr) *sharedMem = popped.shared_bytes;
    if (stream != nullptr) *stream = popped.stream;
    return hipSuccess;
  });
}

// No kernel is registered with the double: names come from the host's symbolization of the
// function's address, as for a kernel the real runtime has no name for.
const char* hipKernelNameRefByPtr(const void*, hipStream_t) { return nullptr; }
const char* hipKernelNameRef(const hipFunction_t) { return nullptr; }

// Copies and memsets.

hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind) {
  return api([&] { return copy(dst, src, sizeBytes, kind, nullptr, true); });
}
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
  return api([&] { return copy(dst, src, sizeBytes, kind, stream, false); });
}
hipError_t hipMemcpyWithStream(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
  return api([&] { return copy(dst, src, sizeBytes, kind, stream, true); });
}
hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t sizeBytes) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyHostToDevice, nullptr, true); });
}
hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t sizeBytes) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyDeviceToHost, nullptr, true); });
}
hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyDeviceToDevice, nullptr, true); });
}
hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyHostToDevice, stream, false); });
}
hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyDeviceToHost, stream, false); });
}
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream) {
  return api([&] { return copy(dst, src, sizeBytes, hipMemcpyDeviceToDevice, stream, false); });
}
hipError_t hipMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                       hipMemcpyKind kind) {
  return api([&] { return copy_2d(dst, dpitch, src, spitch, width, height, kind, nullptr, true); });
}
hipError_t hipMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                            hipMemcpyKind kind, hipStream_t stream) {
  return api([&] { return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, false); });
}
hipError_t hipMemcpyPeer(void* dst, int dstDeviceId, const void* src, int srcDeviceId, size_t sizeBytes) {
  return api([&] {
    if (dstDeviceId != 0 || srcDeviceId != 0) return hipErrorInvalidDevice;
    return copy(dst, src, sizeBytes, hipMemcpyDeviceToDevice, nullptr, true);
  });
}
hipError_t hipMemset(void* dst, int value, size_t sizeBytes) {
  return api([&] { return set(dst, value, sizeBytes, nullptr, true); });
}
hipError_t hipMemsetAsync(void* dst, int value, size_t sizeBytes, hipStream_t stream) {
  return api([&] { return set(dst, value, sizeBytes, stream, false); });
}
// `count` 32-bit words of `value`.
hipError_t hipMemsetD32(hipDeviceptr_t dest, int value, size_t count) {
  return api([&] {
    if (count != 0 && dest == nullptr) return hipErrorInvalidValue;
    return transfer(nullptr, count * sizeof(std::int32_t), true,
                    [&] { std::fill_n(static_cast<std::int32_t*>(dest), count, std::int32_t{value}); });
  });
}

// Events.

hipError_t hipEventCreate(hipEvent_t* event) {
  return api([&] { return create_event(event, hipEventDefault); });
}
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  return api([&] { return create_event(event, flags); });
}

hipError_t hipEventDestroy(hipEvent_t event) {
  return api([&] {
    auto& d = device();
    std::lock_guard lock{d.mutex};
    if (d.events.erase(event) == 0) return hipErrorInvalidHandle;
    delete event;
    return hipSuccess;
  });
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return api([&] {
    auto& d = device();
    std::lock_guard lock{d.mutex};
    ihipStream_t* on = nullptr;
    if (const hipError_t error = d.check(event); error != hipSuccess) return error;
    if (const hipError_t error = d.find(stream, on); error != hipSuccess) return error;
    event->time_ns = d.schedule(*on, 0).start_ns;
    return hipSuccess;
  });
}

// An event never recorded counts as complete, as in the real runtime.
hipError_t hipEventQuery(hipEvent_t event) {
  return api([&] {
    auto& d = device();
    std::lock_guard lock{d.mutex};
    if (const hipError_t error = d.check(event); error != hipSuccess) return error;
    return now_ns() >= event->time_ns ? hipSuccess : hipErrorNotReady;
  });
}

hipError_t hipEventSynchronize(hipEvent_t event) {
  return api([&] {
    auto& d = device();
    std::int64_t time_ns = 0;
    {
      std::lock_guard lock{d.mutex};
      if (const hipError_t error = d.check(event); error != hipSuccess) return error;
      time_ns = event->time_ns;
    }
    sleep_until(time_ns);
    return hipSuccess;
  });
}

hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return api([&] {
    if (ms == nullptr) return hipErrorInvalidValue;
    auto& d = device();
    std::lock_guard lock{d.mutex};
    for (hipEvent_t event : {start, stop}) {
      if (d.check(event) != hipSuccess || event->time_ns == ihipEvent_t::unrecorded ||
          (event->flags & hipEventDisableTiming) != 0)
        return hipErrorInvalidHandle;
    }
    if (now_ns() < std::max(start->time_ns, stop->time_ns)) return hipErrorNotReady;
    *ms = static_cast<float>(static_cast<double>(stop->time_ns - start->time_ns) / 1e6);
    return hipSuccess;
  });
}

}  // extern "C"
