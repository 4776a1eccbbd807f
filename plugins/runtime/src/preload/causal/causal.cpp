#include "preload/causal/causal.hpp"

#include <sched.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include <kairos/plugins/backtrace/symbolizer.hpp>

#include "common/posix_regex.hpp"
#include "preload/causal/progress_points.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"
#include "preload/threads/thread_registry.hpp"
#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

// --- what the signal handler reads -------------------------------------------------------------

// Location ids: 0 not resolved yet, 1 outside the scope, 2 and up a location in scope.
constexpr std::uint32_t unresolved = 0;
constexpr std::uint32_t outside_scope = 1;
constexpr std::uint32_t first_location = 2;
constexpr std::size_t max_locations = 1 << 16;
// Distinct sampled addresses (frames of every stack): 4 MiB of address space, touched only as used.
constexpr std::size_t address_slots = 1 << 18;
constexpr std::size_t probe_limit = 64;
constexpr std::size_t recent_samples = 256;
// A sample's CPU time counts in full up to this: a thread that blocked the signal for a second
// would otherwise make one delay of a second.
constexpr std::int64_t max_sample_weight_ns = 100'000'000;

struct address_slot {
  std::atomic<std::uint64_t> address{0};
  std::atomic<std::uint32_t> location{unresolved};
};

struct hot_state {
  std::atomic<bool> enabled{false};
  // The experiment under way: its number (0: none), the location sped up and by how much.
  // Published in this order: start delay and speedup, then the number, then the location.
  std::atomic<std::uint64_t> experiment{0};
  std::atomic<std::uint32_t> selected{0};
  std::atomic<std::int64_t> speedup_permille{0};
  std::atomic<std::int64_t> experiment_start_delay{0};
  // Every delay owed so far (ns), released or not (`releases` holds the part not yet released).
  std::atomic<std::int64_t> global_delay{0};
  // The delays released when a thread last could have woken another (it paid them first).
  std::atomic<std::int64_t> released_at_last_wake{0};
  std::atomic<std::int64_t> selected_samples{0};
  std::atomic<std::int64_t> overslept{0};
  // The program's threads' running stretches measured during experiments (wall_per_cpu()).
  std::atomic<std::int64_t> running_wall_ns{0}, running_cpu_ns{0};
  std::atomic<std::uint64_t> wakeups_credited{0};  // waits ended by another thread, in experiments
  std::atomic<std::uint64_t> inserted{0};          // addresses inserted so far (the resolver rescans when it grows)
  std::atomic<std::uint64_t> table_full{0};        // frames whose address found no slot
  std::atomic<std::uint32_t> recent[recent_samples] = {};  // the in-scope location of recent samples
  std::atomic<std::uint32_t> recent_next{0};
  std::atomic<std::uint32_t> location_samples[max_locations] = {};
};
hot_state hot;
address_slot* address_table = nullptr;  // mapped by start_causal

// One thread's delays: only the thread itself touches it (its handler, its wrappers).
struct thread_delays {
  enum : std::uint8_t { unknown, program, kairos } kind = unknown;
  bool blocked = false;
  std::uint64_t experiment = 0;    // the experiment `local` counts in
  std::int64_t local = 0;          // delays this thread has paid or been credited (ns)
  std::int32_t release_slot = -1;  // its slot in `releases` in this experiment, if sampled in the selected code
  // Its wall time per CPU time while it runs (wall_per_cpu()).
  std::uint64_t waits = 0;               // waits in the calls kairos wraps, so far
  std::int64_t paid_ns = 0;              // wall time spent paying delays, so far
  std::int64_t last_handler_end_ns = 0;  // steady clock
  std::uint64_t waits_at_handler_end = 0;
  std::int64_t paid_at_handler_end = 0;
  std::int64_t wall_per_cpu = std::int64_t{1} << 16;  // recent, in 2^-16 (for samples after a wait)
};
[[gnu::tls_model("initial-exec")]] thread_local thread_delays this_thread;

std::size_t slot_of(std::uint64_t address) noexcept {
  return static_cast<std::size_t>((address * 0x9e3779b97f4a7c15ull) >> 46) % address_slots;
}

