// Opts in to the report at exit, records a region, and leaves through exit() from a helper thread's
// caller: the report must appear on stderr and in the JSON file, once.
#include <cstdlib>
#include <thread>

#include <kairos/auto_tuple.hpp>
#include <kairos/report_at_exit.hpp>
#include <kairos/report_json.hpp>  // report_at_exit writes JSON only where this is included

int main(int argc, char** argv) {
  kairos::report_at_exit({.text_stream = stderr, .json_path = argc > 1 ? argv[1] : ""});
  kairos::report_at_exit({.text_stream = stderr, .json_path = argc > 1 ? argv[1] : ""});  // once
  std::thread{[] { KAIROS_REGION("worker_region"); }}.join();
  { KAIROS_REGION("exit_region"); }
  std::exit(3);  // the exit status is the program's own
}
