// The HIP backend: the HIP runtime's API calls wrapped by GOT patching (kairos::gotcha), so
// unmodified programs are observed. Around each kernel launch and copy the wrapper records two of
// kairos's own events on the same stream; their elapsed time is the work's device time. They are
// resolved once complete (hipEventQuery, never a wait on the program's streams) by poll(), which a
// kairos thread calls, and after the program's own synchronisations.
//
// Clocks: a reference event is recorded on a private non-blocking stream and waited for (only that
// event) with the host clock read before the record and after the wait; the midpoint is the
// reference's host time, off by at most half that bracket. A launch's start on the host clock is
// the reference's host time plus hipEventElapsedTime(reference, start event). References are
// renewed every second, because the elapsed time is a float in milliseconds (1 µs steps at 10 s).
#include "backend.hpp"
#include "work_table.hpp"

#if KAIROS_GPU_HAVE_HIP_HEADERS

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <hip/hip_runtime_api.h>
#include <kairos/demangle.hpp>
#include <kairos/plugins/gotcha.hpp>

namespace kairos::gpu::detail {
namespace {

constexpr std::int64_t reference_interval_ns = 1'000'000'000;

// The runtime's functions kairos calls itself (never through the program's GOT, never wrapped).
struct hip_functions {
  hipError_t (*get_device_count)(int*) = nullptr;
  hipError_t (*get_device)(int*) = nullptr;
  hipError_t (*set_device)(int) = nullptr;
  hipError_t (*get_device_properties)(hipDeviceProp_t*, int) = nullptr;
  const char* (*error_string)(hipError_t) = nullptr;
  const char* (*error_name)(hipError_t) = nullptr;
  hipError_t (*event_create)(hipEvent_t*, unsigned) = nullptr;
  hipError_t (*event_destroy)(hipEvent_t) = nullptr;
  hipError_t (*event_record)(hipEvent_t, hipStream_t) = nullptr;
  hipError_t (*event_query)(hipEvent_t) = nullptr;
  hipError_t (*event_synchronize)(hipEvent_t) = nullptr;
  hipError_t (*event_elapsed)(float*, hipEvent_t, hipEvent_t) = nullptr;
  hipError_t (*stream_create)(hipStream_t*, unsigned) = nullptr;
  const char* (*kernel_name_by_pointer)(const void*, hipStream_t) = nullptr;  // optional
  const char* (*kernel_name)(hipFunction_t) = nullptr;                        // optional
};

// "hipErrorNoDevice: no ROCm-capable device is detected"; HIP 5.2's error string is the name
// itself, said once.
std::string describe(const hip_functions& hip, hipError_t error) {
  const char* name = hip.error_name ? hip.error_name(error) : nullptr;
  const char* text = hip.error_string ? hip.error_string(error) : nullptr;
  std::string described = name ? name : "hipError " + std::to_string(error);
  if (text && described != text) described += std::string{": "} + text;
  return described;
}

// What a wrapped call is, from its arguments.
struct work {
  work_kind kind = work_kind::call;
  hipStream_t stream = nullptr;
  copy_kind copy = copy_kind::unknown;
  std::uint64_t bytes = 0;
  const void* function = nullptr;  // hipLaunchKernel's host stub
  hipFunction_t module_function = nullptr;
  std::array<std::uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::uint32_t shared_bytes = 0;
  bool asynchronous = false;
  bool synchronises = false;  // resolve completed work after it returns
};

static_assert(numbered_as_memcpy_direction<hipMemcpyKind>({hipMemcpyHostToHost, hipMemcpyHostToDevice,
                                                           hipMemcpyDeviceToHost, hipMemcpyDeviceToDevice,
                                                           hipMemcpyDefault}),
              "hipMemcpyKind numbers the directions as work_table.hpp reads them");

std::array<std::uint32_t, 3> sizes(dim3 d) { return {d.x, d.y, d.z}; }

// One entry per wrapped function: its symbol and how to read its arguments.
enum class hip_call {
  launch_kernel,
  launch_kernel_spt,
  ext_launch_kernel,
  module_launch_kernel,
  memcpy,
  memcpy_spt,
  memcpy_async,
  memcpy_async_spt,
  memcpy_with_stream,
  memcpy_htod,
  memcpy_dtoh,
  memcpy_dtod,
  memcpy_htod_async,
  memcpy_dtoh_async,
  memcpy_dtod_async,
  memcpy_2d,
  memcpy_2d_async,
  memcpy_3d,
  memcpy_3d_async,
  memcpy_peer,
  memcpy_peer_async,
  memset,
  memset_async,
  memset_d32,
  malloc,
  free,
  host_malloc,
  host_free,
  malloc_managed,
  stream_synchronize,
  device_synchronize,
  event_synchronize,
};

using launch_type = hipError_t(const void*, dim3, dim3, void**, size_t, hipStream_t);
using copy_type = hipError_t(void*, const void*, size_t, hipMemcpyKind);
using copy_async_type = hipError_t(void*, const void*, size_t, hipMemcpyKind, hipStream_t);
using copy_bytes_type = hipError_t(void*, void*, size_t);
using copy_bytes_async_type = hipError_t(void*, void*, size_t, hipStream_t);
using copy_2d_type = hipError_t(void*, size_t, const void*, size_t, size_t, size_t, hipMemcpyKind);
using copy_2d_async_type = hipError_t(void*, size_t, const void*, size_t, size_t, size_t, hipMemcpyKind, hipStream_t);
using copy_peer_type = hipError_t(void*, int, const void*, int, size_t);

using launch_ext_type = hipError_t(const void*, dim3, dim3, void**, size_t, hipStream_t, hipEvent_t, hipEvent_t, int);
using launch_module_type = hipError_t(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, hipStream_t, void**, void**);
using copy_3d_type = hipError_t(const hipMemcpy3DParms*);
using copy_3d_async_type = hipError_t(const hipMemcpy3DParms*, hipStream_t);
using copy_peer_async_type = hipError_t(void*, int, const void*, int, size_t, hipStream_t);
using set_type = hipError_t(void*, int, size_t);
using set_async_type = hipError_t(void*, int, size_t, hipStream_t);

// A wrapped call's arguments reach the table's readers as their addresses, in order (as CUPTI's
// functionParams reach CUDA's); each reader names the function type it reads, and the argument's
// type is taken from it, so that a reader and its call cannot disagree on a type unseen.
using arguments = const void* const*;

template <class Function>
struct parameter_list;
template <class R, class... Parameters>
struct parameter_list<R(Parameters...)> {
  using type = std::tuple<Parameters...>;
};
template <class Function, std::size_t I>
const auto& argument(arguments given) {
  using type = std::tuple_element_t<I, typename parameter_list<Function>::type>;
  return *static_cast<const type*>(given[I]);
}

// A copy naming its hipMemcpyKind and byte count.
template <class Function, std::size_t Bytes, std::size_t Kind>
copied counted(arguments given) {
  return {copy_kind_of(argument<Function, Kind>(given)), argument<Function, Bytes>(given)};
}
// A copy or memset of a fixed kind; its count of elements of `Element` bytes.
template <class Function, copy_kind Kind, std::size_t Count, std::uint64_t Element = 1>
copied fixed(arguments given) {
  return {Kind, std::uint64_t{argument<Function, Count>(given)} * Element};
}
template <class Function>
copied counted_2d(arguments given) {  // (dst, dpitch, src, spitch, width, height, kind, ...)
  return {copy_kind_of(argument<Function, 6>(given)),
          std::uint64_t{argument<Function, 4>(given)} * argument<Function, 5>(given)};
}
template <class Function>
copied copied_3d(arguments given) {
  const hipMemcpy3DParms* p = argument<Function, 0>(given);
  if (p == nullptr) return {};
  return {copy_kind_of(p->kind), std::uint64_t{p->extent.width} * p->extent.height * p->extent.depth};
}

// The stream a call issues its work on: an argument, the per-thread stream (the _spt variants), or
// the null stream.
template <class Function, std::size_t I>
hipStream_t stream_argument(arguments given) {
  return argument<Function, I>(given);
}
hipStream_t per_thread_stream(arguments) { return hipStreamPerThread; }
hipStream_t null_stream(arguments) { return nullptr; }

// A row of the table: the shared shape, and what HIP's calls say besides (CUDA's records carry
// streams; HIP's wrappers must read them).
struct hip_row {
  work_row<hip_call, arguments> work;
  hipStream_t (*stream)(arguments) = &null_stream;
  bool asynchronous = false;
  bool synchronises = false;  // completed work is resolved after it returns
};
constexpr hip_row kernel_row(hip_call id, hipStream_t (*stream)(arguments)) {
  return {{id, work_kind::kernel}, stream};
}
constexpr hip_row copy_row(hip_call id, copied (*read)(arguments), hipStream_t (*stream)(arguments) = &null_stream,
                           bool asynchronous = false) {
  return {{id, work_kind::copy, read}, stream, asynchronous};
}
constexpr hip_row call_row(hip_call id, bool synchronises = false) { return {{id}, &null_stream, false, synchronises}; }

constexpr auto hip_work = [] {
  using enum hip_call;
  return std::to_array<hip_row>({
      kernel_row(launch_kernel, &stream_argument<launch_type, 5>),
      kernel_row(launch_kernel_spt, &per_thread_stream),
      kernel_row(ext_launch_kernel, &stream_argument<launch_ext_type, 5>),
      kernel_row(module_launch_kernel, &stream_argument<launch_module_type, 8>),
      {{memcpy, work_kind::copy, &counted<copy_type, 2, 3>}, &null_stream, false, true},
      {{memcpy_spt, work_kind::copy, &counted<copy_type, 2, 3>}, &per_thread_stream, false, true},
      copy_row(memcpy_async, &counted<copy_async_type, 2, 3>, &stream_argument<copy_async_type, 4>, true),
      copy_row(memcpy_async_spt, &counted<copy_async_type, 2, 3>, &per_thread_stream, true),
      copy_row(memcpy_with_stream, &counted<copy_async_type, 2, 3>, &stream_argument<copy_async_type, 4>),
      copy_row(memcpy_htod, &fixed<copy_bytes_type, copy_kind::host_to_device, 2>),
      copy_row(memcpy_dtoh, &fixed<copy_bytes_type, copy_kind::device_to_host, 2>),
      copy_row(memcpy_dtod, &fixed<copy_bytes_type, copy_kind::device_to_device, 2>),
      copy_row(memcpy_htod_async, &fixed<copy_bytes_async_type, copy_kind::host_to_device, 2>,
               &stream_argument<copy_bytes_async_type, 3>, true),
      copy_row(memcpy_dtoh_async, &fixed<copy_bytes_async_type, copy_kind::device_to_host, 2>,
               &stream_argument<copy_bytes_async_type, 3>, true),
      copy_row(memcpy_dtod_async, &fixed<copy_bytes_async_type, copy_kind::device_to_device, 2>,
               &stream_argument<copy_bytes_async_type, 3>, true),
      copy_row(memcpy_2d, &counted_2d<copy_2d_type>),
      copy_row(memcpy_2d_async, &counted_2d<copy_2d_async_type>, &stream_argument<copy_2d_async_type, 7>, true),
      copy_row(memcpy_3d, &copied_3d<copy_3d_type>),
      copy_row(memcpy_3d_async, &copied_3d<copy_3d_async_type>, &stream_argument<copy_3d_async_type, 1>, true),
      copy_row(memcpy_peer, &fixed<copy_peer_type, copy_kind::peer, 4>),
      copy_row(memcpy_peer_async, &fixed<copy_peer_async_type, copy_kind::peer, 4>,
               &stream_argument<copy_peer_async_type, 5>, true),
      copy_row(memset, &fixed<set_type, copy_kind::memset, 2>),
      copy_row(memset_async, &fixed<set_async_type, copy_kind::memset, 2>, &stream_argument<set_async_type, 3>, true),
      copy_row(memset_d32, &fixed<set_type, copy_kind::memset, 2, 4>),
      call_row(malloc),
      call_row(free),
      call_row(host_malloc),
      call_row(host_free),
      call_row(malloc_managed),
      call_row(stream_synchronize, true),
      call_row(device_synchronize, true),
      call_row(event_synchronize, true),
  });
}();

constexpr bool rows_in_enum_order() {
  for (std::size_t row = 0; row < hip_work.size(); ++row)
    if (static_cast<std::size_t>(hip_work[row].work.id) != row) return false;
  return hip_work.size() == static_cast<std::size_t>(hip_call::event_synchronize) + 1;
}
static_assert(rows_in_enum_order(), "hip_work lists every hip_call once, in the enum's order");

// The work a wrapped call issues: its row's reading, and a launch's kernel and sizes.
template <hip_call C, class... Args>
work describe_call(Args... given) {
  constexpr const hip_row& row = hip_work[static_cast<std::size_t>(C)];
  const std::array<const void*, sizeof...(Args)> addresses{&given...};
  work w{row.work.kind, row.stream(addresses.data())};
  w.asynchronous = row.asynchronous;
  w.synchronises = row.synchronises;
  if constexpr (row.work.kind == work_kind::copy) {
    const copied copy = row.work.copy(addresses.data());
    w.copy = copy.kind;
    w.bytes = copy.bytes;
  }
  const auto a = std::forward_as_tuple(given...);
  using enum hip_call;
  if constexpr (C == launch_kernel || C == launch_kernel_spt || C == ext_launch_kernel) {
    w.function = std::get<0>(a);
    w.grid = sizes(std::get<1>(a));
    w.block = sizes(std::get<2>(a));
    w.shared_bytes = static_cast<std::uint32_t>(std::get<4>(a));
  } else if constexpr (C == module_launch_kernel) {
    w.module_function = std::get<0>(a);
    w.grid = {std::get<1>(a), std::get<2>(a), std::get<3>(a)};
    w.block = {std::get<4>(a), std::get<5>(a), std::get<6>(a)};
    w.shared_bytes = std::get<7>(a);
  }
  return w;
}

struct pending_work {
  work_kind kind;
  int device;
  hipStream_t stream;
  hipEvent_t start, stop;
  std::string mangled_name;  // as the runtime gave it; demangled when resolved, off the launch's path
  std::uint64_t function_address;
  work described;
  ledger_entry ledger;
  std::uint64_t correlation;
  call_site site;
};

struct reference {
  hipEvent_t event = nullptr;
  std::int64_t host_ns = 0;
};

class hip : public backend {
 public:
  runtime_api api() const override { return runtime_api::hip; }
  bool observing() const override { return observing_.load(std::memory_order_acquire); }
  problem start() override;
  void poll() override;
  void drain(std::int64_t timeout_ns) override;
  void stop() override;
  void forget_after_fork() noexcept override { forked_ = true; }

