// The MPI wrappers and each thread's log of calls.
//
// MPI's handles (MPI_Comm, MPI_Datatype, MPI_Op) are pointers in Open MPI and ints in MPICH and
// its derivatives (Intel MPI, MVAPICH, Cray MPICH). kairos builds against no mpi.h: a wrapper takes
// each handle as one machine word and passes it on unchanged. On x86-64, the only platform the
// patcher supports, a pointer and an int both travel in one 8-byte register or stack slot, and a
// callee that expects an int reads only its low half, so either ABI is passed through intact.
// MPI_COMM_WORLD is the address of ompi_mpi_comm_world in Open MPI, the constant 0x44000000 in
// the MPICH ABI.
#include "preload/mpi/mpi_calls.hpp"

#include <dlfcn.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <kairos/plugins/gotcha.hpp>

#include "preload/support/clock.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

using mpi_handle = std::uintptr_t;  // see the top of this file
constexpr int mpi_success = 0;
constexpr mpi_handle mpich_comm_world = 0x44000000;
constexpr std::int64_t library_recheck_ns = 500'000'000;

// A thread's calls: a ring of fixed size, mapped at the thread's first call (pages are touched only
// as rows are written). One producer (the thread), one consumer (the pipeline's flush, every
// 100 ms): 16,384 rows hold 160,000 calls a second; past that, calls are counted, not recorded.
struct mpi_call_log {
  static constexpr std::uint64_t capacity = 16'384;
  thread_record* thread = nullptr;
  mpi_call_row* rows = nullptr;
  std::atomic<std::uint64_t> written{0};
  std::atomic<std::uint64_t> read{0};

  void append(const mpi_call_row& row) noexcept;
};

// What kairos calls of MPI itself, found with dlsym: never through the program's GOT, never wrapped.
struct mpi_functions {
  int (*comm_rank)(mpi_handle, int*) = nullptr;
  int (*comm_size)(mpi_handle, int*) = nullptr;
  int (*type_size)(mpi_handle, int*) = nullptr;
  mpi_handle comm_world = 0;
};

// On the heap, never destroyed: wrappers may run until the process ends.
struct mpi_state {
  std::atomic<bool> wanted{false};
  std::atomic<bool> wrapped{false};
  std::atomic<bool> recording{false};  // from the wrapping to MPI_Finalize
  std::atomic<bool> forked{false};
  std::atomic<std::int64_t> last_check_ns{0};
  std::atomic<bool> world_known{false};
  std::atomic<bool> world_taken{false};
  mpi_world world;  // written once, before world_known
  mpi_functions mpi;
  std::atomic<std::uint64_t> dropped{0};
  std::mutex mutex;  // the list of logs: taken at a thread's first call and by the consumer
  std::deque<mpi_call_log> logs;
};
mpi_state* state = new mpi_state;

[[gnu::tls_model("initial-exec")]] thread_local mpi_call_log* this_thread_log = nullptr;

void mpi_call_log::append(const mpi_call_row& row) noexcept {
  const auto at = written.load(std::memory_order_relaxed);
  if (at - read.load(std::memory_order_acquire) == capacity) {
    state->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  rows[at % capacity] = row;
  written.store(at + 1, std::memory_order_release);
}

// The calling thread's log, mapped at its first call; nullptr when the mapping failed (the calls
// are then counted as dropped).
mpi_call_log* log_of_this_thread() noexcept {
  if (this_thread_log) [[likely]]
    return this_thread_log;
  void* rows = mmap(nullptr, mpi_call_log::capacity * sizeof(mpi_call_row), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (rows == MAP_FAILED) return nullptr;
  auto& thread = current_thread();
  std::lock_guard lock{state->mutex};
  auto& log = state->logs.emplace_back();
  log.thread = &thread;
  log.rows = static_cast<mpi_call_row*>(rows);
  return this_thread_log = &log;
}

template <class Function>
void find(Function& pointer, const char* symbol) {
  pointer = reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, symbol));
}

