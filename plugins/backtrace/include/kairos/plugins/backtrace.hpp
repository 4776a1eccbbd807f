#pragma once
// The backtrace plugin's sampling components, the trio a sampler bundles per sample:
//   kairos::backtrace_timestamp  wall time of the sample
//   kairos::backtrace<N>         the call stack (libunwind; see backtrace/capture.hpp)
//   kairos::backtrace_metrics    peak RSS and the thread's CPU time, faults and switches
// Each is async-signal-safe once kairos::backtrace_prewarm() ran on the thread.
// kairos::dl_guard marks a thread as inside the dynamic loader (see backtrace/dl_guard.hpp).
// Unwind tables compiled per function make captures ≈ 10× cheaper than libgcc's unwinder, on
// threads that registered their stack, for whoever builds them (see backtrace/unwind_tables.hpp).
// Symbolization, which is not signal-safe and needs libdw: <kairos/plugins/backtrace/symbolizer.hpp>.
#include <kairos/plugins/backtrace/call_stack.hpp>
#include <kairos/plugins/backtrace/capture.hpp>
#include <kairos/plugins/backtrace/dl_guard.hpp>
#include <kairos/plugins/backtrace/metrics.hpp>
#include <kairos/plugins/backtrace/timestamp.hpp>
#include <kairos/plugins/backtrace/unwind_tables.hpp>