  template <hip_call C, class R, class... Args>
  R intercept(R (*original)(Args...), Args... arguments);

 private:
  problem resolve_functions(void* library);
  problem install_wrappers();
  hipEvent_t take_event();                                      // under mutex_
  bool renew_reference(int device);                             // under mutex_
  void resolve_completed(bool wait, std::int64_t deadline_ns);  // under mutex_

  hip_functions hip_;
  std::atomic<bool> observing_{false};
  std::atomic<bool> forked_{false};  // set by the fork child's handler
  std::mutex mutex_;                 // pending_, the event pool, references_
  std::vector<pending_work> pending_;
  std::vector<hipEvent_t> free_events_;
  std::vector<reference> references_;  // by device
  std::vector<hipStream_t> reference_streams_;
  std::unordered_map<std::string, std::string> demangled_names_;  // a kernel is launched many times

  // Under mutex_.
  std::string demangled_once(const std::string& mangled) {
    if (mangled.empty()) return {};
    auto [found, added] = demangled_names_.try_emplace(mangled);
    if (added) found->second = demangle(mangled);
    return found->second;
  }
};

hip& the_backend() {
  static auto* kept = new hip;  // wrappers may run until the process ends
  return *kept;
}

// While a wrapper runs on a thread, the runtime's own internal calls of wrapped functions (hipMemcpy
// implemented through hipMemcpyAsync, say) go straight through: each call is counted once.
thread_local bool inside_wrapper = false;

template <hip_call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data&, R (*original)(Args...), Args... arguments) {
    return the_backend().intercept<C>(original, arguments...);
  }
};