// The location of `address`; an address seen for the first time is inserted for the experiments'
// thread to resolve (unresolved until then).
std::uint32_t location_of(std::uint64_t address) noexcept {
  if (address == 0) return outside_scope;
  auto index = slot_of(address);
  for (std::size_t probe = 0; probe < probe_limit; ++probe, index = (index + 1) % address_slots) {
    auto& slot = address_table[index];
    auto key = slot.address.load(std::memory_order_acquire);
    if (key == address) return slot.location.load(std::memory_order_acquire);
    if (key != 0) continue;
    if (slot.address.compare_exchange_strong(key, address, std::memory_order_acq_rel)) {
      hot.inserted.fetch_add(1, std::memory_order_release);
      return unresolved;
    }
    if (key == address) return slot.location.load(std::memory_order_acquire);
  }
  hot.table_full.fetch_add(1, std::memory_order_relaxed);
  return unresolved;
}

bool is_program_thread(thread_delays& me) noexcept {
  if (me.kind == thread_delays::unknown) {
    if (auto* record = current_thread_if_registered())
      me.kind = record->kairos_owned ? thread_delays::kairos : thread_delays::program;
  }
  return me.kind == thread_delays::program;
}

// The experiment under way, or 0. A thread that last counted in an earlier experiment starts this
// one even: what it owed before is forgiven (no delay is inserted between experiments).
std::uint64_t join_experiment(thread_delays& me) noexcept {
  const auto experiment = hot.experiment.load(std::memory_order_acquire);
  if (experiment != 0 && me.experiment != experiment) {
    me.experiment = experiment;
    me.local = hot.experiment_start_delay.load(std::memory_order_relaxed);
    me.release_slot = -1;
  }
  return experiment;
}

// nanosleep wakes a thread tens to hundreds of microseconds late (timer slack, the scheduler; more
// in a VM). A delayed thread on the critical path that oversleeps makes the program slower than
// the delays accounted for, which biased predictions down by 10 points on the toys. So the last
// stretch of a delay is spun.
constexpr std::int64_t spun_tail_ns = 200'000;

