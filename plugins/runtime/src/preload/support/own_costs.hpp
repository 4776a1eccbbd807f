#pragma once
// What kairos itself costs a run, by part: the wall and CPU time (of the thread doing it) each
// part took, so a user or a benchmark can see where a run's fixed cost goes (KAIROS_VERBOSE=1
// prints it after the summary; benchmarks/sampling/overhead.py takes medians of it).
// Parts may nest (sample delivery includes the symbols and the database's creation it needed);
// each says its own total. Measured only where it is said: a thread's CPU clock is a system call,
// so a timer reads nothing once the settings say the line is not wanted.
#include <cstdint>
#include <string>

namespace kairos::runtime {

enum class own_cost : int {
  start_up,           // the constructor: settings, threads, sampler set-up
  sample_delivery,    // samples into the database, during the run and at its end
  database_creation,  // the file, its schema and first rows
  symbols,            // symbolizing sampled addresses (libdw loaded on first use)
  unwind_tables,      // compiling the unwind tables of the functions samples needed
  stopping,           // at the end: stopping the sampler and delivering what it holds
  database_end,       // at the end: last rows, deferred indexes, closing
  outputs,            // at the end: every output derived from the database
  process_sampling,   // reading the process's metrics, every period, on its own thread
  count
};

// Whether timers measure: true until the settings are read (the start-up timer begins before
// them), then whether the line will be said (KAIROS_VERBOSE > 0).
void measure_own_costs(bool wanted) noexcept;

// Adds to a part; thread-safe.
void add_own_cost(own_cost part, std::int64_t wall_ns, std::int64_t cpu_ns) noexcept;

// "start-up 1.2/1.1 ms, ..." (wall/CPU), the parts that cost anything, in the order above.
std::string own_costs_text();

// Times one stretch of one thread's work into a part.
class own_cost_timer {
 public:
  explicit own_cost_timer(own_cost part) noexcept;
  ~own_cost_timer();
  own_cost_timer(const own_cost_timer&) = delete;
  own_cost_timer& operator=(const own_cost_timer&) = delete;

 private:
  own_cost part_;
  bool measuring_;
  std::int64_t wall_start_ns_ = 0, cpu_start_ns_ = 0;
};

}  // namespace kairos::runtime