template <hip_call C>
using wrapper = kairos::gotcha<1, interceptor<C>, std::integral_constant<hip_call, C>>;

template <hip_call C, class Function>
constexpr wrapped_symbol entry(const char* symbol) {
  return wrapped_symbol::of<wrapper<C>, Function>(symbol);
}

const std::array wrapped_functions{
    entry<hip_call::launch_kernel, launch_type>("hipLaunchKernel"),
    entry<hip_call::launch_kernel_spt, launch_type>("hipLaunchKernel_spt"),
    entry<hip_call::ext_launch_kernel, launch_ext_type>("hipExtLaunchKernel"),
    entry<hip_call::module_launch_kernel, launch_module_type>("hipModuleLaunchKernel"),
    entry<hip_call::memcpy, copy_type>("hipMemcpy"),
    entry<hip_call::memcpy_spt, copy_type>("hipMemcpy_spt"),
    entry<hip_call::memcpy_async, copy_async_type>("hipMemcpyAsync"),
    entry<hip_call::memcpy_async_spt, copy_async_type>("hipMemcpyAsync_spt"),
    entry<hip_call::memcpy_with_stream, copy_async_type>("hipMemcpyWithStream"),
    entry<hip_call::memcpy_htod, copy_bytes_type>("hipMemcpyHtoD"),
    entry<hip_call::memcpy_dtoh, copy_bytes_type>("hipMemcpyDtoH"),
    entry<hip_call::memcpy_dtod, copy_bytes_type>("hipMemcpyDtoD"),
    entry<hip_call::memcpy_htod_async, copy_bytes_async_type>("hipMemcpyHtoDAsync"),
    entry<hip_call::memcpy_dtoh_async, copy_bytes_async_type>("hipMemcpyDtoHAsync"),
    entry<hip_call::memcpy_dtod_async, copy_bytes_async_type>("hipMemcpyDtoDAsync"),
    entry<hip_call::memcpy_2d, copy_2d_type>("hipMemcpy2D"),
    entry<hip_call::memcpy_2d_async, copy_2d_async_type>("hipMemcpy2DAsync"),
    entry<hip_call::memcpy_3d, copy_3d_type>("hipMemcpy3D"),
    entry<hip_call::memcpy_3d_async, copy_3d_async_type>("hipMemcpy3DAsync"),
    entry<hip_call::memcpy_peer, copy_peer_type>("hipMemcpyPeer"),
    entry<hip_call::memcpy_peer_async, copy_peer_async_type>("hipMemcpyPeerAsync"),
    entry<hip_call::memset, set_type>("hipMemset"),
    entry<hip_call::memset_async, set_async_type>("hipMemsetAsync"),
    entry<hip_call::memset_d32, set_type>("hipMemsetD32"),
    entry<hip_call::malloc, hipError_t(void**, size_t)>("hipMalloc"),
    entry<hip_call::free, hipError_t(void*)>("hipFree"),
    entry<hip_call::host_malloc, hipError_t(void**, size_t, unsigned)>("hipHostMalloc"),
    entry<hip_call::host_free, hipError_t(void*)>("hipHostFree"),
    entry<hip_call::malloc_managed, hipError_t(void**, size_t, unsigned)>("hipMallocManaged"),
    entry<hip_call::stream_synchronize, hipError_t(hipStream_t)>("hipStreamSynchronize"),
    entry<hip_call::device_synchronize, hipError_t()>("hipDeviceSynchronize"),
    entry<hip_call::event_synchronize, hipError_t(hipEvent_t)>("hipEventSynchronize"),
};
static_assert(wrapped_functions.size() == static_cast<std::size_t>(hip_call::event_synchronize) + 1,
              "one wrapped_functions entry per hip_call, in the enum's order");

