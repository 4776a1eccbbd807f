#include <kairos/plugins/database/schema.hpp>

#include <kairos/plugins/database/metadata_keys.hpp>

#include <string>

namespace kairos::database {
namespace {

// Strings are interned; every event row carries the time window it belongs to (0: no windows
// were set; else the window table's ordinal);
// each distinct call stack is stored once, as a trie of (parent, frame) nodes.
// A profile holds one process, row 1; a merged one (kairos-merge, docs/merge.md) many. A row whose
// process its thread cannot tell (no thread, or not a thread's row) has a `process` column, which
// the writer leaves at 1 and kairos-merge sets.
constexpr const char* schema_sql = R"sql(
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE string (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
-- rank and size: the MPI rank and world size (MPI_Init's, else the launcher's; NULL outside a
-- launch); launch_id: shared by every rank of one launch (docs/mpi.md).
CREATE TABLE process (
  id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, ppid INTEGER, rank INTEGER, size INTEGER,
  hostname INTEGER REFERENCES string, command INTEGER REFERENCES string,
  start_ns INTEGER, end_ns INTEGER,
  launch_id TEXT);  -- shared by every process of one launch (docs/mpi.md); NULL: unknown
-- Each process's metadata in a merged database (a profile's own is in `metadata`).
CREATE TABLE process_metadata (
  process INTEGER NOT NULL REFERENCES process, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (process, key));
CREATE TABLE thread (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES process,
  internal_id INTEGER NOT NULL, sequent_id INTEGER NOT NULL, tid INTEGER NOT NULL,
  name INTEGER REFERENCES string, start_ns INTEGER, end_ns INTEGER);
CREATE TABLE frame (
  id INTEGER PRIMARY KEY, address INTEGER NOT NULL, module INTEGER REFERENCES string,
  offset INTEGER, function INTEGER NOT NULL REFERENCES string, file INTEGER REFERENCES string,
  line INTEGER,
  language TEXT NOT NULL DEFAULT 'native');  -- 'native', 'python' (an interpreter's frame), 'jit' (a perf map's)
CREATE TABLE stack (
  id INTEGER PRIMARY KEY, parent INTEGER REFERENCES stack, frame INTEGER NOT NULL REFERENCES frame,
  depth INTEGER NOT NULL);
CREATE UNIQUE INDEX stack_edge ON stack (parent, frame);
CREATE TABLE sample (
  id INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES thread, time_ns INTEGER NOT NULL,
  weight_ns INTEGER NOT NULL, stack INTEGER REFERENCES stack, window INTEGER NOT NULL DEFAULT 0);
-- Samples of the real-time sampler (kairos runtime, KAIROS_SAMPLING_REALTIME): the same columns,
-- kept apart from `sample` so that CPU-time views never mix in time spent waiting.
CREATE TABLE realtime_sample (
  id INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES thread, time_ns INTEGER NOT NULL,
  weight_ns INTEGER NOT NULL, stack INTEGER REFERENCES stack, window INTEGER NOT NULL DEFAULT 0);
-- The `sample` rows summed per (thread, window, stack) as they are written, in the same
-- transactions (stack 0: samples without a stack), with the first and last sample's time. Every
-- output that shows weights reads these, so its cost follows the distinct stacks, not the run's
-- length.
CREATE TABLE stack_total (
  thread INTEGER NOT NULL REFERENCES thread, window INTEGER NOT NULL, stack INTEGER NOT NULL,
  samples INTEGER NOT NULL, weight_ns INTEGER NOT NULL, first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL,
  PRIMARY KEY (thread, window, stack)) WITHOUT ROWID;
-- The `sample` rows' weight over time, summed as they are written, in the same transactions: per
-- (thread, window), the samples in [start_ns, start_ns + width_ns). A width is a power of two of ns
-- and a start a multiple of it; the writer doubles the width (merging pairs of buckets) whenever
-- the samples' span passes 8,192 widths, so a thread and window has at most 8,193 rows however
-- long the run (a profile's rows all have one width, a merged database's one per process). The
-- HTML report draws its timeline from them: a bucket is under 1/32 of its bins.
CREATE TABLE sample_timeline (
  thread INTEGER NOT NULL REFERENCES thread, window INTEGER NOT NULL, start_ns INTEGER NOT NULL,
  width_ns INTEGER NOT NULL, samples INTEGER NOT NULL, weight_ns INTEGER NOT NULL,
  PRIMARY KEY (thread, window, start_ns)) WITHOUT ROWID;
CREATE TABLE counter (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process,
  thread INTEGER REFERENCES thread, time_ns INTEGER NOT NULL,
  name INTEGER NOT NULL REFERENCES string, value REAL NOT NULL, window INTEGER NOT NULL DEFAULT 0);
-- A thread's regions (user-API regions and instrumented calls) come in blocks of up to 4,096, one
-- row of this table each, so that a region costs the profiled program a few digits, not an insert.
-- rows: a JSON array of one string a region, each string seven fields of fixed-width decimal
-- digits (region_block.hpp): the start less the block's start_ns, end_ns - start_ns, name, depth,
-- window, clipped, frame (0: none). A field's width is its *_digits column, the same for every row of the block: a
-- width of 0 holds 0, a '-' leads a negative value. Read them through the view `region` (below),
-- which any SQLite client can query.
CREATE TABLE region_block (
  id INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES thread,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,  -- the earliest start and latest end within
  count INTEGER NOT NULL,
  start_digits INTEGER NOT NULL, length_digits INTEGER NOT NULL, name_digits INTEGER NOT NULL,
  depth_digits INTEGER NOT NULL, window_digits INTEGER NOT NULL, clipped_digits INTEGER NOT NULL,
  frame_digits INTEGER NOT NULL, rows TEXT NOT NULL);
-- One row per region. name: a string; clipped: 1 when its start was cut to its window's opening,
-- 2 its end to its closing; frame: an instrumented function's frame, NULL for a user-API region.
-- json_each reads a block once; a field is a substr of its row's string read as a number.
CREATE VIEW region AS
SELECT thread, name, start_ns, start_ns + length AS end_ns, depth, window, clipped, NULLIF(frame, 0) AS frame
FROM (
  SELECT b.thread AS thread,
         b.start_ns + CAST(substr(r.value, 1, b.start_digits) AS INTEGER) AS start_ns,
         CAST(substr(r.value, 1 + b.start_digits, b.length_digits) AS INTEGER) AS length,
         CAST(substr(r.value, 1 + b.start_digits + b.length_digits, b.name_digits) AS INTEGER) AS name,
         CAST(substr(r.value, 1 + b.start_digits + b.length_digits + b.name_digits, b.depth_digits) AS INTEGER)
           AS depth,
         CAST(substr(r.value, 1 + b.start_digits + b.length_digits + b.name_digits + b.depth_digits,
                     b.window_digits) AS INTEGER) AS window,
         CAST(substr(r.value, 1 + b.start_digits + b.length_digits + b.name_digits + b.depth_digits
                     + b.window_digits, b.clipped_digits) AS INTEGER) AS clipped,
         CAST(substr(r.value, 1 + b.start_digits + b.length_digits + b.name_digits + b.depth_digits
                     + b.window_digits + b.clipped_digits, b.frame_digits) AS INTEGER) AS frame
  FROM region_block AS b, json_each(b.rows) AS r);
-- Every call of each instrumented function and traced user-API region, counted per thread in memory
-- whatever its duration (KAIROS_INSTRUMENT_MIN_DURATION leaves short calls out of `region` only),
-- written at the end: one row per call path and window. node: the path's number in its thread;
-- parent: its caller's (0: none); name: a string; frame: an instrumented function's, NULL for a
-- region; sum_squares_ms: of the calls' durations in ms.
CREATE TABLE call_tree (
  thread INTEGER NOT NULL REFERENCES thread, node INTEGER NOT NULL, parent INTEGER NOT NULL,
  name INTEGER NOT NULL REFERENCES string, frame INTEGER REFERENCES frame, window INTEGER NOT NULL DEFAULT 0,
  calls INTEGER NOT NULL, total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,
  sum_squares_ms REAL NOT NULL);
-- The source of the regions an annotation made (docs/openmp.md): OpenMP's runtimes ('openmp'),
-- NVTX ('nvtx'), Kokkos ('kokkos'), ROCTx ('roctx'), by region name (a name the user API pushed
-- too takes the annotation's kind). The regions view's kind column reads it.
CREATE TABLE region_kind (
  process INTEGER NOT NULL DEFAULT 1 REFERENCES process, name INTEGER NOT NULL REFERENCES string,
  kind TEXT NOT NULL, PRIMARY KEY (process, name));
-- OpenMP's parallel regions (docs/openmp.md): per region (a construct of the program, by name) and
-- thread of its team (its number in the team, 0 the primary), the instances it took part in and its
-- work and wait summed over them, written at the end. work: from its start to its arrival at the
-- region's closing barrier, less the waits inside; wait: those waits (barriers, taskwait, locks,
-- less the tasks it ran meanwhile) and the closing barrier's.
CREATE TABLE openmp_thread_time (
  process INTEGER NOT NULL DEFAULT 1 REFERENCES process, region INTEGER NOT NULL REFERENCES string,
  thread INTEGER NOT NULL, instances INTEGER NOT NULL, work_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL);
-- Ranges that need not nest (NVTX's start/end ranges, Kokkos's profile sections): the thread that
-- started each and the one that ended it.
CREATE TABLE annotation_range (
  id INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES thread, end_thread INTEGER REFERENCES thread,
  kind TEXT NOT NULL, name INTEGER NOT NULL REFERENCES string, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  window INTEGER NOT NULL DEFAULT 0);
-- Time windows (docs/windows.md): amounts in the clock's units (ns, or instructions) counted from
-- the process's start; actual_* and *_ns are NULL for a window that never opened.
CREATE TABLE window (
  process INTEGER NOT NULL DEFAULT 1 REFERENCES process, ordinal INTEGER NOT NULL, spec TEXT NOT NULL, clock TEXT NOT NULL,
  planned_start INTEGER NOT NULL, planned_end INTEGER NOT NULL,
  actual_start INTEGER, actual_end INTEGER, start_ns INTEGER, end_ns INTEGER,
  samples INTEGER NOT NULL DEFAULT 0, regions INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (process, ordinal));
-- GPU activity (docs/plugins/gpu.md): times on the host's CLOCK_MONOTONIC, device timestamps mapped
-- onto it; `thread`, `call_ns` and `stack` say who asked for the work, `correlation` ties a kernel
-- or copy to its gpu_api_call.
CREATE TABLE gpu_device (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process, api TEXT NOT NULL, device_index INTEGER NOT NULL, name TEXT NOT NULL,
  architecture TEXT NOT NULL, memory_bytes INTEGER, multiprocessors INTEGER, clock_khz INTEGER,
  memory_clock_khz INTEGER);
CREATE TABLE gpu_kernel (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process, device INTEGER REFERENCES gpu_device, stream INTEGER NOT NULL,
  name INTEGER NOT NULL REFERENCES string, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  shared_bytes INTEGER, correlation INTEGER, thread INTEGER REFERENCES thread, call_ns INTEGER,
  stack INTEGER REFERENCES stack, window INTEGER NOT NULL DEFAULT 0);
CREATE TABLE gpu_memcpy (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process, device INTEGER REFERENCES gpu_device, stream INTEGER NOT NULL,
  kind TEXT NOT NULL, bytes INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  asynchronous INTEGER NOT NULL, correlation INTEGER, thread INTEGER REFERENCES thread,
  call_ns INTEGER, stack INTEGER REFERENCES stack, window INTEGER NOT NULL DEFAULT 0);
CREATE TABLE gpu_api_call (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process, api TEXT NOT NULL, name INTEGER NOT NULL REFERENCES string,
  thread INTEGER REFERENCES thread, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  correlation INTEGER, window INTEGER NOT NULL DEFAULT 0);
-- MPI calls (docs/mpi.md): time inside each wrapped call; bytes it moves at this rank and its peer
-- (destination, source or root, a rank in the call's communicator), NULL where the call has none.
CREATE TABLE mpi_call (
  id INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES thread,
  name INTEGER NOT NULL REFERENCES string, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  bytes INTEGER, peer INTEGER, window INTEGER NOT NULL DEFAULT 0);
-- Process sampling (docs/runtime.md, "Process sampling"): what a thread of kairos's read about the
-- process every period. metric: a string, its unit in its name (memory_resident_bytes,
-- cpu_percent, ...); thread: whose CPU (thread_cpu_percent), else NULL; instance: the CPU core
-- (cpu_frequency_mhz) or GPU (gpu_*) the value is of, else NULL. A rate (cpu_percent, *_per_s)
-- covers the period that ends at time_ns.
CREATE TABLE process_metric (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process, time_ns INTEGER NOT NULL,
  metric INTEGER NOT NULL REFERENCES string, thread INTEGER REFERENCES thread, instance INTEGER,
  value REAL NOT NULL, window INTEGER NOT NULL DEFAULT 0);
-- Causal profiling (docs/causal.md): each virtual-speedup experiment, with `selected` (a "file:line"
-- or a function, by `scope`) virtually sped up by `speedup` (0..1); duration_ns is the wall time less
-- the delays inserted (delay_ns), the denominator of every rate the analysis computes.
CREATE TABLE causal_experiment (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL DEFAULT 1 REFERENCES process,
  scope TEXT NOT NULL, selected TEXT NOT NULL, speedup REAL NOT NULL,
  start_ns INTEGER NOT NULL, duration_ns INTEGER NOT NULL, delay_ns INTEGER NOT NULL,
  selected_samples INTEGER NOT NULL, window INTEGER NOT NULL DEFAULT 0);
-- Each progress point's counts during one experiment. kind 'throughput': delta visits, the latency
-- columns NULL. kind 'latency': arrivals, departures and difference (begins - ends in total at the
-- experiment's end), and delta = arrivals, so "how many visits" is one column for both kinds.
CREATE TABLE causal_progress (
  experiment INTEGER NOT NULL REFERENCES causal_experiment, name TEXT NOT NULL, kind TEXT NOT NULL,
  delta INTEGER NOT NULL, arrivals INTEGER, departures INTEGER, difference INTEGER,
  PRIMARY KEY (experiment, name, kind));
-- Samples per location in scope over the whole run (coz's "samples" records): which locations were
-- running, so a reader can tell a location never selected from one never seen.
CREATE TABLE causal_sample (
  process INTEGER NOT NULL DEFAULT 1 REFERENCES process, scope TEXT NOT NULL, location TEXT NOT NULL,
  count INTEGER NOT NULL, PRIMARY KEY (process, scope, location));

-- Each sampled stack with every distinct function on it (for "total" time).
CREATE VIEW stack_functions AS
WITH RECURSIVE chain (leaf, node) AS (
  SELECT DISTINCT stack, stack FROM stack_total WHERE stack != 0
  UNION ALL
  SELECT chain.leaf, stack.parent FROM chain JOIN stack ON stack.id = chain.node
  WHERE stack.parent IS NOT NULL)
SELECT DISTINCT chain.leaf AS stack, frame.function AS function
FROM chain JOIN stack ON stack.id = chain.node JOIN frame ON frame.id = stack.frame;

CREATE VIEW samples AS
SELECT sample.id AS id, sample.thread AS thread, sample.time_ns AS time_ns,
       sample.weight_ns AS weight, leaf_name.value AS leaf, sample.stack AS stack,
       sample.window AS window, thread.process AS process, process.rank AS rank
FROM sample
LEFT JOIN thread ON thread.id = sample.thread LEFT JOIN process ON process.id = thread.process
LEFT JOIN stack ON stack.id = sample.stack
LEFT JOIN frame ON frame.id = stack.frame
LEFT JOIN string AS leaf_name ON leaf_name.id = frame.function;

CREATE VIEW realtime_samples AS
SELECT realtime_sample.id AS id, realtime_sample.thread AS thread, realtime_sample.time_ns AS time_ns,
       realtime_sample.weight_ns AS weight, leaf_name.value AS leaf, realtime_sample.stack AS stack,
       realtime_sample.window AS window, thread.process AS process, process.rank AS rank
FROM realtime_sample
LEFT JOIN thread ON thread.id = realtime_sample.thread LEFT JOIN process ON process.id = thread.process
LEFT JOIN stack ON stack.id = realtime_sample.stack
LEFT JOIN frame ON frame.id = stack.frame
LEFT JOIN string AS leaf_name ON leaf_name.id = frame.function;

-- Weighted: self counts samples whose leaf is the function, total those with the function
-- anywhere on the stack (once per sample, however often it recurs). Samples come summed per
-- (thread, window, stack), so the stack walk runs once per distinct stack, not once per sample.
CREATE VIEW stack_weights AS
SELECT thread, window, stack, weight_ns, samples FROM stack_total WHERE stack != 0;

CREATE VIEW top_functions_by_thread AS
WITH weights AS MATERIALIZED (SELECT * FROM stack_weights),
-- stack_functions of the weighed stacks: the samples are read once, by the line above.
chain (leaf, node) AS (
  SELECT DISTINCT stack, stack FROM weights
  UNION ALL
  SELECT chain.leaf, stack.parent FROM chain JOIN stack ON stack.id = chain.node
  WHERE stack.parent IS NOT NULL),
leaf_functions AS MATERIALIZED (
  SELECT DISTINCT chain.leaf AS stack, frame.function AS function
  FROM chain JOIN stack ON stack.id = chain.node JOIN frame ON frame.id = stack.frame),
self_weight AS (
  SELECT weights.thread AS thread, weights.window AS window, frame.function AS function,
         SUM(weights.weight_ns) AS self
  FROM weights JOIN stack ON stack.id = weights.stack JOIN frame ON frame.id = stack.frame
  GROUP BY weights.thread, weights.window, frame.function),
total_weight AS (
  SELECT weights.thread AS thread, weights.window AS window, leaf_functions.function AS function,
         SUM(weights.weight_ns) AS total
  FROM weights JOIN leaf_functions ON leaf_functions.stack = weights.stack
  GROUP BY weights.thread, weights.window, leaf_functions.function)
SELECT total_weight.thread AS thread, total_weight.window AS window, string.value AS name,
       COALESCE(self_weight.self, 0) AS self, total_weight.total AS total,
       thread.process AS process, process.rank AS rank
FROM total_weight
JOIN string ON string.id = total_weight.function
LEFT JOIN thread ON thread.id = total_weight.thread LEFT JOIN process ON process.id = thread.process
LEFT JOIN self_weight ON self_weight.thread = total_weight.thread
                     AND self_weight.window = total_weight.window
                     AND self_weight.function = total_weight.function;

-- The whole run (every process of a merged database); top_functions_by_window splits it by time
-- window, top_functions_by_process by process.
CREATE VIEW top_functions AS
SELECT name, SUM(self) AS self, SUM(total) AS total
FROM top_functions_by_thread GROUP BY name;

CREATE VIEW top_functions_by_process AS
SELECT process, rank, name, SUM(self) AS self, SUM(total) AS total
FROM top_functions_by_thread GROUP BY process, name;

CREATE VIEW top_functions_by_window AS
SELECT window, name, SUM(self) AS self, SUM(total) AS total
FROM top_functions_by_thread GROUP BY window, name;

CREATE VIEW windows AS
SELECT process, ordinal, spec, clock, planned_start, planned_end, actual_start, actual_end,
       actual_start - planned_start AS start_error, actual_end - planned_end AS end_error,
       start_ns, end_ns, end_ns - start_ns AS duration_ns, samples, regions
FROM window;

CREATE VIEW regions AS
SELECT string.value AS name, region.thread AS thread, region.start_ns AS start_ns,
       region.end_ns AS end_ns, region.end_ns - region.start_ns AS duration_ns,
       region.depth AS depth, region.window AS window, region.clipped AS clipped,
       CASE WHEN region.frame IS NOT NULL THEN 'function' ELSE COALESCE(region_kind.kind, 'region') END AS kind,
       thread.process AS process, process.rank AS rank
FROM region JOIN string ON string.id = region.name
LEFT JOIN thread ON thread.id = region.thread LEFT JOIN process ON process.id = thread.process
LEFT JOIN region_kind ON region_kind.process = thread.process AND region_kind.name = region.name;

-- Each OpenMP parallel region's imbalance: its threads' work, the largest over the mean (1: even),
-- and their waits, summed over the region's instances.
CREATE VIEW openmp_imbalance AS
SELECT o.process AS process, string.value AS region, COUNT(*) AS threads, MAX(o.instances) AS instances,
       MAX(o.work_ns) AS max_work_ns, AVG(o.work_ns) AS mean_work_ns, MIN(o.work_ns) AS min_work_ns,
       CASE WHEN AVG(o.work_ns) > 0 THEN MAX(o.work_ns) / AVG(o.work_ns) END AS imbalance,
       SUM(o.wait_ns) AS wait_ns
FROM openmp_thread_time AS o JOIN string ON string.id = o.region GROUP BY o.process, o.region;

CREATE VIEW openmp_thread_times AS
SELECT o.process AS process, string.value AS region, o.thread AS thread, o.instances AS instances,
       o.work_ns AS work_ns, o.wait_ns AS wait_ns
FROM openmp_thread_time AS o JOIN string ON string.id = o.region;

CREATE VIEW annotation_ranges AS
SELECT a.id AS id, string.value AS name, a.kind AS kind, a.thread AS thread, a.end_thread AS end_thread,
       a.start_ns AS start_ns, a.end_ns AS end_ns, a.end_ns - a.start_ns AS duration_ns, a.window AS window
FROM annotation_range AS a JOIN string ON string.id = a.name;

CREATE VIEW gpu_kernels AS
SELECT gpu_kernel.id AS id, string.value AS name, gpu_kernel.device AS device,
       gpu_kernel.stream AS stream, gpu_kernel.start_ns AS start_ns, gpu_kernel.end_ns AS end_ns,
       gpu_kernel.end_ns - gpu_kernel.start_ns AS duration_ns, gpu_kernel.grid_x AS grid_x,
       gpu_kernel.grid_y AS grid_y, gpu_kernel.grid_z AS grid_z, gpu_kernel.block_x AS block_x,
       gpu_kernel.block_y AS block_y, gpu_kernel.block_z AS block_z,
       gpu_kernel.shared_bytes AS shared_bytes, gpu_kernel.thread AS thread,
       gpu_kernel.start_ns - gpu_kernel.call_ns AS queued_ns, gpu_kernel.window AS window,
       gpu_kernel.process AS process
FROM gpu_kernel JOIN string ON string.id = gpu_kernel.name;

CREATE VIEW top_kernels AS
SELECT name, COUNT(*) AS launches, SUM(duration_ns) AS total_ns, AVG(duration_ns) AS mean_ns,
       MIN(duration_ns) AS min_ns, MAX(duration_ns) AS max_ns
FROM gpu_kernels GROUP BY name;

CREATE VIEW top_copies AS
SELECT kind, COUNT(*) AS copies, SUM(bytes) AS bytes, SUM(end_ns - start_ns) AS total_ns,
       CASE WHEN SUM(end_ns - start_ns) > 0 THEN SUM(bytes) * 1.0 / SUM(end_ns - start_ns) END
         AS gb_per_s
FROM gpu_memcpy GROUP BY kind;

CREATE VIEW gpu_api_calls AS
SELECT string.value AS name, gpu_api_call.api AS api, gpu_api_call.thread AS thread,
       gpu_api_call.start_ns AS start_ns, gpu_api_call.end_ns AS end_ns,
       gpu_api_call.end_ns - gpu_api_call.start_ns AS duration_ns,
       gpu_api_call.correlation AS correlation, gpu_api_call.window AS window,
       gpu_api_call.process AS process
FROM gpu_api_call JOIN string ON string.id = gpu_api_call.name;

CREATE VIEW mpi_calls AS
SELECT mpi_call.id AS id, string.value AS name, mpi_call.thread AS thread,
       mpi_call.start_ns AS start_ns, mpi_call.end_ns AS end_ns,
       mpi_call.end_ns - mpi_call.start_ns AS duration_ns, mpi_call.bytes AS bytes,
       mpi_call.peer AS peer, mpi_call.window AS window
FROM mpi_call JOIN string ON string.id = mpi_call.name;

CREATE VIEW process_metrics AS
SELECT process_metric.id AS id, string.value AS metric, process_metric.time_ns AS time_ns,
       process_metric.thread AS thread, process_metric.instance AS instance, process_metric.value AS value,
       process_metric.window AS window, process_metric.process AS process
FROM process_metric JOIN string ON string.id = process_metric.metric;

-- Each causal experiment with each of its progress points' counts (one row with NULL point columns
-- for an experiment in which no point was reached); the per-experiment rows coz's profile.coz holds.
CREATE VIEW causal_experiments AS
SELECT e.id AS experiment, e.scope AS scope, e.selected AS selected, e.speedup AS speedup,
       e.start_ns AS start_ns, e.duration_ns AS duration_ns, e.delay_ns AS delay_ns,
       e.selected_samples AS selected_samples, p.name AS progress_point, p.kind AS kind, p.delta AS delta,
       p.arrivals AS arrivals, p.departures AS departures, p.difference AS difference, e.window AS window,
       e.process AS process, process.rank AS rank
FROM causal_experiment AS e LEFT JOIN causal_progress AS p ON p.experiment = e.id
LEFT JOIN process ON process.id = e.process;

CREATE VIEW causal_samples AS
SELECT causal_sample.scope AS scope, causal_sample.location AS location, causal_sample.count AS count,
       causal_sample.process AS process, process.rank AS rank
FROM causal_sample LEFT JOIN process ON process.id = causal_sample.process;

CREATE VIEW processes AS
SELECT process.id AS id, process.pid AS pid, process.ppid AS ppid, process.rank AS rank,
       process.size AS size, host.value AS hostname, process.launch_id AS launch_id,
       command.value AS command, process.start_ns AS start_ns, process.end_ns AS end_ns
FROM process
LEFT JOIN string AS host ON host.id = process.hostname
LEFT JOIN string AS command ON command.id = process.command;

CREATE VIEW threads AS
SELECT thread.id AS id, thread.internal_id AS internal_id, thread.sequent_id AS sequent_id,
       thread.tid AS tid, name.value AS name, process.pid AS pid, thread.process AS process,
       process.rank AS rank
FROM thread JOIN process ON process.id = thread.process
LEFT JOIN string AS name ON name.id = thread.name;
)sql";

// Indexes a reader needs and a writer does not: built once at the end (create_deferred_indexes).
constexpr const char* deferred_indexes_sql = R"sql(
CREATE INDEX IF NOT EXISTS region_block_thread_time ON region_block (thread, start_ns);
)sql";

}  // namespace

void create_deferred_indexes(connection& database) { database.execute(deferred_indexes_sql); }

void use_write_settings(connection& database) {
  // A rollback journal keeps the file valid whatever ends the writing process: a kill during a
  // commit leaves the journal hot, and the next read-write open (open_profile, any SQLite client)
  // rolls it back to the last commit. Pages appended past the file's end, nearly all a profile
  // writes, are not journaled, so each is written once; WAL wrote each twice (to the log, then to
  // the file at the checkpoint, reading it back), a page a system call: a large part of a recorded
  // region's cost. PERSIST keeps the journal file between commits instead of creating and
  // unlinking it every flush; the finish deletes it. Syncing to disk only guards against the
  // machine itself going down, and its fsyncs cost every profiled run milliseconds of wall time: a
  // profile is not worth that. Figures: docs/performance-log.md, "Measured reasons in the code".
  database.execute("PRAGMA synchronous = OFF; PRAGMA journal_mode = PERSIST;");
}

void create_schema(connection& database) {
  transaction creating{database};
  database.execute(schema_sql);
  auto version = database.prepare("INSERT INTO metadata (key, value) VALUES (?, ?)");
  version.bind(1, metadata_key::schema_version).bind(2, std::string_view{std::to_string(schema_version)}).run();
  creating.commit();
}

}  // namespace kairos::database
