// Init before main, finalize once on every path, fork and exec (docs/runtime.md tells the story).
// The stages are rows of the stage table (stages.hpp): this file walks them and names none.
//
// Init: a constructor of libkairos.so. A preloaded library's constructors run after those of
// the libraries it needs (libc, libstdc++) and before the program's own constructors and main,
// so every static object of the program and every thread it makes is seen.
//
// Finalize, exactly once, whichever way the process ends:
//   return from main, exit() from any thread: an atexit handler registered by the constructor. It
//     was registered before the program's own, so it runs after them, on the exiting thread.
//   _exit/_Exit: the wrapper, before the real one.
//   SIGINT, SIGTERM at their default: the service thread (termination.hpp).
//   exec: what this image collected goes into the database, which the next image goes on with
//     (one profile per exec chain, docs/runtime.md); the next image writes the outputs.
//
// fork: the prepare handler takes every stage's lock (in the table's order) and builds what a
// child needs; the child handler runs only async-signal-safe code (another thread of the parent
// may have held any libc lock at the fork: __exit_funcs_lock, the environment's); what a followed
// child must build (its database, its stem) is built later, in ordinary code, on first use.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

#include "common/proc_file.hpp"
#include "preload/process/environment.hpp"
#include "preload/process/lifecycle.hpp"
#include "preload/process/output_stem.hpp"
#include "preload/process/run.hpp"
#include "preload/process/run_end.hpp"
#include "preload/process/stages.hpp"
#include "preload/process/termination.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/file_size_signal.hpp"
#include "preload/support/own_costs.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/problems.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/support/signal_name.hpp"

extern char** environ;