template <hip_call C, class R, class... Args>
R hip::intercept(R (*original)(Args...), Args... arguments) {
  // A fork child's runtime is its own (HIP does not survive fork): its work is not observed.
  if (inside_wrapper || !observing() || forked_) return original(arguments...);
  inside_wrapper = true;
  struct leave {
    ~leave() { inside_wrapper = false; }
  } on_return;

  const work described = describe_call<C>(arguments...);
  const std::uint64_t correlation = next_correlation();
  hipEvent_t start = nullptr, stop = nullptr;
  if (described.kind != work_kind::call) {
    std::lock_guard lock{mutex_};
    start = take_event();
    stop = take_event();
  }
  const bool started = start && stop && hip_.event_record(start, described.stream) == hipSuccess;
  const std::int64_t begin_ns = host_now_ns();
  const R result = original(arguments...);
  const std::int64_t end_ns = host_now_ns();
  const bool launched = started && result == hipSuccess && hip_.event_record(stop, described.stream) == hipSuccess;

  tally_api(end_ns - begin_ns);
  emit(api_call{runtime_api::hip, wrapped_functions[static_cast<std::size_t>(C)].symbol, begin_ns, end_ns, correlation,
                current_tid()});
  if (described.kind != work_kind::call) {
    const ledger_entry ledger =
        described.kind == work_kind::kernel ? tally_kernel() : tally_copy(described.copy, described.bytes);
    if (launched) {
      int device = 0;
      if (hip_.get_device(&device) != hipSuccess) device = 0;
      const char* name = nullptr;
      if (described.function && hip_.kernel_name_by_pointer)
        name = hip_.kernel_name_by_pointer(described.function, described.stream);
      else if (described.module_function && hip_.kernel_name)
        name = hip_.kernel_name(described.module_function);
      pending_work pending{described.kind,
                           device,
                           described.stream,
                           start,
                           stop,
                           name ? name : "",
                           reinterpret_cast<std::uint64_t>(described.function),
                           described,
                           ledger,
                           correlation,
                           capture_call_site(begin_ns)};
      std::lock_guard lock{mutex_};
      pending_.push_back(std::move(pending));
    } else {
      std::lock_guard lock{mutex_};
      if (start) free_events_.push_back(start);
      if (stop) free_events_.push_back(stop);
      resolve(ledger, 0);  // nothing ran
    }
  }
  if (described.synchronises && result == hipSuccess) poll();
  return result;
}