// Waits `ns` (async-signal-safe); returns how long it really waited.
std::int64_t sleep_for(std::int64_t ns) noexcept {
  const auto start = steady_now_ns();
  const auto deadline = start + ns;
  if (ns > spun_tail_ns) {
    const auto wake = deadline - spun_tail_ns;
    const timespec until{static_cast<time_t>(wake / 1'000'000'000), static_cast<long>(wake % 1'000'000'000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
    }
  }
  auto now = steady_now_ns();
  while (now < deadline) {
    sched_yield();
    now = steady_now_ns();
  }
  return now - start;
}

// --- releasing delays at the pace they were incurred ---------------------------------------------
//
// A sample in the selected location says that its thread ran that code for the sample's CPU time;
// the delay it stands for is released over the next stretch of that thread's running time as
// long, not owed at once. Owed in one lump, a sample period's delay fell on whichever thread was
// running at that instant: on a program whose rounds are shorter than a period, that thread paid
// past the slack of one round while a thread that happened to be waiting was credited the whole
// lump, and predictions came out 5 to 20 points low (tests/causal/barrier_rounds.cpp,
// fork_join.cpp). Released at its pace, each thread owes what accrued while it ran and is
// credited what accrued while it waited, as if the selected code were sampled continuously. The
// release pauses while its thread blocks (it cannot be running the selected code then), so a
// thread that waits for it is not credited delays its waker did not incur meanwhile.
//
// Each thread that is sampled in the selected location gets a slot for its release (the first
// `release_slots` of an experiment; later ones release at once): one word, which the thread alone
// writes (its handler and its wrappers, with a compare-and-swap since one may interrupt the other)
// and every thread reads: the rate, in 2^-16 ns per ns, and either the microsecond of the
// experiment at which all will be released or, paused, the microseconds of release left.
constexpr int ramp_rate_shift = 16;
constexpr std::uint64_t ramp_paused = std::uint64_t{1} << 63;
constexpr std::uint32_t release_slots = 64;

struct release_ramp {
  bool paused = false;
  std::int64_t end_or_left_us = 0;  // 31 bits
  std::int64_t rate = 0;            // 32 bits

  static release_ramp unpack(std::uint64_t word) noexcept {
    return {(word & ramp_paused) != 0, static_cast<std::int64_t>((word >> 32) & 0x7fff'ffff),
            static_cast<std::int64_t>(word & 0xffff'ffff)};
  }
  std::uint64_t pack() const noexcept {
    return (paused ? ramp_paused : 0) |
           (static_cast<std::uint64_t>(std::clamp<std::int64_t>(end_or_left_us, 0, 0x7fff'ffff)) << 32) |
           static_cast<std::uint64_t>(std::clamp<std::int64_t>(rate, 0, 0xffff'ffff));
  }
  std::int64_t left_us(std::int64_t now_us) const noexcept {
    return paused ? end_or_left_us : std::max<std::int64_t>(end_or_left_us - now_us, 0);
  }
  // The delay not yet released at `now_us`.
  std::int64_t unreleased(std::int64_t now_us) const noexcept {
    return (rate * left_us(now_us) * 1000) >> ramp_rate_shift;
  }
};

struct release_state {
  std::atomic<std::int64_t> experiment_start_ns{0};  // the clock of the ramps' microseconds
  std::atomic<std::uint32_t> used{0};                // slots handed out in this experiment
  std::atomic<std::uint64_t> slots[release_slots] = {};
};
release_state releases;

std::int64_t experiment_us(std::int64_t steady_ns) noexcept {
  return (steady_ns - releases.experiment_start_ns.load(std::memory_order_relaxed)) / 1000;
}

// The delays released by now: what a thread that ran all along owes in total. Read in the
// opposite order of add_delay's writes, so it may miss a delay being added, never count one early.
std::int64_t released_delay(std::int64_t now_ns) noexcept {
  const auto total = hot.global_delay.load(std::memory_order_seq_cst);
  const auto now_us = experiment_us(now_ns);
  const auto used = std::min(releases.used.load(std::memory_order_seq_cst), release_slots);
  std::int64_t pending = 0;
  for (std::uint32_t i = 0; i < used; ++i)
    pending += release_ramp::unpack(releases.slots[i].load(std::memory_order_seq_cst)).unreleased(now_us);
  return std::max<std::int64_t>(total - pending, 0);
}

// Changes the calling thread's ramp (`change` maps the ramp at `now_us` to the next one).
template <class Change>
void update_own_ramp(const thread_delays& me, std::int64_t now_us, Change change) noexcept {
  auto& slot = releases.slots[me.release_slot];
  auto word = slot.load(std::memory_order_relaxed);
  while (
      !slot.compare_exchange_weak(word, change(release_ramp::unpack(word), now_us).pack(), std::memory_order_seq_cst)) {
  }
}

// The calling thread owes every other thread `delay_ns`, released over its next `over_ns` of
// running together with what its earlier samples have not released yet.
void add_delay(thread_delays& me, std::int64_t delay_ns, std::int64_t over_ns, std::int64_t now_ns) noexcept {
  if (me.release_slot < 0) {
    const auto slot = releases.used.fetch_add(1, std::memory_order_seq_cst);
    me.release_slot = slot < release_slots ? static_cast<std::int32_t>(slot) : release_slots;
  }
  if (me.release_slot < static_cast<std::int32_t>(release_slots)) {
    const auto over_us = std::clamp<std::int64_t>(over_ns / 1000, 10, 100'000);
    update_own_ramp(me, experiment_us(now_ns), [&](release_ramp ramp, std::int64_t now_us) {
      const auto pending = ramp.unreleased(now_us) + delay_ns;
      return release_ramp{false, now_us + over_us, (pending << ramp_rate_shift) / (over_us * 1000)};
    });
  }
  hot.global_delay.fetch_add(delay_ns, std::memory_order_seq_cst);
}

// The calling thread blocks (pause) or goes on (resume): its release waits with it.
void pause_own_release(thread_delays& me, bool pause) noexcept {
  if (me.release_slot < 0 || me.release_slot >= static_cast<std::int32_t>(release_slots) ||
      me.experiment != hot.experiment.load(std::memory_order_relaxed))
    return;
  update_own_ramp(me, experiment_us(steady_now_ns()), [&](release_ramp ramp, std::int64_t now_us) {
    if (ramp.paused == pause) return ramp;
    return release_ramp{pause, pause ? ramp.left_us(now_us) : now_us + ramp.end_or_left_us, ramp.rate};
  });
}

// Brings the thread level with the delays released: ahead (it overslept), it raises the count
// (the others owe); behind, it waits the difference at once, however small, so that its debts
// never grow into lumps longer than a round of the program.
void settle(thread_delays& me) noexcept {
  if (join_experiment(me) == 0) return;
  auto global = hot.global_delay.load(std::memory_order_acquire);
  if (me.local > global) {
    while (global < me.local && !hot.global_delay.compare_exchange_weak(global, me.local, std::memory_order_acq_rel)) {
    }
    return;
  }
  const auto owed = released_delay(steady_now_ns()) - me.local;
  if (owed <= 0) return;
  const auto slept = sleep_for(owed);
  me.paid_ns += slept;
  // What it waited beyond its debt counts as paid ahead: it owes that much less of what is
  // released next, and beyond every delay owed so far the count rises to match at its next settle
  // (the others then owe it too, and the experiment's duration leaves it out).
  me.local += slept;
  if (slept > owed) hot.overslept.fetch_add(slept - owed, std::memory_order_relaxed);
}

// Before a call that may wake another thread (or end a wait, as blocking on a condition variable
// releases its mutex): the thread pays what it owes, and marks what is released by now as paid
// by a waker. A thread it wakes is credited up to that mark, not up to when it runs again: what is
// released while it waits for a core was incurred after its wake-up, and it owes that.
void settle_before_waking(thread_delays& me) noexcept {
  settle(me);
  if (me.experiment != hot.experiment.load(std::memory_order_relaxed)) return;
  const auto released = released_delay(steady_now_ns());
  auto mark = hot.released_at_last_wake.load(std::memory_order_relaxed);
  while (mark < released &&
         !hot.released_at_last_wake.compare_exchange_weak(mark, released, std::memory_order_acq_rel)) {
  }
}

// --- the experiments' thread -------------------------------------------------------------------

struct controller_state {
  causal_options options;
  causal_delivery deliver;
  std::unique_ptr<posix_regex> select, include, exclude, binaries;
  std::string main_program;  // canonical path of /proc/self/exe
  sem_t wake;
  std::atomic<bool> stopping{false};
  std::atomic<bool> done{false};
  std::atomic<bool> running{false};
  std::mutex mutex;                    // locations and totals, read by finalize
  std::vector<std::string> locations;  // names, by id - first_location
  std::unordered_map<std::string, std::uint32_t> location_ids;
  std::unordered_map<std::string, bool> module_in_scope;
  std::unique_ptr<backtrace_symbolizer> symbols;
  std::uint64_t experiment_number = 0;
  std::uint64_t inserted_resolved = 0;                              // hot.inserted when resolve_pending last scanned
  std::atomic<causal_idle> idle{causal_idle::no_samples_in_scope};  // until an experiment runs
  causal_summary totals;
  std::mt19937_64 random{static_cast<std::uint64_t>(steady_now_ns()) ^ static_cast<std::uint64_t>(getpid())};

  controller_state() { sem_init(&wake, 0, 0); }
};
controller_state* controller = nullptr;

// Sleeps up to `ns` or until stop_causal posts the semaphore.
void rest(std::int64_t ns) {
  const auto deadline = steady_now_ns() + ns;
  timespec until{};
  until.tv_sec = deadline / 1'000'000'000;
  until.tv_nsec = deadline % 1'000'000'000;
  while (sem_clockwait(&controller->wake, CLOCK_MONOTONIC, &until) != 0 && errno == EINTR) {
  }
}

bool module_in_scope(const std::string& module) {
  auto [entry, fresh] = controller->module_in_scope.try_emplace(module, false);
  if (!fresh) return entry->second;
  if (controller->binaries) {
    entry->second = controller->binaries->search(module);
  } else {
    std::error_code error;
    const auto canonical = std::filesystem::canonical(module, error);
    entry->second = !error && canonical.string() == controller->main_program;
  }
  return entry->second;
}

std::uint32_t intern_location(std::string name) {
  std::lock_guard lock{controller->mutex};
  if (auto found = controller->location_ids.find(name); found != controller->location_ids.end()) return found->second;
  if (controller->locations.size() + first_location >= max_locations) return outside_scope;
  const auto id = static_cast<std::uint32_t>(controller->locations.size() + first_location);
  controller->locations.push_back(name);
  controller->location_ids.emplace(std::move(name), id);
  return id;
}

std::uint32_t resolve(std::uint64_t address) {
  if (!controller->symbols)
    controller->symbols = std::make_unique<backtrace_symbolizer>(&move_above_floor, source_lines::own);
  // Uncached: the address table keeps the answer, once per address.
  const auto symbol = controller->symbols->resolve_uncached(address);
  if (!module_in_scope(symbol.module)) return outside_scope;
  const bool by_line = controller->options.scope == "line";
  if (by_line ? !symbol.has_source() : !symbol.has_function()) return outside_scope;
  const auto matches = [&](const std::unique_ptr<posix_regex>& expression) {
    return expression->search(symbol.file) || expression->search(symbol.function);
  };
  if (controller->include && !matches(controller->include)) return outside_scope;
  if (controller->exclude && matches(controller->exclude)) return outside_scope;
  return intern_location(by_line ? fmt::format("{}:{}", symbol.file, symbol.line) : symbol.function);
}

// Resolves the addresses the handlers inserted since the last call. An address inserted while the
// table is scanned is counted after its slot is claimed, so the next call scans again.
void resolve_pending() {
  const auto inserted = hot.inserted.load(std::memory_order_acquire);
  if (inserted == controller->inserted_resolved) return;
  controller->inserted_resolved = inserted;
  for (std::size_t i = 0; i < address_slots; ++i) {
    auto& slot = address_table[i];
    const auto address = slot.address.load(std::memory_order_acquire);
    if (address == 0 || slot.location.load(std::memory_order_relaxed) != unresolved) continue;
    slot.location.store(resolve(address), std::memory_order_release);
  }
}

std::string name_of(std::uint32_t id) {
  std::lock_guard lock{controller->mutex};
  return controller->locations.at(id - first_location);
}

// The location to speed up next: that of a recent sample in scope (so locations are picked as
// often as they are sampled, as coz does), among those KAIROS_CAUSAL_SELECT names when it is set.
std::uint32_t choose_location() {
  std::vector<std::uint32_t> candidates;
  for (auto& entry : hot.recent) {
    const auto id = entry.load(std::memory_order_relaxed);
    if (id < first_location) continue;
    if (controller->select && !controller->select->search(name_of(id))) continue;
    candidates.push_back(id);
  }
  if (candidates.empty() && controller->select) {
    // The selected locations may be sampled rarely: any of them seen so far.
    std::lock_guard lock{controller->mutex};
    for (std::size_t i = 0; i < controller->locations.size(); ++i)
      if (controller->select->search(controller->locations[i]))
        candidates.push_back(static_cast<std::uint32_t>(i + first_location));
  }
  if (candidates.empty()) return 0;
  return candidates[std::uniform_int_distribution<std::size_t>{0, candidates.size() - 1}(controller->random)];
}

// coz's schedule without a list: 0% in 8 draws of 28, else 5..100% in steps of 5.
int choose_speedup() {
  const auto& speedups = controller->options.speedups;
  if (!speedups.empty())
    return speedups[std::uniform_int_distribution<std::size_t>{0, speedups.size() - 1}(controller->random)];
  const int draw = std::uniform_int_distribution<int>{0, 27}(controller->random);
  return draw <= 7 ? 0 : (draw - 7) * 5;
}

struct experiment_outcome {
  bool ran = false;
  std::int64_t fewest_visits = 0;
};

experiment_outcome run_experiment(std::uint32_t selected, int percent, std::int64_t length_ns) {
  const auto before = read_progress_points();
  // What the previous experiment left unreleased is never owed: the new one starts level.
  for (auto& slot : releases.slots) slot.store(0, std::memory_order_relaxed);
  releases.used.store(0, std::memory_order_seq_cst);
  releases.experiment_start_ns.store(steady_now_ns(), std::memory_order_seq_cst);
  const auto start_delay = hot.global_delay.load(std::memory_order_seq_cst);
  hot.speedup_permille.store(percent * 10, std::memory_order_relaxed);
  hot.selected_samples.store(0, std::memory_order_relaxed);
  hot.experiment_start_delay.store(start_delay, std::memory_order_relaxed);
  hot.released_at_last_wake.store(start_delay, std::memory_order_relaxed);
  hot.experiment.store(++controller->experiment_number, std::memory_order_release);
  hot.selected.store(selected, std::memory_order_release);
  const auto window = current_window();
  const auto start = steady_now_ns();
  const auto deadline = start + length_ns;
  // In slices, resolving new addresses meanwhile; a window that closes or finalize ends it early.
  while (!controller->stopping.load() && inside_window()) {
    const auto now = steady_now_ns();
    if (now >= deadline) break;
    rest(std::min<std::int64_t>(deadline - now, 10'000'000));
    resolve_pending();
  }
  hot.selected.store(0, std::memory_order_release);
  hot.experiment.store(0, std::memory_order_release);
  const auto end = steady_now_ns();
  // Only what was released was owed, so only that slowed the program down.
  const auto delay = std::max<std::int64_t>(released_delay(end) - start_delay, 0);
  const auto after = read_progress_points();

  causal_experiment_record record;
  record.scope = controller->options.scope;
  record.selected = name_of(selected);
  record.speedup = percent / 100.0;
  record.start_ns = start;
  record.duration_ns = std::max<std::int64_t>(end - start - delay, 0);
  record.delay_ns = delay;
  record.selected_samples = hot.selected_samples.load(std::memory_order_relaxed);
  record.window = window;
  std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
  for (const auto& point : after) {
    progress_reading earlier{};
    for (const auto& candidate : before)
      if (candidate.name == point.name && candidate.kind == point.kind) earlier = candidate;
    causal_progress_delta delta{point.name, point.kind == progress_kind::latency, point.visits - earlier.visits, 0, 0};
    fewest = std::min(fewest, delta.visits);
    if (delta.latency) {
      delta.departures = point.ends - earlier.ends;
      delta.in_flight = point.visits - point.ends;
      fewest = std::min(fewest, delta.departures);
    }
    record.progress.push_back(std::move(delta));
  }
  if (record.progress.empty()) return {false, 0};
  // Too few visits say nothing about a rate (coz's threshold, 5): not recorded.
  constexpr std::int64_t enough_visits = 5;
  std::lock_guard lock{controller->mutex};
  controller->totals.delay_ns += delay;
  if (fewest < enough_visits) {
    ++controller->totals.experiments_too_few_visits;
    return {true, fewest};
  }
  ++controller->totals.experiments;
  controller->deliver.experiment(record);
  return {true, fewest};
}

void* run_controller(void*) {
  reentry_guard guard;  // kairos's own thread: nothing it calls is recorded
  auto length = controller->options.experiment_ns;
  while (!controller->stopping.load()) {
    resolve_pending();
    const auto selected = inside_window() ? choose_location() : 0;
    if (selected == 0) {
      if (controller->idle.load() != causal_idle::ran) {
        std::lock_guard lock{controller->mutex};
        controller->idle.store(controller->locations.empty() ? causal_idle::no_samples_in_scope
                                                             : causal_idle::nothing_selected);
      }
      rest(10'000'000);
      continue;
    }
    const auto outcome = run_experiment(selected, choose_speedup(), length);
    if (!outcome.ran) {
      if (controller->idle.load() != causal_idle::ran) controller->idle.store(causal_idle::no_progress_point);
      rest(10'000'000);
      continue;
    }
    controller->idle.store(causal_idle::ran);
    // As coz: longer while the points are visited too rarely, shorter again when often enough.
    if (outcome.fewest_visits < 5)
      length = std::min(length * 2, controller->options.experiment_ns * 16);
    else if (outcome.fewest_visits > 10 && length >= controller->options.experiment_ns * 2)
      length /= 2;
    rest(controller->options.cooloff_ns);
  }
  controller->done.store(true);
  return nullptr;
}

std::unique_ptr<posix_regex> compiled(const std::string& pattern) {
  return pattern.empty() ? nullptr : std::make_unique<posix_regex>(pattern);
}

}  // namespace

problem start_causal(const causal_options& options, causal_delivery deliver) {
  void* table = mmap(nullptr, address_slots * sizeof(address_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (table == MAP_FAILED) return problem{"causal profiling: no memory for its address table; it does not run"};
  address_table = static_cast<address_slot*>(table);  // zero pages: every slot empty
  controller = new controller_state;
  controller->options = options;
  controller->deliver = deliver;
  controller->select = compiled(options.select);
  controller->include = compiled(options.include);
  controller->exclude = compiled(options.exclude);
  controller->binaries = compiled(options.binaries);
  std::error_code error;
  controller->main_program = std::filesystem::canonical("/proc/self/exe", error).string();
  hot.enabled.store(true, std::memory_order_release);
  if (const int failure = start_internal_thread(&run_controller, nullptr); failure != 0) {
    hot.enabled.store(false);
    return problem{
        fmt::format("causal profiling: cannot start its thread ({}); no experiments run", std::strerror(failure))};
  }
  controller->running.store(true);
  return {};
}

bool causal_running() noexcept { return controller && controller->running.load(); }

void stop_causal() noexcept {
  if (!causal_running()) return;
  controller->stopping.store(true);
  sem_post(&controller->wake);
  wait_until([] { return controller->done.load(); }, std::chrono::milliseconds{2000});
  hot.enabled.store(false, std::memory_order_release);
  controller->running.store(false);
  report(capture_problem("causal profiling: writing the samples per location failed", [] {
    std::vector<causal_location_samples> counts;
    std::lock_guard lock{controller->mutex};
    controller->totals.locations = controller->locations.size();
    for (std::size_t i = 0; i < controller->locations.size(); ++i)
      if (const auto samples = hot.location_samples[i + first_location].load(std::memory_order_relaxed))
        counts.push_back({controller->options.scope, controller->locations[i], static_cast<std::int64_t>(samples)});
    if (!counts.empty()) controller->deliver.samples(counts);
  }));
}

void causal_forget_after_fork_in_child() noexcept {
  if (controller) controller->running.store(false);  // its thread is the parent's: nothing to stop
  hot.enabled.store(false);
  hot.experiment.store(0);
  hot.selected.store(0);
}

// The wall time per CPU time of the thread's running since its handler last ended (2^-16 = 1):
// what really speeding the sampled code up gives back per CPU time it saves, and so what its delays
// are scaled by. A thread's CPU clock leaves out the time it waited for a core while runnable, and
// in a VM the time the hypervisor gave its vCPU to another guest ("steal"): delays sized by CPU
// time alone came out low by that share (docs/causal.md, "The delays"). Steal is not shared out
// evenly (a vCPU that idles and wakes loses more than one that runs throughout), so each thread's
// own is measured: the wall time from its handler's end to its
// next start, less delays it paid meanwhile, over the CPU time it ran then. After a wait in a
// wrapped call, or a stretch too long to be running (a wait kairos does not wrap), its recent
// ratio stands in.
std::int64_t wall_per_cpu(thread_delays& me, std::int64_t running_cpu_ns, std::int64_t now) noexcept {
  if (me.last_handler_end_ns == 0 || me.waits != me.waits_at_handler_end || running_cpu_ns <= 0) return me.wall_per_cpu;
  // Never under the CPU time: the two clocks are read a few instructions apart.
  const auto wall = std::max(now - me.last_handler_end_ns - (me.paid_ns - me.paid_at_handler_end), running_cpu_ns);
  if (wall > running_cpu_ns * 3) return me.wall_per_cpu;
  if (hot.experiment.load(std::memory_order_relaxed) != 0) {
    hot.running_wall_ns.fetch_add(wall, std::memory_order_relaxed);
    hot.running_cpu_ns.fetch_add(running_cpu_ns, std::memory_order_relaxed);
  }
  const auto ratio = (wall << 16) / running_cpu_ns;
  me.wall_per_cpu += (ratio - me.wall_per_cpu) / 8;
  return ratio;
}

void causal_on_sample(const std::uint64_t* addresses, std::size_t count, std::int64_t weight_ns,
                      std::int64_t running_cpu_ns) noexcept {
  if (!hot.enabled.load(std::memory_order_acquire)) return;
  auto& me = this_thread;
  me.kind = thread_delays::program;  // only the program's threads are sampled
  const auto selected = hot.selected.load(std::memory_order_acquire);
  bool counted = false, hit = false;
  for (std::size_t i = 0; i < count && !hit; ++i) {
    const auto id = location_of(addresses[i]);
    if (id < first_location) continue;
    if (!counted) {
      counted = true;
      hot.location_samples[id].fetch_add(1, std::memory_order_relaxed);
      hot.recent[hot.recent_next.fetch_add(1, std::memory_order_relaxed) % recent_samples].store(
          id, std::memory_order_relaxed);
    }
    hit = id == selected;
  }
  const auto now = steady_now_ns();
  const auto scale = wall_per_cpu(me, running_cpu_ns, now);
  if (hit && join_experiment(me) != 0) {
    // The sample's CPU time, as the wall time the selected code held its thread for.
    const auto weight = (std::min(weight_ns, max_sample_weight_ns) * scale) >> 16;
    const auto delay = weight * hot.speedup_permille.load(std::memory_order_relaxed) / 1000;
    me.local += delay;  // it owes none of its own
    add_delay(me, delay, weight, now);
    hot.selected_samples.fetch_add(1, std::memory_order_relaxed);
  }
  settle(me);
  me.last_handler_end_ns = steady_now_ns();
  me.waits_at_handler_end = me.waits;
  me.paid_at_handler_end = me.paid_ns;
}

void causal_before_blocking() noexcept {
  auto& me = this_thread;
  if (!hot.enabled.load(std::memory_order_relaxed) || !is_program_thread(me)) return;
  // What it owes is paid before it waits, not lumped into its next sample: a debt paid late lands
  // in a later round, past that round's slack.
  settle_before_waking(me);
  me.blocked = true;
  ++me.waits;
  pause_own_release(me, true);
}

bool causal_after_blocking(bool woken_by_another_thread) noexcept {
  auto& me = this_thread;
  if (!me.blocked) return false;
  me.blocked = false;
  pause_own_release(me, false);
  if (join_experiment(me) == 0 || !woken_by_another_thread) return false;
  // Its waker paid the delays released until the wake-up before waking it, so it owes none of
  // them: it is level with the waker, having paid all it owed before it blocked. Level, not raised
  // by them: a selected thread is already ahead by its own delays not yet released, which it must
  // not count twice.
  const auto paid_by_waker =
      std::min(released_delay(steady_now_ns()), hot.released_at_last_wake.load(std::memory_order_acquire));
  me.local = std::max(me.local, paid_by_waker);
  hot.wakeups_credited.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void causal_catch_up() noexcept {
  auto& me = this_thread;
  if (!hot.enabled.load(std::memory_order_relaxed) || !is_program_thread(me)) return;
  settle_before_waking(me);
}

causal_summary causal_totals() noexcept {
  if (!controller) return {};
  std::lock_guard lock{controller->mutex};
  auto totals = controller->totals;
  totals.idle = controller->idle.load();
  totals.overslept_ns = hot.overslept.load();
  totals.wakeups_credited = hot.wakeups_credited.load();
  totals.addresses_unresolved = hot.table_full.load();
  const auto running_wall = hot.running_wall_ns.load(), running_cpu = hot.running_cpu_ns.load();
  if (running_wall > 0) totals.core_share_permille = running_cpu * 1000 / running_wall;
  return totals;
}

}  // namespace kairos::runtime
