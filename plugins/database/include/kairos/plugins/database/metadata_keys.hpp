#pragma once
// The keys of the profile database's `metadata` rows that the runtime writes at the end of a run
// and the outputs read: each spelt once, here (docs/database.md lists what each means). A test
// (tests/style/check_lists.py) fails on a key's literal anywhere else in the product's sources.
#include <string_view>

namespace kairos::database::metadata_key {

// The database and the process it describes: the schema's version (written with the schema), the
// kairos that wrote it, the process's command line, host and pid, its launch id (profiles older
// than the process table's launch_id column), and how the run ended ("exit", "exec",
// "signal SIGTERM", ...).
inline constexpr std::string_view schema_version = "schema_version";
inline constexpr std::string_view kairos_version = "kairos_version";
inline constexpr std::string_view command = "command";
inline constexpr std::string_view host = "host";
inline constexpr std::string_view pid = "pid";
inline constexpr std::string_view launch_id = "launch_id";
inline constexpr std::string_view end_reason = "end_reason";
// Every setting's value as the run read it: "setting." and its variable.
inline constexpr std::string_view setting_prefix = "setting.";
inline constexpr std::string_view setting_launch_date = "setting.KAIROS_LAUNCH_DATE";
inline constexpr std::string_view setting_sampling_freq = "setting.KAIROS_SAMPLING_FREQ";
inline constexpr std::string_view setting_sampling_delay = "setting.KAIROS_SAMPLING_DELAY";
inline constexpr std::string_view setting_sampling_duration = "setting.KAIROS_SAMPLING_DURATION";
inline constexpr std::string_view setting_trace_max_bytes = "setting.KAIROS_TRACE_MAX_BYTES";
static_assert(setting_launch_date.starts_with(setting_prefix) && setting_sampling_freq.starts_with(setting_prefix) &&
                  setting_sampling_delay.starts_with(setting_prefix) &&
                  setting_sampling_duration.starts_with(setting_prefix) &&
                  setting_trace_max_bytes.starts_with(setting_prefix),
              "a setting's key is setting_prefix and its variable");

// The clocks: CLOCK_BOOTTIME and CLOCK_MONOTONIC (the database's clock) read together when the
// database was created, "<boottime_ns> <monotonic_ns>"; the Perfetto trace's ClockSnapshot.
inline constexpr std::string_view clock_boottime_monotonic_ns = "clock.boottime_monotonic_ns";
// Sampling: the CPU-time source used, the signal, how samples were unwound, and the whole
// (`program_cpu_ns`) the samples' weights are a share of.
inline constexpr std::string_view sampling_cpu_source = "sampling_cpu_source";
inline constexpr std::string_view sampling_signal = "sampling_signal";
inline constexpr std::string_view sampling_unwound_by_tables = "sampling_unwound_by_tables";
inline constexpr std::string_view sampling_threads_by_ring = "sampling_threads_by_ring";
inline constexpr std::string_view program_cpu_ns = "program_cpu_ns";
inline constexpr std::string_view unsampled_cpu_ns = "unsampled_cpu_ns";
inline constexpr std::string_view unsampled_threads = "unsampled_threads";
// kairos's own work on the program's threads (the GOT patcher after a dlopen, wrappers' and hooks'
// bookkeeping): the samples charged to the `[kairos]` frame and their weights, by clock.
inline constexpr std::string_view kairos_own_samples = "kairos_own.samples";
inline constexpr std::string_view kairos_own_cpu_ns = "kairos_own.cpu_ns";
inline constexpr std::string_view kairos_own_real_ns = "kairos_own.real_ns";
// The CPU time that samples lost (a full ring or buffer, throttling) stood for: in no sample's
// weight, a part of the whole no stack is charged with.
inline constexpr std::string_view lost_cpu_ns = "lost_cpu_ns";
// Samples whose stack was unwound short of the thread's first frame (their outermost frame is
// "[stack cut]"), and ring samples whose stack went on with the kernel's frame-pointer chain.
inline constexpr std::string_view sampling_cut_stacks = "sampling_cut_stacks";
inline constexpr std::string_view sampling_chained_stacks = "sampling_chained_stacks";
// The rest of program_cpu_ns, measured on each thread's CPU clock (docs/database.md).
inline constexpr std::string_view before_sampling_cpu_ns = "coverage.before_sampling_ns";
inline constexpr std::string_view paused_cpu_ns = "coverage.paused_ns";
inline constexpr std::string_view after_last_sample_cpu_ns = "coverage.after_last_sample_ns";
inline constexpr std::string_view signal_handler_cpu_ns = "coverage.signal_handler_ns";
inline constexpr std::string_view weights_shortfall_ns = "coverage.weights_shortfall_ns";
inline constexpr std::string_view ring_count_excess_ns = "coverage.ring_count_excess_ns";
// What was lost, by whom.
inline constexpr std::string_view dropped_samples = "dropped.samples";
inline constexpr std::string_view dropped_region_rows = "dropped.region_rows";
inline constexpr std::string_view dropped_gpu_records = "dropped.gpu_records";
inline constexpr std::string_view dropped_mpi_calls = "dropped.mpi_calls";
inline constexpr std::string_view dropped_process_samples = "dropped.process_samples";
inline constexpr std::string_view dropped_annotation_ranges = "dropped.annotation_ranges";
inline constexpr std::string_view rows_lost = "rows_lost";
// A JIT's perf map (/tmp/perf-<pid>.map), where frames outside every module were looked up: the
// functions it named and the lines skipped as malformed.
inline constexpr std::string_view jit_map_functions = "jit_map.functions";
inline constexpr std::string_view jit_map_malformed_lines = "jit_map.malformed_lines";
// CPython in the process (docs/runtime.md, "Python frames"): its version, why its frames were not
// read (absent when they were), the samples that held its frames, and of those the ones whose
// interpreter and native stacks did not pair up, that stopped at a torn frame, and that were read
// through process_vm_readv; the code objects gone before their names were read.
inline constexpr std::string_view python_version = "python.version";
inline constexpr std::string_view python_note = "python.note";
inline constexpr std::string_view python_samples = "python.samples";
inline constexpr std::string_view python_unmatched_samples = "python.unmatched_samples";
inline constexpr std::string_view python_torn_samples = "python.torn_samples";
inline constexpr std::string_view python_read_safely_samples = "python.read_safely_samples";
inline constexpr std::string_view python_unreadable_code = "python.unreadable_code";
// Instrumented functions and regions.
inline constexpr std::string_view traced_events = "traced_events";
// Causal profiling (docs/causal.md).
inline constexpr std::string_view causal_experiments = "causal.experiments";
inline constexpr std::string_view causal_experiments_too_few_visits = "causal.experiments_too_few_visits";
inline constexpr std::string_view causal_delay_ns = "causal.delay_ns";
inline constexpr std::string_view causal_overslept_ns = "causal.overslept_ns";
inline constexpr std::string_view causal_core_share_permille = "causal.core_share_permille";
inline constexpr std::string_view causal_addresses_unresolved = "causal.addresses_unresolved";
inline constexpr std::string_view causal_wakeups_credited = "causal.wakeups_credited";
inline constexpr std::string_view causal_pipe_wakeups_credited = "causal.pipe_wakeups_credited";
// Annotations (docs/openmp.md): the OpenMP runtime observed ("libomp (OMPT)", "libgomp") and its
// parallel regions' instances; the other sources that attached ("nvtx", "kokkos").
inline constexpr std::string_view openmp_runtime = "openmp.runtime";
inline constexpr std::string_view openmp_parallel_regions = "openmp.parallel_regions";
inline constexpr std::string_view annotations_attached = "annotations.attached";
// Time windows (docs/windows.md).
inline constexpr std::string_view windows_opened = "windows.opened";
inline constexpr std::string_view windows_skipped = "windows.skipped";
inline constexpr std::string_view windows_edge_ns = "windows.edge_ns";
// Exec chains (docs/runtime.md, "exec chains"): the earlier images whose rows the profile holds
// ("N<TAB>command" a line, N their number in the chain, 1 the first; their threads are named
// "... [image N]"); the CPU time of their threads other than the one that exec'd (the program's
// whole adds it: the exec'ing thread's clock goes on in the next image); and an exec that failed,
// after which the image went on unsampled. `pending` and `marked_threads` are the chain's
// bookkeeping between images.
inline constexpr std::string_view exec_chain_images = "exec_chain.images";
inline constexpr std::string_view exec_chain_cpu_ns_not_carried = "exec_chain.cpu_ns_not_carried";
inline constexpr std::string_view exec_chain_failed_exec = "exec_chain.failed_exec";
inline constexpr std::string_view exec_chain_pending = "exec_chain.pending";
inline constexpr std::string_view exec_chain_marked_threads = "exec_chain.marked_threads";
// The child processes that ran unprofiled (KAIROS_FOLLOW_CHILDREN off; docs/runtime.md,
// "Children"): how many, their CPU time (the kernel's, from wait4 and RUSAGE_CHILDREN), and by
// name: "name<TAB>processes<TAB>cpu_ns" a line (processes 0: reaped where kairos did not see it).
inline constexpr std::string_view children_unprofiled_processes = "children.unprofiled_processes";
inline constexpr std::string_view children_unprofiled_cpu_ns = "children.unprofiled_cpu_ns";
inline constexpr std::string_view children_unprofiled_by_name = "children.unprofiled_by_name";
// Process sampling (docs/runtime.md, "Process sampling"): its period, how many periods it read,
// and the metrics it read.
inline constexpr std::string_view process_sampling_period_ns = "process_sampling.period_ns";
inline constexpr std::string_view process_sampling_periods = "process_sampling.periods";
inline constexpr std::string_view process_sampling_metrics = "process_sampling.metrics";

}  // namespace kairos::database::metadata_key
