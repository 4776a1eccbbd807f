#pragma once
// kairos::perf_counters: perf_event_open counters of the calling thread, by event name.
// Needs only the kernel headers (linux/perf_event.h); without them, a stub that says so.
// See docs/plugins/perf.md.
#if __has_include(<linux/perf_event.h>)
#include <kairos/plugins/perf/event_catalog.hpp>
#include <kairos/plugins/perf/open_event.hpp>
#include <kairos/plugins/perf/perf_counters.hpp>
#include <kairos/plugins/perf/thread_event_set.hpp>
#else
#include <kairos/plugins/perf/perf_counters_stub.hpp>
#endif