problem hip::resolve_functions(void* library) {
  problem missing;  // the first required symbol not found
  auto find = [&](auto& pointer, const char* symbol, bool required) {
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(dlsym(library, symbol));
    if (pointer == nullptr && required && !missing)
      missing = problem{std::string{"the HIP runtime loaded here has no "} + symbol};
  };
  find(hip_.get_device_count, "hipGetDeviceCount", true);
  find(hip_.get_device, "hipGetDevice", true);
  find(hip_.set_device, "hipSetDevice", true);
  find(hip_.get_device_properties, "hipGetDeviceProperties", true);
  find(hip_.error_string, "hipGetErrorString", true);
  find(hip_.error_name, "hipGetErrorName", true);
  find(hip_.event_create, "hipEventCreateWithFlags", true);
  find(hip_.event_destroy, "hipEventDestroy", true);
  find(hip_.event_record, "hipEventRecord", true);
  find(hip_.event_query, "hipEventQuery", true);
  find(hip_.event_synchronize, "hipEventSynchronize", true);
  find(hip_.event_elapsed, "hipEventElapsedTime", true);
  find(hip_.stream_create, "hipStreamCreateWithFlags", true);
  find(hip_.kernel_name_by_pointer, "hipKernelNameRefByPtr", false);
  find(hip_.kernel_name, "hipKernelNameRef", false);
  return missing;
}

