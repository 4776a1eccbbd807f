#pragma once
// The profile database's schema (documented in docs/database.md) and its version.
#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

// Raised whenever a table, column or view changes meaning; readers refuse other versions.
// 2: no tables without a writer (window, api_call, gpu_*); 3: the window table, region.clipped;
// 4: gpu_device, gpu_kernel, gpu_memcpy, gpu_api_call; 5: region.frame (instrumented functions);
// 6: many processes: process.size and process.launch_id (MPI launches, docs/mpi.md), mpi_call, the
// mpi_calls and processes views; process_metadata and a process column where a thread cannot tell
// it (kairos-merge, docs/merge.md); 7: causal_experiment, causal_progress, causal_sample and the
// causal_experiments and causal_samples views (causal profiling, docs/causal.md); 8: regions in
// blocks (region_block), `region` a view over them; 9: a block's rows in fixed-width digits, not JSON;
// 10: call_tree (every traced call counted, docs/instrumentation.md); 11: frame.language (python,
// jit, native), process_metric and the process_metrics view (process sampling, docs/runtime.md),
// region_kind, openmp_thread_time, annotation_range and their views (docs/openmp.md); 12:
// stack_total (samples summed per thread, window and stack as the run goes, what the outputs read);
// 13: sample_timeline (samples summed per thread, window and time bucket, the HTML timeline's)
inline constexpr int schema_version = 13;

// Creates every table and view in an empty database, with SQL. Profiles are not made this way
// at run time: create_profile copies a file image this made at build time.
void create_schema(connection& database);

// How a writer uses a profile: a rollback journal kept between commits, commits not synced to
// disk (schema.cpp says why).
void use_write_settings(connection& database);

// The indexes readers need, which writers leave out while rows arrive: a writer calls this once,
// when its last row is in (the runtime at the process's end, kairos-merge at its end). A database
// left by a killed program lacks them; every query still works.
void create_deferred_indexes(connection& database);

// Creates a new database at `path` with the schema (profile_file.cpp), set for writing; throws
// database_error when the path exists
// (a profile is never appended to or overwritten) or cannot be created.
connection create_profile(const std::string& path);

// Opens again, for writing, a profile its own writer made (whose connection broke); throws
// database_error naming the file when it is not a kairos profile of this schema version.
connection reopen_profile(const std::string& path);

// Opens an existing profile for reading; throws database_error naming the file when it is not a
// kairos profile or has another schema version.
connection open_profile(const std::string& path);

}  // namespace kairos::database
