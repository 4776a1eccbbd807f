// Init before main, finalize once on every path, fork and exec.
//
// Init: a constructor of libkairos.so. A preloaded library's constructors run after those of
// the libraries it needs (libc, libstdc++) and before the program's own constructors and main,
// so every static object of the program and every thread it makes is seen.
//
// Finalize, exactly once, whichever way the process ends:
//   return from main, exit() from any thread: an atexit handler registered by the constructor. It
//     was registered before the program's own, so it runs after them, on the exiting thread.
//   SIGINT, SIGTERM (when the program left them at their default): the handler wakes kairos's
//     service thread, which finalizes in ordinary context (the interrupted thread may hold malloc's
//     lock: finalizing inside the handler could deadlock); the handler waits at most
//     finalize_timeout for it, then restores the default action and re-raises the signal, so the
//     process dies by that signal exactly as it would have without kairos.
//   exec: what this image collected is written (stem + "-exec<N>") before the new image starts.
#include <dlfcn.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/diagnostics.hpp"
#include "preload/profile_database.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/lifecycle.hpp"
#include "preload/reentry_guard.hpp"
#include "preload/regions.hpp"
#include "preload/report.hpp"
#include "preload/thread_registry.hpp"

extern char** environ;

namespace kairos::runtime {
namespace {

constexpr int finalize_timeout_ms = 10000;  // a SIGTERM'd program waits this long at most for its outputs
constexpr int busy_wait_limit_ms = 200;

std::atomic<runtime_state> state{runtime_state::loading};

struct process_identity {
  pid_t pid = 0;
  bool launched = false;     // the process kairos-run started (possibly after execs)
  bool followed_child = false;
  long generation = 0;       // execs this process has gone through before this image
};

// Set once by the constructor, then read. On the heap and never destroyed: finalize may run after
// static destructors, and the constructor may run before this file's dynamic initializers.
struct runtime_globals {
  process_identity identity;
  std::string output_stem;
  std::string command_line;
  std::string exec_snapshot_stem;
  std::string database_problem;  // why there is no profile database (printed at finalize)
};
runtime_globals* globals = nullptr;
settings* current_settings = nullptr;
bool handlers_installed[NSIG] = {};

std::atomic<bool> finalize_started{false};
std::atomic<bool> finalize_done{false};
std::atomic<pid_t> finalizing_thread{0};  // tid of the thread writing the outputs
std::atomic<int> pending_signal{0};
sem_t service_request;
bool service_thread_running = false;

std::string environment_value(std::string_view name) {
  const char* value = std::getenv(std::string{name}.c_str());
  return value ? value : "";
}

std::string read_command_line() {
  std::ifstream file{"/proc/self/cmdline", std::ios::binary};
  std::string text{std::istreambuf_iterator<char>{file}, {}};
  for (auto& c : text)
    if (c == '\0') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// "PID:N" → N when PID is this process, else 0.
long generation_of(pid_t pid) {
  const auto value = environment_value("KAIROS_EXEC_GENERATION");
  const auto colon = value.find(':');
  if (colon == std::string::npos) return 0;
  if (value.substr(0, colon) != std::to_string(pid)) return 0;
  return std::strtol(value.c_str() + colon + 1, nullptr, 10);
}

std::string this_library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&this_library_path), &info) && info.dli_fname)
    return info.dli_fname;
  return "libkairos.so";
}

bool is_this_library(std::string_view entry) {
  static const std::string own_path = this_library_path();
  if (entry == own_path) return true;
  std::error_code error;
  const auto canonical_entry = std::filesystem::weakly_canonical(std::string{entry}, error);
  const auto canonical_own = std::filesystem::weakly_canonical(own_path, error);
  return !error && canonical_entry == canonical_own;
}

// LD_PRELOAD without libkairos.so: what the program would have had without kairos-run.
// nullopt when kairos is not in it.
std::optional<std::string> preload_without_kairos(std::string_view preload) {
  std::string kept;
  bool removed = false;
  std::size_t position = 0;
  while (position <= preload.size()) {
    auto end = preload.find_first_of(": ", position);
    if (end == std::string_view::npos) end = preload.size();
    const auto entry = preload.substr(position, end - position);
    if (!entry.empty()) {
      if (is_this_library(entry)) {
        removed = true;
      } else {
        kept += (kept.empty() ? "" : ":") + std::string{entry};
      }
    }
    position = end + 1;
  }
  if (!removed) return std::nullopt;
  return kept;
}

