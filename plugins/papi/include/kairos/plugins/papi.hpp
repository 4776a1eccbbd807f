#pragma once
// kairos::papi_vector (events chosen at run time) and kairos::papi_array<N> (fixed, no allocation
// on read): PAPI counters of the calling thread. Without libpapi-dev at configure time, stubs that
// say so. See docs/plugins/papi.md.
#if defined(KAIROS_PAPI_FOUND) && KAIROS_PAPI_FOUND
#include <kairos/plugins/papi/event_counters.hpp>
#include <kairos/plugins/papi/papi_array.hpp>
#include <kairos/plugins/papi/papi_vector.hpp>
#else
#include <kairos/plugins/papi/papi_stub.hpp>
#endif
