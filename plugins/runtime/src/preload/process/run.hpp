#pragma once
// What the constructor learnt about this process and run, set once at init and read by the
// stages' starts, the exit writer and the stem's claim (lifecycle.cpp owns it).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/settings.hpp>

namespace kairos::runtime {

struct process_identity {
  pid_t pid = 0;
  bool launched = false;   // the process kairos-run started (possibly after execs)
  long generation = 0;     // execs this process has gone through before this image
  std::string chain_stem;  // the stem the earlier images of this exec chain write under ("": none)
};

// What the stages decided at their start that others (metadata, the exit line) need at the end.
struct run_facts {
  bool causal_wanted = false;      // KAIROS_CAUSAL: experiments were started
  bool windows_planned = false;    // KAIROS_TRACE_PERIODS or KAIROS_TRACE_WINDOWS_FILE
  std::string sampling_off;        // why sampling never ran (empty: it was started)
  bool sampling_off_said = false;  // by the refused value's own line, at the start
};

struct process_run {
  process_identity identity;
  settings values;
  std::vector<std::string> formats;  // KAIROS_OUTPUT_FORMATS
  std::string command_line;
  run_facts facts;
  bool stopped_for_exec = false;  // the stages stopped before an exec (that failed: the image went on)
  std::string failed_exec;        // why that exec failed
  std::int64_t started_ns = 0;    // steady clock, at init
  launch_identity launch;         // the MPI launch this process is a rank of, if any
};

// Valid once the constructor began (the only callers run after it).
process_run& this_run() noexcept;

}  // namespace kairos::runtime