// A child that is not followed: its descendants must not load kairos either.
void remove_kairos_from_environment() {
  const char* preload = std::getenv("LD_PRELOAD");
  if (!preload) return;
  if (auto kept = preload_without_kairos(preload)) {
    if (kept->empty())
      unsetenv("LD_PRELOAD");
    else
      setenv("LD_PRELOAD", kept->c_str(), 1);
  }
}

void restore_default_signal_handlers() {
  for (int signal_number : {SIGINT, SIGTERM})
    if (handlers_installed[signal_number]) {
      struct sigaction current {};
      sigaction(signal_number, nullptr, &current);
      // Only if the program did not install its own since.
      if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler != SIG_DFL &&
          current.sa_handler != SIG_IGN)
        signal(signal_number, SIG_DFL);
      handlers_installed[signal_number] = false;
    }
}

std::string describe_signal(int signal_number) {
  const char* name = sigabbrev_np(signal_number);
  return name ? fmt::format("signal SIG{}", name) : fmt::format("signal {}", signal_number);
}

bool wants_format(std::string_view format) {
  for (const auto& wanted : current_settings->list("KAIROS_OUTPUT_FORMATS"))
    if (wanted == format) return true;
  return false;
}

void remove_database_files(const std::string& path) {
  std::error_code error;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, error);
}

void write_outputs(const std::string& stem, const std::string& end_reason, bool summary,
                   const std::string& database_path) {
  report_request request{stem, current_settings->list("KAIROS_OUTPUT_FORMATS"), globals->command_line,
                         end_reason, database_path};
  const auto written = write_report(request);
  if (!written.problem.empty()) {
    print_line(written.problem);
    return;
  }
  if (!globals->database_problem.empty()) print_line(globals->database_problem);
  if (const auto untraced = regions_not_traced(); untraced > 0)
    print_line(fmt::format("[kairos] {} user-API regions came faster than the database writer could "
                           "keep; their rows are not in the database, but they are counted in the "
                           "report's region tables",
                           untraced));
  if (!summary || written.files.empty()) return;
  std::string files;
  for (const auto& file : written.files) files += (files.empty() ? "" : ", ") + file;
  std::size_t program_threads = 0;
  threads().for_each([&](const thread_record& record) { program_threads += !record.kairos_owned; });
  const auto regions = regions_recorded();
  const auto counts = database_counts_written();
  const auto samples = counts.samples + counts.realtime_samples;
  print_line(fmt::format("[kairos] {} sample{}, {} region{} on {} thread{}; outputs: {}", samples,
                         samples == 1 ? "" : "s", regions, regions == 1 ? "" : "s", program_threads,
                         program_threads == 1 ? "" : "s", files));
}

// Stops sampling (every buffer drained into the database) and closes the database; returns its
// path, or "" when there is none.
std::string finish_database(const std::string& end_reason) {
  stop_sampling();
  if (!profile_database_open()) return {};
  database_finish(end_reason);
  const auto path = profile_database_path();
  close_profile_database();
  return path;
}

// Waits (bounded) until no thread is inside a user-API call: they saw the state change and leave.
void wait_for_threads_to_leave() {
  const auto deadline = steady_now_ns() + std::int64_t{busy_wait_limit_ms} * 1'000'000;
  const auto* self = current_thread_if_registered();
  threads().for_each([&](const thread_record& record) {
    if (&record == self) return;
    while (record.busy.load(std::memory_order_seq_cst) && steady_now_ns() < deadline)
      sched_yield();
  });
}

void finalize(const std::string& end_reason) {
  if (finalize_started.exchange(true)) {
    // Another path (exit on another thread, a signal) is finalizing: let it finish, bounded.
    if (finalizing_thread.load() == gettid()) return;
    for (int waited = 0; waited < finalize_timeout_ms && !finalize_done.load(); ++waited)
      usleep(1000);
    return;
  }
  reentry_guard guard;
  finalizing_thread.store(gettid());
  state.store(runtime_state::finalizing, std::memory_order_seq_cst);
  try {
    wait_for_threads_to_leave();
    const auto database_path = finish_database(end_reason);
    write_outputs(globals->output_stem, end_reason, true, database_path);
    if (!database_path.empty() && !wants_format("db")) remove_database_files(database_path);
  } catch (const std::exception& error) {
    print_line(fmt::format("[kairos] writing the report failed: {}; the program is unaffected",
                           error.what()));
  } catch (...) {
    print_line("[kairos] writing the report failed; the program is unaffected");
  }
  state.store(runtime_state::finalized, std::memory_order_seq_cst);
  finalize_done.store(true);
}

