#pragma once
// kairos::perf_counters: perf_event_open counters of the calling thread, by event name.
// Needs only the kernel headers (linux/perf_event.h); see docs/plugins/perf.md.
#include <kairos/plugins/perf/event_catalog.hpp>
#include <kairos/plugins/perf/open_event.hpp>
#include <kairos/plugins/perf/perf_counters.hpp>
#include <kairos/plugins/perf/thread_event_set.hpp>