std::int64_t type_bytes(mpi_handle type) {
  int size = 0;
  if (!state->mpi.type_size || state->mpi.type_size(type, &size) != mpi_success) return 0;
  return size;
}
std::int64_t communicator_size(mpi_handle communicator) {
  int size = 0;
  if (!state->mpi.comm_size || state->mpi.comm_size(communicator, &size) != mpi_success) return 0;
  return size;
}
bool is_root(int root, mpi_handle communicator) {
  int rank = -1;
  return state->mpi.comm_rank && state->mpi.comm_rank(communicator, &rank) == mpi_success && rank == root;
}
std::int64_t sum(const int* counts, std::int64_t n) {
  std::int64_t total = 0;
  for (std::int64_t i = 0; counts && i < n; ++i) total += counts[i];
  return total;
}

struct call_description {
  std::int64_t bytes = -1;
  std::int32_t peer = -1;
};

// Bytes: what the call moves at this rank, from the arguments that are significant here (docs/mpi.md):
// a message's buffer; for gathers and all-to-alls what this rank receives (a gather's non-root what
// it sends); for scatters what the root sends and the others receive. Peer: the destination,
// source or root; a negative source (MPI_ANY_SOURCE) is none.
template <mpi_function F, class... Args>
call_description describe(Args... arguments) {
  [[maybe_unused]] const auto a = std::forward_as_tuple(arguments...);
  using enum mpi_function;
  call_description d;
  if constexpr (F == send || F == recv || F == isend || F == irecv) {
    d.bytes = std::get<1>(a) * type_bytes(std::get<2>(a));
    d.peer = std::get<3>(a) >= 0 ? std::get<3>(a) : -1;
  } else if constexpr (F == bcast) {
    d.bytes = std::get<1>(a) * type_bytes(std::get<2>(a));
    d.peer = std::get<3>(a);
  } else if constexpr (F == reduce) {
    d.bytes = std::get<2>(a) * type_bytes(std::get<3>(a));
    d.peer = std::get<5>(a);
  } else if constexpr (F == allreduce) {
    d.bytes = std::get<2>(a) * type_bytes(std::get<3>(a));
  } else if constexpr (F == alltoall || F == allgather) {
    d.bytes = std::get<4>(a) * type_bytes(std::get<5>(a)) * communicator_size(std::get<6>(a));
  } else if constexpr (F == alltoallv) {
    d.bytes = sum(std::get<5>(a), communicator_size(std::get<8>(a))) * type_bytes(std::get<7>(a));
  } else if constexpr (F == allgatherv) {
    d.bytes = sum(std::get<4>(a), communicator_size(std::get<7>(a))) * type_bytes(std::get<6>(a));
  } else if constexpr (F == gather || F == gatherv) {
    const auto communicator = std::get<7 + (F == gatherv)>(a);
    const int root = std::get<6 + (F == gatherv)>(a);
    d.peer = root;
    if (!is_root(root, communicator))
      d.bytes = std::get<1>(a) * type_bytes(std::get<2>(a));
    else if constexpr (F == gather)
      d.bytes = std::get<4>(a) * type_bytes(std::get<5>(a)) * communicator_size(communicator);
    else
      d.bytes = sum(std::get<4>(a), communicator_size(communicator)) * type_bytes(std::get<6>(a));
  } else if constexpr (F == scatter || F == scatterv) {
    const auto communicator = std::get<7 + (F == scatterv)>(a);
    const int root = std::get<6 + (F == scatterv)>(a);
    d.peer = root;
    if (!is_root(root, communicator))
      d.bytes = std::get<4 + (F == scatterv)>(a) * type_bytes(std::get<5 + (F == scatterv)>(a));
    else if constexpr (F == scatter)
      d.bytes = std::get<1>(a) * type_bytes(std::get<2>(a)) * communicator_size(communicator);
    else
      d.bytes = sum(std::get<1>(a), communicator_size(communicator)) * type_bytes(std::get<3>(a));
  }
  return d;
}

void learn_world() {
  int rank = 0, size = 0;
  if (!state->mpi.comm_rank || !state->mpi.comm_size) return;
  if (state->mpi.comm_rank(state->mpi.comm_world, &rank) != mpi_success ||
      state->mpi.comm_size(state->mpi.comm_world, &size) != mpi_success)
    return;
  state->world = {rank, size};
  state->world_known.store(true, std::memory_order_release);
}