void finalize_at_exit() {
  if (state.load() == runtime_state::active) finalize("exit");
}

// --- signals ---------------------------------------------------------------------------------

void sleep_one_millisecond() {
  timespec pause{0, 1'000'000};
  nanosleep(&pause, nullptr);
}

void on_termination_signal(int signal_number) {
  const int saved_errno = errno;
  // On the thread that is writing the outputs, waiting would wait for itself.
  if (service_thread_running && finalizing_thread.load() != gettid()) {
    int expected = 0;
    if (pending_signal.compare_exchange_strong(expected, signal_number)) sem_post(&service_request);
    for (int waited = 0; waited < finalize_timeout_ms && !finalize_done.load(); ++waited)
      sleep_one_millisecond();
  }
  // The default action, as if kairos had never handled the signal.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal_number);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(signal_number);
  errno = saved_errno;
}

void* service_thread_main(void*) {
  reentry_guard guard;
  pthread_setname_np(pthread_self(), "kairos-service");
  while (true) {
    while (sem_wait(&service_request) != 0 && errno == EINTR) {
    }
    const int signal_number = pending_signal.load();
    if (signal_number == 0) continue;
    const auto now = state.load();
    if (now == runtime_state::active || now == runtime_state::finalizing)
      finalize(describe_signal(signal_number));
    else
      finalize_done.store(true);
  }
  return nullptr;
}

void start_service_thread() {
  service_thread_running = false;
  if (sem_init(&service_request, 0, 0) != 0) return;
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);  // the thread inherits it: no signal lands there
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attributes, 256 * 1024);
  pthread_t thread;
  {
    reentry_guard guard;  // created inside kairos: registered as kairos's own thread
    service_thread_running = pthread_create(&thread, &attributes, &service_thread_main, nullptr) == 0;
  }
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!service_thread_running && verbosity() > 0)
    print_line("[kairos] could not start the service thread; SIGINT/SIGTERM end the program "
               "without a report");
}

void install_signal_handlers() {
  for (int signal_number : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (sigaction(signal_number, nullptr, &current) != 0) continue;
    // The program's own handler, or SIG_IGN, stays: kairos never changes what a signal does.
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
    struct sigaction ours {};
    ours.sa_handler = &on_termination_signal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    handlers_installed[signal_number] = sigaction(signal_number, &ours, nullptr) == 0;
  }
}

// --- fork ------------------------------------------------------------------------------------

void open_database();

// Lock order: samplers, writers, database, thread registry (see sampling/sampler.cpp).
void before_fork() {
  if (state.load() == runtime_state::loading) return;
  sampling_lock_for_fork();
  database_lock_for_fork();
  threads().lock_for_fork();
}
void after_fork_in_parent() {
  if (state.load() == runtime_state::loading) return;
  threads().unlock_after_fork();
  database_unlock_after_fork_in_parent();
  sampling_unlock_after_fork_in_parent();
}
void after_fork_in_child() {
  if (state.load() == runtime_state::loading) return;
  threads().unlock_after_fork();
  sampling_after_fork_in_child(false);
  forget_profile_database_after_fork();
  const bool follow = current_settings && current_settings->boolean("KAIROS_FOLLOW_CHILDREN");
  if (state.load() != runtime_state::active || !follow) {
    // Not followed: the child runs as without kairos, and so do its descendants.
    state.store(runtime_state::off);
    restore_default_signal_handlers();
    remove_kairos_from_environment();
    release_stderr();
    return;
  }
  reentry_guard guard;
  globals->identity.pid = getpid();
  globals->identity.launched = false;
  globals->identity.followed_child = true;
  globals->identity.generation = 0;
  threads().keep_only_after_fork(current_thread_if_registered());
  if (auto* self = current_thread_if_registered()) self->tid = gettid();
  reset_regions_after_fork();
  auto values = path_values::of_this_process();
  globals->output_stem = expand_path(current_settings->text("KAIROS_OUTPUT_PATH"), values).path;
  if (!globals->output_stem.empty() && globals->output_stem.front() != '/')
    globals->output_stem = (std::filesystem::current_path() / globals->output_stem).string();
  finalize_started.store(false);
  finalize_done.store(false);
  pending_signal.store(0);
  open_database();
  start_service_thread();
}

