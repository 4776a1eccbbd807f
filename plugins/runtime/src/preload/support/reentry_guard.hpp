#pragma once
// libkairos.so's re-entry flag and guard (the guard itself is the core's kairos::reentry_guard).
// Set while kairos runs on a thread: the wrappers (interposed, and the GOT-patched GPU and MPI
// ones) and the user API call straight through, and a thread created while it is set is kairos's
// own (so the MPI wrappers hold it around a communication call, never around MPI_Init). One
// flag: the GOT patcher's, linked into libkairos.so, so both kinds of wrapper read the same one.
// Initial-exec TLS: libkairos.so is preloaded, so its TLS is static and a read is one load, with
// no __tls_get_addr call that could allocate.
#include <kairos/plugins/gotcha/reentry_guard.hpp>

namespace kairos::runtime {

using gotcha_patcher::inside_kairos;

class reentry_guard : public gotcha_patcher::inside_kairos_scope {};

}  // namespace kairos::runtime