template <mpi_function F, class R, class... Args>
R record_call(R (*original)(Args...), Args... arguments) {
  if (!state->recording.load(std::memory_order_relaxed) || !inside_window()) return original(arguments...);
  // MPI's own calls of wrapped functions inside this one (a collective built on point-to-point,
  // the Fortran bindings) go straight through: each call of the program is recorded once.
  reentry_guard guard;
  auto* log = log_of_this_thread();
  if (!log) {
    state->dropped.fetch_add(1, std::memory_order_relaxed);
    return original(arguments...);
  }
  const auto described = describe<F>(arguments...);
  const auto start_ns = steady_now_ns();
  const R result = original(arguments...);
  const auto end_ns = steady_now_ns();
  log->append({start_ns, end_ns, described.bytes, described.peer, current_window(), F});
  return result;
}

// MPI_Init and MPI_Init_thread: the program's own threads may start inside (progress threads), so
// no guard is held around them. Once MPI is up, kairos asks it for the rank and size.
template <class R, class... Args>
R initialize(R (*original)(Args...), Args... arguments) {
  const R result = original(arguments...);
  if (result == mpi_success) {
    reentry_guard guard;
    learn_world();
  }
  return result;
}

enum class lifecycle_call { init, init_thread, finalize };

template <class Call, Call C>
struct interceptor {
  template <class R, class... Args>
  R operator()(const gotcha_data&, R (*original)(Args...), Args... arguments) {
    if (state->forked.load(std::memory_order_relaxed)) return original(arguments...);
    if constexpr (std::is_same_v<Call, mpi_function>) {
      return record_call<C>(original, arguments...);
    } else if constexpr (C == lifecycle_call::finalize) {
      state->recording.store(false, std::memory_order_relaxed);  // MPI is gone after this
      return original(arguments...);
    } else {
      return initialize(original, arguments...);
    }
  }
};

template <class Call, Call C>
using wrapper = kairos::gotcha<1, interceptor<Call, C>, std::integral_constant<Call, C>>;

template <auto C, class Function>
constexpr wrapped_symbol entry(const char* symbol) {
  return wrapped_symbol::of<wrapper<decltype(C), C>, Function>(symbol);
}

using point_to_point = int(const void*, int, mpi_handle, int, int, mpi_handle);
using receive = int(void*, int, mpi_handle, int, int, mpi_handle, void*);
using nonblocking_send = int(const void*, int, mpi_handle, int, int, mpi_handle, void*);
using gather_type = int(const void*, int, mpi_handle, void*, int, mpi_handle, int, mpi_handle);
using all_to_all_type = int(const void*, int, mpi_handle, void*, int, mpi_handle, mpi_handle);
using enum mpi_function;
using enum lifecycle_call;

const std::array wrapped_functions{
    entry<init, int(int*, char***)>("MPI_Init"),
    entry<init_thread, int(int*, char***, int, int*)>("MPI_Init_thread"),
    entry<finalize, int()>("MPI_Finalize"),
    entry<send, point_to_point>("MPI_Send"),
    entry<recv, receive>("MPI_Recv"),
    entry<isend, nonblocking_send>("MPI_Isend"),
    entry<irecv, receive>("MPI_Irecv"),
    entry<wait, int(void*, void*)>("MPI_Wait"),
    entry<waitall, int(int, void*, void*)>("MPI_Waitall"),
    entry<waitany, int(int, void*, int*, void*)>("MPI_Waitany"),
    entry<waitsome, int(int, void*, int*, int*, void*)>("MPI_Waitsome"),
    entry<barrier, int(mpi_handle)>("MPI_Barrier"),
    entry<bcast, int(void*, int, mpi_handle, int, mpi_handle)>("MPI_Bcast"),
    entry<reduce, int(const void*, void*, int, mpi_handle, mpi_handle, int, mpi_handle)>("MPI_Reduce"),
    entry<allreduce, int(const void*, void*, int, mpi_handle, mpi_handle, mpi_handle)>("MPI_Allreduce"),
    entry<alltoall, all_to_all_type>("MPI_Alltoall"),
    entry<alltoallv, int(const void*, const int*, const int*, mpi_handle, void*, const int*, const int*, mpi_handle,
                         mpi_handle)>("MPI_Alltoallv"),
    entry<gather, gather_type>("MPI_Gather"),
    entry<gatherv, int(const void*, int, mpi_handle, void*, const int*, const int*, mpi_handle, int, mpi_handle)>(
        "MPI_Gatherv"),
    entry<allgather, all_to_all_type>("MPI_Allgather"),
    entry<allgatherv, int(const void*, int, mpi_handle, void*, const int*, const int*, mpi_handle, mpi_handle)>(
        "MPI_Allgatherv"),
    entry<scatter, gather_type>("MPI_Scatter"),
    entry<scatterv, int(const void*, const int*, const int*, mpi_handle, void*, int, mpi_handle, int, mpi_handle)>(
        "MPI_Scatterv"),
};
static_assert(wrapped_functions.size() == 3 + mpi_function_names.size(),
              "one wrapped_functions entry per lifecycle call and per mpi_function");

