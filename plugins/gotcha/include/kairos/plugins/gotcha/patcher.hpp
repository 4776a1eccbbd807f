#pragma once
// kairos's ELF GOT patcher (x86-64 Linux, glibc). A binding names a symbol and the wrapper that
// replaces it; installing it rewrites every GOT slot of every loaded object that binds the symbol
// (PLT slots, -fno-plt slots, absolute function pointers in data) to the wrapper, and keeps doing
// so for libraries loaded later with dlopen. The wrapper reaches the original through `next`.
#include <kairos/plugins/gotcha/binding.hpp>

#include <string>
#include <string_view>

#if defined(KAIROS_GOTCHA_AVAILABLE) && !KAIROS_GOTCHA_AVAILABLE
#include <kairos/plugins/gotcha/unavailable_patcher.hpp>
#else

namespace kairos::gotcha_patcher {

// Installs `b` (which must stay at the same address until removed) as the outermost wrapper of
// its symbol. A symbol defined nowhere, or bound by no slot, is reported in the status; the
// binding stays installed in both cases so that a library loaded later can still be wrapped.
// Thread-safe; not async-signal-safe.
wrap_status install(binding& b);

// Takes `b` out: slots reaching it go to the wrapper below it, or back to the original.
// Returns false when `b` is not installed.
bool remove(binding& b);

// Applies every installed binding to the objects loaded since the last pass (done after each
// dlopen); to every loaded object when a binding came or went, an original was found, or an
// object was unloaded since.
void reapply();

// How many GOT slots bind `symbol` in the loaded objects, and how many of them hold `value`.
slot_census count_slots(std::string_view symbol, const void* value);

// The name (without a version) of the function whose wrapper starts at `wrapper`: "MPI_Allreduce"
// for the wrapper a binding of "MPI_Allreduce" installed. Removed bindings' wrappers stay known:
// a profile names the frames of samples taken while they were in place later. A profile shows
// the frame as that name, not as the wrapper's template instance. "" for any other address.
std::string wrapped_symbol(const void* wrapper);

// Never patch the object containing `address_in_object` (the runtime excludes itself this way;
// this library is always excluded).
void exclude_object(const void* address_in_object);

// Whether the patcher works on this platform.
bool available() noexcept;

}  // namespace kairos::gotcha_patcher

#endif