// --- init ------------------------------------------------------------------------------------

void connect_user_api() {
  auto attach = reinterpret_cast<void (*)(const kairos_entry_points*)>(
      dlsym(RTLD_DEFAULT, "kairos_user_attach"));
  if (attach) attach(&user_entry_points());
}

// The profile database under the output stem, with the run's metadata. Without it (SQLite
// missing, path unwritable) kairos still writes the region report; the reason is printed once.
void open_database() {
  globals->database_problem.clear();
  if (current_settings->list("KAIROS_OUTPUT_FORMATS").empty()) return;
  const auto path = globals->output_stem + ".db";
  std::string problem;
  if (!open_profile_database(path, problem)) {
    globals->database_problem = problem + "; no samples are recorded";
    return;
  }
  database_set_metadata("command", globals->command_line);
  database_set_metadata("pid", std::to_string(getpid()));
  for (const auto& value : current_settings->values())
    database_set_metadata(fmt::format("setting.{}", value.definition->variable), value.text);
}

void initialize() {
  reentry_guard guard;
  // is_this_library's function-local static is built here, never lazily in a fork child: its
  // construction registers a destructor (__cxa_atexit), whose lock another thread of the parent
  // may have held at fork time (a child of the stress test hung there).
  (void)is_this_library("");
  globals = new runtime_globals;
  globals->identity.pid = getpid();
  const auto launch_pid = environment_value("KAIROS_LAUNCH_PID");
  if (launch_pid.empty()) {
    // Preloaded by hand, not through kairos-run: this process is the launched one.
    setenv("KAIROS_LAUNCH_PID", std::to_string(globals->identity.pid).c_str(), 1);
    globals->identity.launched = true;
  } else {
    globals->identity.launched = launch_pid == std::to_string(globals->identity.pid);
  }
  globals->identity.generation = generation_of(globals->identity.pid);

  current_settings = new settings{settings::load(environ)};
  set_verbosity(static_cast<int>(current_settings->integer("KAIROS_VERBOSE")));
  const bool first_image = globals->identity.launched && globals->identity.generation == 0;

  if (!globals->identity.launched && !current_settings->boolean("KAIROS_FOLLOW_CHILDREN")) {
    // A child of the launched process (spawned, or forked before this exec): left alone.
    state.store(runtime_state::off);
    remove_kairos_from_environment();
    return;
  }
  globals->identity.followed_child = !globals->identity.launched;
  // Problems are reported once per launch: by the first image of the launched process.
  if (first_image)
    for (const auto& problem : current_settings->problems()) print_line(problem);
  if (!current_settings->usable()) {
    state.store(runtime_state::off);
    return;
  }
  if (environment_value("KAIROS_LAUNCH_DATE").empty())
    setenv("KAIROS_LAUNCH_DATE", format_launch_date(std::time(nullptr)).c_str(), 1);

  const auto expanded =
      expand_path(current_settings->text("KAIROS_OUTPUT_PATH"), path_values::of_this_process());
  globals->output_stem = expanded.path;
  std::error_code error;
  if (!globals->output_stem.empty() && globals->output_stem.front() != '/')
    globals->output_stem = (std::filesystem::current_path(error) / globals->output_stem).string();
  globals->command_line = read_command_line();

  std::string problem;
  if (!configure_regions(current_settings->list("KAIROS_COMPONENTS"), problem)) {
    if (first_image) print_line(problem);
    state.store(runtime_state::off);
    return;
  }

  keep_stderr();
  current_thread();  // the main thread is the program's thread 0
  set_flush_interval_ns(static_cast<std::int64_t>(current_settings->number("KAIROS_FLUSH_INTERVAL") * 1e9));
  open_database();
  if (profile_database_open() && current_settings->category_usable("sampling")) {
    std::string sampling_problem, note;
    if (!start_sampling(*current_settings, sampling_problem, note) && !sampling_problem.empty()) {
      if (first_image) print_line(sampling_problem);
    }
    if (!note.empty() && first_image) print_line(note);
    const auto totals = sampling_totals();
    database_set_metadata("sampling_cpu_source", totals.cpu_source);
    database_set_metadata("sampling_signal", totals.signal_number ? sigabbrev_np(totals.signal_number) ? fmt::format("SIG{}", sigabbrev_np(totals.signal_number)) : std::to_string(totals.signal_number) : "");
  }
  atexit(&finalize_at_exit);
  pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
  install_signal_handlers();
  start_service_thread();
  state.store(runtime_state::active, std::memory_order_release);
  connect_user_api();
  if (verbosity() > 0)
    print_line(fmt::format("[kairos] profiling pid {} ({}{}), outputs at {}.*", globals->identity.pid,
                           globals->identity.launched ? "launched process" : "followed child",
                           globals->identity.generation ? fmt::format(", exec {}", globals->identity.generation)
                                               : std::string{},
                           globals->output_stem));
}