namespace kairos::runtime {
namespace {

constexpr const char* mpi_default_output_path = "kairos-output/%exe%-%launch_date%-%launch_id%/rank%rank%";

std::atomic<runtime_state> state{runtime_state::loading};

// Set once by the constructor, then read. On the heap and never destroyed: finalize may run after
// static destructors, and the constructor may run before this file's dynamic initializers.
process_run* globals = nullptr;

std::atomic<bool> finalize_started{false};
std::atomic<bool> finalize_done{false};
std::atomic<pid_t> finalizing_thread{0};
std::atomic<bool> database_left_for_exec{false};

std::string read_command_line() {
  auto text = read_proc_file("/proc/self/cmdline").value_or("");
  for (auto& c : text)
    if (c == '\0') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// "PID:N[:STEM]" → N and STEM when PID is this process, else 0 and "".
std::pair<long, std::string> generation_of(pid_t pid) {
  const auto value = environment_value(setting::exec_generation);
  const auto colon = value.find(':');
  if (colon == std::string::npos || value.substr(0, colon) != std::to_string(pid)) return {0, {}};
  char* end = nullptr;
  const long generation = std::strtol(value.c_str() + colon + 1, &end, 10);
  return {generation, *end == ':' ? std::string{end + 1} : std::string{}};
}

void finalize(const std::string& end_reason) {
  if (finalize_started.exchange(true)) {
    // Another path (exit on another thread, a signal) is finalizing: let it finish, bounded.
    if (finalizing_thread.load() != gettid()) wait_until([] { return finalize_done.load(); }, finalize_timeout);
    return;
  }
  reentry_guard guard;
  finalizing_thread.store(gettid());
  state.store(runtime_state::finalizing, std::memory_order_seq_cst);
  for_each_stage<&stage::deactivate>();
  // A fork child that recorded nothing (the usual fork-then-_exit) does nothing at all here:
  // another thread of its parent may have held a libc lock at the fork.
  bool recorded = globals->identity.launched;
  for (const auto* stage : runtime_stages()) recorded = recorded || (stage->recorded && stage->recorded());
  if (recorded) {
    for_each_stage<&stage::quiesce>();
    file_size_signal_guard quota;
    report(capture_problem("writing the outputs failed; the program is unaffected",
                           [&] { write_everything(end_reason, false); }));
    if (verbosity() > 0) report("own time, wall/CPU: " + own_costs_text());
  }
  state.store(runtime_state::finalized, std::memory_order_seq_cst);
  finalize_done.store(true);
}

void finalize_at_exit() {
  if (state.load() == runtime_state::active) finalize("exit");
}

void finalize_on_signal(int signal_number) {
  const auto now = state.load();
  if (now == runtime_state::active || now == runtime_state::finalizing)
    finalize(fmt::format("signal {}", signal_name(signal_number)));
  else
    finalize_done.store(true);
}

void flush_on_tick() {
  if (state.load() != runtime_state::active) return;
  for_each_stage<&stage::tick>();
}

bool finished() { return finalize_done.load(); }
bool finalizing_here() { return finalizing_thread.load() == gettid(); }

// --- fork ------------------------------------------------------------------------------------

// The table gives the one lock order (stages.hpp).
void before_fork() {
  if (state.load() != runtime_state::active) return;
  prepare_child_environment();
  for_each_stage<&stage::lock_for_fork>();
}
void after_fork_in_parent() {
  if (state.load() != runtime_state::active) return;
  for_each_stage_reversed<&stage::unlock_in_parent>();
}
// Async-signal-safe only (see the top of this file).
void after_fork_in_child() {
  if (state.load() != runtime_state::active) return;
  for_each_stage_reversed<&stage::in_child>();
  globals->identity.launched = false;
  globals->identity.generation = 0;
  if (!globals->values.boolean(setting::follow_children)) {
    // Not followed: the child runs as without kairos, and so do its descendants.
    state.store(runtime_state::off);
    for_each_stage<&stage::off_in_child>();
    restore_default_termination_handlers();
    remove_kairos_from_environment_in_child();
    release_stderr();
    return;
  }
  // Followed: its database and stem come with its first row (ordinary code). The parent's
  // service thread does not exist here: SIGINT/SIGTERM end a followed child without outputs.
  restore_default_termination_handlers();
  finalize_started.store(false);
  finalize_done.store(false);
  globals->identity.pid = getpid();
}

// --- init ------------------------------------------------------------------------------------

void on_window_edge() noexcept { for_each_stage<&stage::window_edge>(); }

// What a stage said at its start, said once per launch (stage_start).
void say(const stage_start& started, bool speaks_for_launch) {
  if (!speaks_for_launch) return;
  for (const auto& line : started.problems) report(line);
  if (verbosity() > 0)
    for (const auto& note : started.notes) report(note);
}

// Who this process is (launched, followed, which image of an exec chain) and its settings.
void read_identity_and_settings() {
  globals = new process_run{};
  auto& run = *globals;
  run.started_ns = steady_now_ns();
  run.identity.pid = getpid();
  const auto launch_pid = environment_value(setting::launch_pid);
  if (launch_pid.empty()) {
    // Preloaded by hand, not through kairos-run: this process is the launched one.
    set_environment_value(setting::launch_pid, std::to_string(run.identity.pid));
    run.identity.launched = true;
  } else {
    run.identity.launched = launch_pid == std::to_string(run.identity.pid);
  }
  std::tie(run.identity.generation, run.identity.chain_stem) = generation_of(run.identity.pid);

  run.values = settings::load(environ);
  set_verbosity(static_cast<int>(run.values.integer(setting::verbose)));
  measure_own_costs(verbosity() > 0);
  run.formats = run.values.list(setting::output_formats);
  run.launch = launch_of_this_process();
}

// Problems and notes are said once per launch: by the first image of the launched process, and
// of an MPI launch's processes by rank 0 only (every rank reads the same settings).
bool speaks_for_launch(const process_run& run) {
  return run.identity.launched && run.identity.generation == 0 && run.launch.rank.value_or(0) == 0;
}

// Whether kairos profiles this process: false for a child not followed, refused settings,
// KAIROS_ENABLED=false, or an output directory that cannot be made.
bool profiled(process_run& run, bool speaks) {
  if (!run.identity.launched && !run.values.boolean(setting::follow_children))
    return false;  // a child of the launched process (spawned, or forked before this exec): left alone
  if (speaks)
    for (const auto& line : run.values.problems()) report(line);
  if (!run.values.usable() || !run.values.boolean(setting::enabled)) return false;
  export_launch_variables(false);
  run.command_line = read_command_line();
  // The ranks of one launch write side by side, in a directory of their own (docs/mpi.md).
  if (run.launch.size.value_or(1) > 1 && run.values.at(setting::output_path).source == setting_source::default_value)
    run.values.set(setting::output_path, mpi_default_output_path, setting_source::default_value);
  // An output directory that cannot be made is said at the start, not at the end (or never, for a
  // run that records nothing). kairos-run checked before the exec; this is for LD_PRELOAD alone.
  if (speaks && !run.formats.empty())
    if (auto blocked = check_output_directory(run.values.text(setting::output_path))) {
      report(blocked.text() + "; kairos is disabled for this run");
      return false;
    }
  return true;
}

void start_stages() {
  reentry_guard guard;
  prepare_private_descriptors();
  prepare_environment_editing();
  read_identity_and_settings();
  auto& run = *globals;
  const bool speaks = speaks_for_launch(run);
  if (!profiled(run, speaks)) {
    state.store(runtime_state::off);
    return;
  }
  keep_stderr();
  start_context context{run, !run.formats.empty(), speaks, &on_window_edge};
  for (const auto* stage : runtime_stages_by_start()) {
    if (!stage->start) continue;
    const auto started = stage->start(context);
    say(started, speaks);
    if (started.disables) {
      release_stderr();
      state.store(runtime_state::off);
      return;
    }
  }
  atexit(&finalize_at_exit);
  pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
  if (!start_termination_handling({&finalize_on_signal, &flush_on_tick, &finished, &finalizing_here}) &&
      verbosity() > 0)
    report("could not start the service thread; SIGINT/SIGTERM end the program without outputs");
  state.store(runtime_state::active, std::memory_order_release);
  for (const auto* stage : runtime_stages_by_start())
    if (stage->activate) say(stage->activate(context), speaks);
  if (verbosity() > 0)
    report(fmt::format("profiling pid {} ({}{})", run.identity.pid,
                       run.identity.launched ? "launched process" : "followed child",
                       run.identity.generation ? fmt::format(", exec {}", run.identity.generation) : std::string{}));
}

void initialize() {
  start_stages();
  // kairos's variables leave the program's environment once read (docs/reliability.md), and come
  // back for the execs it follows. With children followed they stay: a child that system(),
  // popen() or posix_spawn starts reads them with no wrapper of kairos's in between.
  if (!globals->values.boolean(setting::follow_children)) remove_kairos_from_environment();
}

__attribute__((constructor)) void initialize_before_main() {
  own_cost_timer cost{own_cost::start_up};
  if (auto failure = capture_problem("initialization failed", [] { initialize(); })) {
    state.store(runtime_state::off);
    report(failure.text() + "; the program runs without kairos");
  }
}

}  // namespace

process_run& this_run() noexcept { return *globals; }

runtime_state current_state() noexcept { return state.load(std::memory_order_acquire); }

// A new thread: the registry first (the table's last row), then the stages that watch threads.
void on_thread_start(bool kairos_owned) noexcept {
  if (state.load() == runtime_state::off) return;
  for_each_stage_reversed<&stage::thread_started>(kairos_owned, state.load() == runtime_state::active);
}

void on_thread_end() noexcept { for_each_stage<&stage::thread_ending>(); }

void on_signal_mask_changed(const sigset_t& mask) noexcept { for_each_stage<&stage::signal_mask_changed>(mask); }

exec_environment environment_for_exec(char* const* environment) {
  if (!globals) return {};
  const auto now = state.load();
  const bool vfork_child = getpid() != globals->identity.pid;  // a vfork child shares our memory
  if (vfork_child) return {};
  const bool profiled = now == runtime_state::active || (globals->identity.launched && now != runtime_state::loading);
  const bool strip = now == runtime_state::off && !globals->identity.launched;
  // The next image goes on with this image's profile, under the chain's one stem.
  const auto chain_stem = now == runtime_state::active && !globals->formats.empty() ? ":" + claimed_stem() : "";
  return environment_for_exec(
      environment, profiled, strip,
      fmt::format("{}:{}{}", globals->identity.pid, globals->identity.generation + 1, chain_stem));
}

void before_exec() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  file_size_signal_guard quota;
  report(capture_problem("writing the profile before exec failed",
                         [] { database_left_for_exec.store(write_everything("exec", true)); }));
}

void before_exit_without_handlers() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  finalize("_exit");
}

void after_failed_exec(int error) {
  // The image goes on, unsampled (its stages stopped before the exec): its profile, in the
  // database, is continued at exit and its outputs written then. A later exec continues it too.
  if (!globals || !globals->stopped_for_exec || getpid() != globals->identity.pid) return;
  globals->failed_exec = std::strerror(error);
  if (!database_left_for_exec.exchange(false)) return;
  continue_after_failed_exec();
}

}  // namespace kairos::runtime