problem hip::start() {
  if (forked_) return problem{"a fork child does not observe the HIP runtime its parent started"};
  const auto path = loaded_object("libamdhip64.so");
  void* library = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (library == nullptr) return problem{"no HIP runtime (libamdhip64) is loaded in this process"};
  problem unresolved = resolve_functions(library);
  dlclose(library);  // RTLD_NOLOAD took a reference; the program's own keeps it loaded
  if (unresolved) return unresolved;

  int count = 0;
  if (const hipError_t error = hip_.get_device_count(&count); error != hipSuccess || count == 0)
    return problem{error != hipSuccess ? describe(hip_, error) : "the HIP runtime sees no device"};
  int current = 0;
  if (hip_.get_device(&current) != hipSuccess) current = 0;
  for (int index = 0; index < count; ++index) {
    hipDeviceProp_t properties{};
    if (hip_.get_device_properties(&properties, index) != hipSuccess) continue;
    emit(device_info{runtime_api::hip, index, properties.name, properties.gcnArchName, properties.totalGlobalMem,
                     properties.multiProcessorCount, properties.clockRate, properties.memoryClockRate});
  }
  {
    std::lock_guard lock{mutex_};
    references_.assign(static_cast<std::size_t>(count), {});
    reference_streams_.assign(static_cast<std::size_t>(count), nullptr);
    if (!renew_reference(current))
      return problem{"cannot record a reference event on device " + std::to_string(current)};
  }
  observing_.store(true, std::memory_order_release);
  problem not_wrapped = install_wrappers();
  if (not_wrapped) observing_.store(false, std::memory_order_release);
  return not_wrapped;
}

// A problem when no wrapped function is defined: the first wrapper that could not be installed,
// else that none is defined. Some defined is enough to observe (a runtime without one call).
problem hip::install_wrappers() {
  std::size_t defined = 0;
  problem first_failure;
  for (const auto& function : wrapped_functions) {
    const auto status = function.wrap(function.symbol);
    if (status.defined) ++defined;
    if (!status.installed && !first_failure) first_failure = status.failure;
  }
  if (defined > 0) return {};
  return first_failure ? first_failure : problem{"none of the HIP functions kairos wraps is defined"};
}