__attribute__((constructor)) void initialize_before_main() {
  try {
    initialize();
  } catch (const std::exception& error) {
    state.store(runtime_state::off);
    print_line(fmt::format("[kairos] initialization failed: {}; the program runs without kairos",
                           error.what()));
  } catch (...) {
    state.store(runtime_state::off);
    print_line("[kairos] initialization failed; the program runs without kairos");
  }
}

std::atomic<bool> exec_snapshot_written{false};

}  // namespace

runtime_state current_state() noexcept { return state.load(std::memory_order_acquire); }
bool is_active() noexcept { return state.load(std::memory_order_acquire) == runtime_state::active; }

exec_environment environment_for_exec(char* const* environment) {
  exec_environment result;
  if (!globals) return result;
  const bool profiled = state.load() == runtime_state::active ||
                        (globals->identity.launched && state.load() != runtime_state::loading);
  const bool vfork_child = getpid() != globals->identity.pid;  // a vfork child shares our memory
  const bool strip = state.load() == runtime_state::off && !globals->identity.launched;
  if (vfork_child || (!profiled && !strip)) return result;
  for (auto entry = environment; entry && *entry; ++entry) {
    std::string_view assignment{*entry};
    if (assignment.starts_with("KAIROS_EXEC_GENERATION=")) continue;
    if (strip && assignment.starts_with("LD_PRELOAD=")) {
      auto kept = preload_without_kairos(assignment.substr(11));
      if (kept && kept->empty()) continue;
      if (kept) {
        result.storage.push_back("LD_PRELOAD=" + *kept);
        continue;
      }
    }
    result.storage.emplace_back(assignment);
  }
  if (profiled)
    result.storage.push_back(
        fmt::format("KAIROS_EXEC_GENERATION={}:{}", globals->identity.pid, globals->identity.generation + 1));
  for (auto& text : result.storage) result.pointers.push_back(text.data());
  result.pointers.push_back(nullptr);
  return result;
}

void before_exec() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  try {
    auto database_path = finish_database("exec");
    const auto counts = database_counts_written();
    const bool samples = counts.samples + counts.realtime_samples > 0;
    if (regions_recorded() == 0 && !samples) {  // nothing collected: nothing to keep
      if (!database_path.empty()) remove_database_files(database_path);
      return;
    }
    globals->exec_snapshot_stem = fmt::format("{}-exec{}", globals->output_stem, globals->identity.generation);
    if (!database_path.empty()) {
      const auto snapshot_database = globals->exec_snapshot_stem + ".db";
      std::error_code error;
      std::filesystem::rename(database_path, snapshot_database, error);
      database_path = error ? std::string{} : snapshot_database;
    }
    write_outputs(globals->exec_snapshot_stem, "exec", true, database_path);
    if (!database_path.empty() && !wants_format("db")) remove_database_files(database_path);
    exec_snapshot_written.store(true);
  } catch (...) {
  }
}

void before_exit_without_handlers() {
  if (!globals || state.load() != runtime_state::active || getpid() != globals->identity.pid) return;
  finalize("_exit");
}

void after_failed_exec() {
  // The image goes on: its report at exit supersedes the snapshot.
  if (!exec_snapshot_written.exchange(false)) return;
  std::error_code error;
  for (const auto& format : current_settings->list("KAIROS_OUTPUT_FORMATS"))
    std::filesystem::remove(output_file(globals->exec_snapshot_stem, format), error);
}

}  // namespace kairos::runtime
