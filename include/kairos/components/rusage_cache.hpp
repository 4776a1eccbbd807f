#pragma once
// One getrusage(RUSAGE_SELF) reading, shared by every rusage-based member of a bundle: a bundle
// with user_clock, system_clock and peak_rss makes one system call per start/stop, not three.
#include <sys/resource.h>

#include <cstdint>

#include <kairos/components/phase_total.hpp>

namespace kairos {

struct rusage_cache {
  ::rusage usage{};

  rusage_cache() noexcept { getrusage(RUSAGE_SELF, &usage); }

  static std::int64_t to_ns(const ::timeval& time) noexcept {
    return std::int64_t{time.tv_sec} * 1'000'000'000 + std::int64_t{time.tv_usec} * 1'000;
  }
};

// The members every rusage-based component has: its reading comes from the bundle's shared cache
// when it is in a bundle, from its own getrusage call when used alone.
template <class Derived, class Value>
struct rusage_component {
  using cache_type = rusage_cache;
  using value_type = Value;

  static value_type record() noexcept { return Derived::read(rusage_cache{}); }
  static value_type record(const rusage_cache& cache) noexcept { return Derived::read(cache); }
  void start() noexcept { start(rusage_cache{}); }
  void start(const rusage_cache& cache) noexcept { phase.begin(Derived::read(cache)); }
  void stop() noexcept { stop(rusage_cache{}); }
  void stop(const rusage_cache& cache) noexcept { phase.end(Derived::read(cache)); }

  const value_type& total() const noexcept { return phase.total; }

 protected:
  phase_total<value_type> phase;
};

}  // namespace kairos
