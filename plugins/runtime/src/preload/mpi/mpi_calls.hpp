#pragma once
// Producer: MPI (docs/mpi.md). Where an MPI library is loaded, MPI_Init, MPI_Init_thread,
// MPI_Finalize and the point-to-point and collective calls are wrapped by GOT patching
// (kairos::gotcha): libkairos.so never links MPI, and finds what it calls itself (PMPI_Comm_rank,
// PMPI_Type_size) with dlsym. Each thread appends its calls to a log of its own; the pipeline takes
// them in batches (mpi_call_batch.hpp).
#include <cstdint>
#include <optional>
#include <string>

#include "preload/mpi/mpi_call_batch.hpp"

namespace kairos::runtime {

// At init (`wanted`: KAIROS_MPI=auto): wraps MPI if a library is loaded; the note says so.
std::optional<std::string> start_mpi(bool wanted);
// The service thread's tick: an MPI library loaded since (dlopen, as mpi4py does) is wrapped.
void mpi_tick();
// The calls every thread made since the last take, into `batch` (cleared first; its storage is kept).
void take_mpi_calls(mpi_call_batch& batch);
// The rank and size MPI_Init gave, once it has returned.
std::optional<mpi_world> mpi_world_from_mpi() noexcept;
bool mpi_observed() noexcept;
// Calls not recorded because a thread's log was full (said at exit).
std::uint64_t mpi_calls_dropped() noexcept;
// fork child (async-signal-safe): MPI is the parent's; nothing more is recorded or taken.
void mpi_forget_after_fork_in_child() noexcept;

}  // namespace kairos::runtime