// Wraps MPI if a library is loaded now; under the guard (the patcher runs kairos's code).
std::optional<std::string> wrap_if_loaded() {
  reentry_guard guard;
  state->last_check_ns.store(steady_now_ns(), std::memory_order_relaxed);
  if (dlsym(RTLD_DEFAULT, "PMPI_Init") == nullptr) return std::nullopt;
  auto& mpi = state->mpi;
  find(mpi.comm_rank, "PMPI_Comm_rank");
  find(mpi.comm_size, "PMPI_Comm_size");
  find(mpi.type_size, "PMPI_Type_size");
  void* open_mpi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
  mpi.comm_world = open_mpi_world ? reinterpret_cast<mpi_handle>(open_mpi_world) : mpich_comm_world;
  const auto unwrapped = wrap_each(wrapped_functions);
  state->wrapped.store(true, std::memory_order_release);
  state->recording.store(true, std::memory_order_release);
  if (!unwrapped.empty()) return "MPI: could not wrap " + unwrapped + "; those calls are not recorded";
  return std::string{"MPI: observing "} + (open_mpi_world ? "Open MPI" : "an MPICH-ABI library");
}

}  // namespace

std::optional<std::string> start_mpi(bool wanted) {
  state->wanted.store(wanted, std::memory_order_release);
  if (!wanted) return std::nullopt;
  return wrap_if_loaded();
}

void mpi_tick() {
  if (!state->wanted.load(std::memory_order_acquire) || state->wrapped.load(std::memory_order_acquire) ||
      state->forked.load(std::memory_order_relaxed))
    return;
  if (steady_now_ns() - state->last_check_ns.load(std::memory_order_relaxed) < library_recheck_ns) return;
  if (auto note = wrap_if_loaded(); note && verbosity() > 0) report(*note);
}

void take_mpi_calls(mpi_call_batch& batch) {
  batch.clear();
  if (!state->wrapped.load(std::memory_order_acquire) || state->forked.load(std::memory_order_relaxed)) return;
  if (state->world_known.load(std::memory_order_acquire) && !state->world_taken.exchange(true))
    batch.world = state->world;
  std::lock_guard lock{state->mutex};
  for (auto& log : state->logs) {
    const auto from = log.read.load(std::memory_order_relaxed);
    const auto to = log.written.load(std::memory_order_acquire);
    for (auto at = from; at < to; ++at) batch.calls.push_back({log.thread, log.rows[at % mpi_call_log::capacity]});
    log.read.store(to, std::memory_order_release);
  }
}

std::optional<mpi_world> mpi_world_from_mpi() noexcept {
  if (!state->world_known.load(std::memory_order_acquire)) return std::nullopt;
  return state->world;
}

bool mpi_observed() noexcept { return state->wrapped.load(std::memory_order_acquire); }

std::uint64_t mpi_calls_dropped() noexcept { return state->dropped.load(std::memory_order_relaxed); }

void mpi_forget_after_fork_in_child() noexcept { state->forked.store(true, std::memory_order_relaxed); }

}  // namespace kairos::runtime