hipEvent_t hip::take_event() {
  if (!free_events_.empty()) {
    hipEvent_t event = free_events_.back();
    free_events_.pop_back();
    return event;
  }
  hipEvent_t event = nullptr;
  return hip_.event_create(&event, hipEventDefault) == hipSuccess ? event : nullptr;
}

bool hip::renew_reference(int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= references_.size()) return false;
  int current = 0;
  if (hip_.get_device(&current) != hipSuccess || (current != device && hip_.set_device(device) != hipSuccess))
    return false;
  auto& stream = reference_streams_[static_cast<std::size_t>(device)];
  bool renewed = false;
  if (stream != nullptr || hip_.stream_create(&stream, hipStreamNonBlocking) == hipSuccess) {
    hipEvent_t event = take_event();
    const std::int64_t before = host_now_ns();
    if (event && hip_.event_record(event, stream) == hipSuccess && hip_.event_synchronize(event) == hipSuccess) {
      const std::int64_t after = host_now_ns();
      auto& kept = references_[static_cast<std::size_t>(device)];
      if (kept.event) free_events_.push_back(kept.event);
      kept = {event, before + (after - before) / 2};
      renewed = true;
    } else if (event) {
      free_events_.push_back(event);
    }
  }
  // Back to the thread's own device (this may be a program thread, in a synchronisation's poll).
  if (current != device && hip_.set_device(current) != hipSuccess) renewed = false;
  return renewed;
}

void hip::resolve_completed(bool wait, std::int64_t deadline_ns) {
  for (std::size_t device = 0; device < references_.size(); ++device)
    if (references_[device].event && host_now_ns() - references_[device].host_ns > reference_interval_ns)
      renew_reference(static_cast<int>(device));
  std::erase_if(pending_, [&](pending_work& work) {
    if (hip_.event_query(work.stop) != hipSuccess) {
      if (!wait || host_now_ns() >= deadline_ns || hip_.event_synchronize(work.stop) != hipSuccess) return false;
    }
    float duration_ms = 0, since_reference_ms = 0;
    const auto& reference = references_[static_cast<std::size_t>(work.device)];
    if (!reference.event) renew_reference(work.device);
    // A time the runtime cannot give (it should, for two completed events) counts as none: the
    // work is kept, at its call's host time, rather than dropped.
    if (hip_.event_elapsed(&duration_ms, work.start, work.stop) != hipSuccess) duration_ms = 0;
    std::int64_t start_ns = work.site.call_ns;
    if (reference.event && hip_.event_elapsed(&since_reference_ms, reference.event, work.start) == hipSuccess)
      start_ns = reference.host_ns + static_cast<std::int64_t>(double{since_reference_ms} * 1e6);
    const auto device_ns = static_cast<std::int64_t>(double{duration_ms} * 1e6);
    const auto stream = reinterpret_cast<std::uint64_t>(work.stream);
    if (work.kind == work_kind::kernel) {
      emit(kernel_activity{runtime_api::hip, work.device, stream, demangled_once(work.mangled_name),
                           work.function_address, start_ns, start_ns + device_ns, work.described.grid,
                           work.described.block, work.described.shared_bytes, work.correlation, std::move(work.site)});
    } else {
      emit(copy_activity{runtime_api::hip, work.device, stream, work.described.copy, work.described.bytes, start_ns,
                         start_ns + device_ns, work.described.asynchronous, work.correlation, std::move(work.site)});
    }
    resolve(work.ledger, device_ns);
    free_events_.push_back(work.start);
    free_events_.push_back(work.stop);
    return true;
  });
}

void hip::poll() {
  if (!observing() || forked_) return;
  std::lock_guard lock{mutex_};
  resolve_completed(false, 0);
}

void hip::drain(std::int64_t timeout_ns) {
  if (!observing() || forked_) return;
  std::lock_guard lock{mutex_};
  resolve_completed(true, host_now_ns() + timeout_ns);
}

void hip::stop() {
  if (!observing_.exchange(false)) return;
  for (const auto& function : wrapped_functions) function.unwrap();
}

}  // namespace

backend& hip_backend() { return the_backend(); }

}  // namespace kairos::gpu::detail

#else  // built without HIP's headers

namespace kairos::gpu::detail {
backend& hip_backend() {
  static unavailable_backend kept{runtime_api::hip,
                                  "kairos was built without HIP's headers (Debian package libamdhip64-dev)"};
  return kept;
}
}  // namespace kairos::gpu::detail

#endif
