#include "preload/sampling/sample_writer.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "preload/sampling/thread_sampler.hpp"
#include "preload/support/bounded_wait.hpp"
#include "preload/support/clock.hpp"
#include "preload/support/internal_thread.hpp"
#include "preload/support/private_descriptor.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {

struct sample_writer {
  full_buffer_stack full;
  sem_t wake;
  std::mutex mutex;  // its threads, and one pass at a time
  std::vector<thread_sampler*> threads;
  std::atomic<int> live_threads{0};  // assigned and not ended (under the writers' mutex to grow)
  owned_descriptor spill_file;
  off_t spilled = 0;  // bytes
  off_t delivered = 0;
  std::uint64_t records_spilled = 0, records_delivered = 0;
  std::int64_t last_delivery_ns = 0;
  std::atomic<bool> stopping{false};
  bool serves_rings = false;  // under `mutex`
  // Reused from pass to pass (under `mutex`): a batch of 4,096 samples is 2.3 MB, and allocating
  // it afresh each time cost page faults and TLB flushes at every pass.
  sample_batch pass_batch, spill_batch;
  std::vector<char> spill_bytes;
  std::vector<char> spill_chunk;  // what a delivery reads the spill file through
};

namespace {

constexpr std::int64_t pass_interval_ns = 50'000'000;
// A writer that serves a thread sampled through a perf ring drains it this often: a ring holds
// 40 ms of its thread, 25 ms at 10 kHz (perf_ring.cpp).
constexpr std::int64_t ring_pass_interval_ns = 10'000'000;
constexpr std::size_t delivery_batch = 4096;

struct writer_globals {
  std::mutex mutex;  // the writer list; assignment and retirement
  std::vector<sample_writer*> writers;
  int threads_per_writer = 8;
  int max_writers = 1 << 20;
  bool temporary_files = true;
  bool stopping = false;
  std::int64_t flush_interval_ns = 1'000'000'000;
  sample_delivery deliver = nullptr;
  std::atomic<int> running{0};
  problem first_problem;
};
writer_globals* globals = nullptr;

struct {
  std::atomic<std::uint64_t> ring_samples{0}, ring_unwound_by_tables{0}, ring_lost{0};
  std::atomic<std::int64_t> ring_lost_ns{0};
  std::atomic<std::uint64_t> cut_stacks{0}, chained_stacks{0};
} counts;

// A record in a spill file: this header, then `frame_count` addresses.
struct spill_header {
  thread_record* thread;
  std::int64_t time_ns, weight_ns, thread_cpu_ns;
  std::uint16_t frame_count;
  sample_source source;
  std::int32_t window;
};

int open_spill_file() {
  const char* directory = std::getenv("TMPDIR");
  if (!directory || !*directory) directory = "/tmp";
  // Unnamed: nothing to clean up, whatever ends the process.
  int fd = open(directory, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = std::string{directory} + "/kairos-spill-XXXXXX";
  fd = mkostemp(name.data(), O_CLOEXEC);  // O_EXCL, mode 0600
  if (fd >= 0) unlink(name.c_str());      // removed now; the data lives until the fd closes
  return fd;
}

void note_problem(std::string text) {
  std::lock_guard lock{globals->mutex};
  if (globals->first_problem) return;
  globals->first_problem = problem{std::move(text)};
  report(globals->first_problem);
}

void copy_out(sample_buffer& buffer, std::uint32_t end, sample_batch& batch) {
  const bool python = python_frames_active();
  for (std::uint32_t i = buffer.consumed; i < end; ++i) {
    const auto& record = buffer.record(i);
    auto& sample = batch.emplace_back();
    sample.thread = buffer.owner->thread;
    sample.time_ns = record.time_ns;
    sample.weight_ns = record.weight_ns;
    sample.thread_cpu_ns = record.thread_cpu_ns;
    sample.source = record.source;
    sample.window = record.window;
    const auto depth = record.stack.size();
    if (!python || buffer.python(i).count == 0) {
      sample.frame_count = static_cast<std::uint16_t>(depth);
      for (std::size_t f = 0; f < depth; ++f) sample.addresses[f] = record.stack.lookup_address(f);
      // Deeper than the buffer: its outermost frame says the stack was cut.
      if (record.stack.truncated() && depth > 0) {
        sample.addresses[depth - 1] = cut_stack_address;
        counts.cut_stacks.fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    std::uint64_t native[sample_stack_depth];
    for (std::size_t f = 0; f < depth; ++f) native[f] = record.stack.lookup_address(f);
    sample.frame_count = static_cast<std::uint16_t>(splice_python_frames(
        buffer.python(i), native, depth, depth == sample_stack_depth, sample.addresses, sample_stack_depth));
  }
  buffer.consumed = end;
}

void drain_committed(sample_buffer& buffer, sample_batch& batch) {
  copy_out(buffer, buffer.committed.load(std::memory_order_acquire), batch);
}

// A full buffer, consumed to the end, goes back to its thread as a spare.
void give_back(sample_buffer& buffer) {
  buffer.consumed = 0;
  buffer.committed.store(0, std::memory_order_relaxed);
  buffer.state.store(sample_buffer::free_state, std::memory_order_release);
}

bool spill(sample_writer& writer, const sample_batch& batch) {
  auto& bytes = writer.spill_bytes;
  bytes.clear();
  for (const auto& sample : batch) {
    spill_header header{sample.thread,      sample.time_ns, sample.weight_ns, sample.thread_cpu_ns,
                        sample.frame_count, sample.source,  sample.window};
    const auto* h = reinterpret_cast<const char*>(&header);
    bytes.insert(bytes.end(), h, h + sizeof header);
    const auto* a = reinterpret_cast<const char*>(sample.addresses);
    bytes.insert(bytes.end(), a, a + sample.frame_count * sizeof(std::uint64_t));
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    if (!writer.spill_file.still_ours()) return false;
    const auto n = pwrite(writer.spill_file.get(), bytes.data() + done, bytes.size() - done,
                          writer.spilled + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  writer.spilled += static_cast<off_t>(done);
  writer.records_spilled += batch.size();
  return true;
}

void deliver_spill_file(sample_writer& writer) {
  if (writer.delivered >= writer.spilled) return;
  auto& batch = writer.spill_batch;
  batch.clear();
  // Sized once for what waits (each record at least a header): growing it by doubling copied
  // every 560-byte sample again at each step.
  batch.reserve(std::min<std::size_t>(
      delivery_batch, static_cast<std::size_t>(writer.spilled - writer.delivered) / sizeof(spill_header) + 1));
  // As large as what waits, at most 1 MiB, and kept for the next delivery: a zeroed 1 MiB
  // allocated afresh each second cost page faults, a microsecond a sample at 1 kHz.
  auto& chunk = writer.spill_chunk;
  const auto waiting = static_cast<std::size_t>(std::min<off_t>(1 << 20, writer.spilled - writer.delivered));
  if (chunk.size() < waiting) chunk.resize(waiting);
  while (writer.delivered < writer.spilled && writer.spill_file.still_ours()) {
    const auto want = std::min<off_t>(static_cast<off_t>(chunk.size()), writer.spilled - writer.delivered);
    const auto n = pread(writer.spill_file.get(), chunk.data(), static_cast<std::size_t>(want), writer.delivered);
    if (n <= 0) break;
    std::size_t position = 0;
    while (position + sizeof(spill_header) <= static_cast<std::size_t>(n)) {
      spill_header header;
      std::memcpy(&header, chunk.data() + position, sizeof header);
      const auto size = sizeof header + header.frame_count * sizeof(std::uint64_t);
      if (position + size > static_cast<std::size_t>(n)) break;
      auto& sample = batch.emplace_back();
      sample.thread = header.thread;
      sample.time_ns = header.time_ns;
      sample.weight_ns = header.weight_ns;
      sample.thread_cpu_ns = header.thread_cpu_ns;
      sample.source = header.source;
      sample.window = header.window;
      sample.frame_count = header.frame_count;
      std::memcpy(sample.addresses, chunk.data() + position + sizeof header,
                  header.frame_count * sizeof(std::uint64_t));
      position += size;
      ++writer.records_delivered;
      if (batch.size() >= delivery_batch) {
        globals->deliver(batch);
        batch.clear();
      }
    }
    if (position == 0) break;  // a record larger than the chunk cannot happen; stop rather than spin
    writer.delivered += static_cast<off_t>(position);
  }
  if (!batch.empty()) globals->deliver(batch);
}

// The program closed the spill file behind kairos's back (a raw close_range system call: the
// libc functions are wrapped). What it held is gone: said how much, and sampling goes on in a
// new one.
void replace_lost_spill_file(sample_writer& writer) {
  if (const auto lost = writer.records_spilled - writer.records_delivered; lost > 0)
    note_problem(
        fmt::format("the program closed kairos's sampling spill file: {} samples not yet "
                    "in the database were lost",
                    lost));
  writer.spill_file.close_if_ours();  // forgets the number, which is not kairos's any more
  writer.spilled = writer.delivered = 0;
  writer.records_spilled = writer.records_delivered = 0;
  writer.spill_file.adopt(open_spill_file());
}

void drain_ring(thread_sampler& sampler, sample_batch& batch) {
  const auto drained = drain_perf_ring(sampler.ring, sampler.thread, batch);
  counts.ring_samples.fetch_add(drained.samples, std::memory_order_relaxed);
  counts.ring_lost.fetch_add(drained.lost, std::memory_order_relaxed);
  counts.ring_lost_ns.fetch_add(drained.lost_ns, std::memory_order_relaxed);
  counts.ring_unwound_by_tables.fetch_add(drained.unwound_by_tables, std::memory_order_relaxed);
  counts.cut_stacks.fetch_add(drained.cut_stacks, std::memory_order_relaxed);
  counts.chained_stacks.fetch_add(drained.chained_stacks, std::memory_order_relaxed);
}

void writer_pass(sample_writer& writer, bool final_pass) {
  std::lock_guard lock{writer.mutex};  // the final pass may meet a writer that did not stop in time
  auto& batch = writer.pass_batch;
  batch.clear();
  std::vector<bool> finished(writer.threads.size());
  for (std::size_t i = 0; i < writer.threads.size(); ++i)
    finished[i] = writer.threads[i]->finished.load(std::memory_order_acquire);
  for (auto* buffer = writer.full.take_all(); buffer;) {
    auto* next = buffer->next_full;
    drain_committed(*buffer, batch);
    give_back(*buffer);
    buffer = next;
  }
  std::vector<thread_sampler*> kept;
  writer.serves_rings = false;
  for (std::size_t i = 0; i < writer.threads.size(); ++i) {
    auto* sampler = writer.threads[i];
    for (auto* buffer : sampler->buffers)
      if (buffer &&
          (final_pass || finished[i] || buffer->state.load(std::memory_order_acquire) == sample_buffer::filling_state))
        drain_committed(*buffer, batch);
    if (sampler->sampled_by_ring.load(std::memory_order_acquire)) {
      writer.serves_rings = true;
      drain_ring(*sampler, batch);
    }
    if (finished[i]) {  // its thread ended: nothing can write here any more
      ring_drained_for_good(*sampler);
      for (auto* buffer : sampler->buffers) unmap_sample_buffer(buffer);
      close_perf_ring(sampler->ring);
      delete sampler;
    } else {
      kept.push_back(sampler);
    }
  }
  writer.threads.swap(kept);
  if (writer.spill_file && !writer.spill_file.still_ours()) replace_lost_spill_file(writer);
  if (writer.spill_file && !batch.empty() && !spill(writer, batch)) {
    note_problem(
        fmt::format("cannot write a sampling spill file in {}: {}; samples go straight to "
                    "the database from now on",
                    std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", std::strerror(errno ? errno : ENOSPC)));
    deliver_spill_file(writer);  // what it already holds
    writer.spill_file.close_if_ours();
  }
  if (!writer.spill_file) {
    if (!batch.empty()) globals->deliver(batch);
    return;
  }
  const auto now = steady_now_ns();
  if (final_pass || now - writer.last_delivery_ns >= globals->flush_interval_ns) {
    deliver_spill_file(writer);
    writer.last_delivery_ns = now;
  }
}

// A writer with no live thread and nothing left to drain leaves, unless it is the last one.
bool retire_if_idle(sample_writer& writer) {
  {
    std::lock_guard lock{writer.mutex};
    if (!writer.threads.empty()) return false;
  }
  std::lock_guard lock{globals->mutex};
  if (globals->stopping || globals->writers.size() <= 1 || writer.live_threads.load(std::memory_order_acquire) != 0)
    return false;
  auto& list = globals->writers;
  list.erase(std::remove(list.begin(), list.end(), &writer), list.end());
  return true;
}

void* writer_main(void* argument) {
  reentry_guard guard;
  auto& writer = *static_cast<sample_writer*>(argument);
  pthread_setname_np(pthread_self(), "kairos-writer");
  while (!writer.stopping.load(std::memory_order_acquire)) {
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    {
      std::lock_guard lock{writer.mutex};
      deadline.tv_nsec += writer.serves_rings ? ring_pass_interval_ns : pass_interval_ns;
    }
    if (deadline.tv_nsec >= 1'000'000'000) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1'000'000'000;
    }
    sem_timedwait(&writer.wake, &deadline);
    if (writer.stopping.load(std::memory_order_acquire)) break;
    writer_pass(writer, false);
    if (retire_if_idle(writer)) {
      writer_pass(writer, true);  // its spill file's last records
      writer.spill_file.close_if_ours();
      sem_destroy(&writer.wake);
      delete &writer;
      globals->running.fetch_sub(1, std::memory_order_release);  // after its last delivery
      return nullptr;
    }
  }
  globals->running.fetch_sub(1, std::memory_order_release);
  return nullptr;
}

// Under globals->mutex.
sample_writer* create_writer() {
  auto* writer = new sample_writer;
  sem_init(&writer->wake, 0, 0);
  if (globals->temporary_files) writer->spill_file.adopt(open_spill_file());
  writer->last_delivery_ns = steady_now_ns();
  globals->running.fetch_add(1, std::memory_order_relaxed);
  if (const int error = start_internal_thread(&writer_main, writer); error != 0) {
    if (!globals->first_problem) {
      globals->first_problem =
          problem{fmt::format("cannot start a writer thread ({}); threads that start while none can be started are "
                              "not sampled",
                              std::strerror(error))};
      report(globals->first_problem);
    }
    globals->running.fetch_sub(1, std::memory_order_relaxed);
    writer->spill_file.close_if_ours();
    sem_destroy(&writer->wake);
    delete writer;
    return nullptr;
  }
  globals->writers.push_back(writer);
  return writer;
}

}  // namespace

void configure_writers(int threads_per_writer, int max_writers, bool temporary_files, std::int64_t flush_interval_ns,
                       sample_delivery deliver) {
  if (!globals) globals = new writer_globals;
  globals->threads_per_writer = std::max(threads_per_writer, 1);
  globals->max_writers = std::max(max_writers, 1);
  globals->temporary_files = temporary_files;
  globals->flush_interval_ns = flush_interval_ns;
  globals->deliver = deliver;
}

sample_writer* assign_writer(thread_sampler* sampler) {
  sample_writer* chosen = nullptr;
  {
    std::lock_guard lock{globals->mutex};
    // Packed, not spread: the busiest writer with room takes the thread, so that when the
    // program's threads fall off, the last writer started empties first and retires.
    sample_writer* least_loaded = nullptr;
    for (auto* writer : globals->writers) {
      const int live = writer->live_threads.load();
      if (live < globals->threads_per_writer && (!chosen || live > chosen->live_threads.load())) chosen = writer;
      if (!least_loaded || live < least_loaded->live_threads.load()) least_loaded = writer;
    }
    if (!chosen && static_cast<int>(globals->writers.size()) < globals->max_writers) chosen = create_writer();
    if (!chosen) chosen = least_loaded;
    if (!chosen) return nullptr;
    chosen->live_threads.fetch_add(1, std::memory_order_acq_rel);
  }
  std::lock_guard lock{chosen->mutex};
  chosen->threads.push_back(sampler);
  return chosen;
}

bool release_if_never_sampled(sample_writer* writer, thread_sampler* sampler) noexcept {
  // Never wait for a pass in progress (it may be inserting into the database): then the writer
  // frees the sampler at its next pass, as for any other.
  std::unique_lock lock{writer->mutex, std::try_to_lock};
  if (!lock.owns_lock() || sampler->sampled_by_ring.load()) return false;
  for (auto* buffer : sampler->buffers)
    if (buffer && (buffer->committed.load(std::memory_order_acquire) != 0 ||
                   buffer->state.load(std::memory_order_acquire) == sample_buffer::full_state))
      return false;
  auto& list = writer->threads;
  list.erase(std::remove(list.begin(), list.end(), sampler), list.end());
  for (auto* buffer : sampler->buffers) unmap_sample_buffer(buffer);
  delete sampler;
  return true;
}

void take_back_ring(sample_writer* writer, thread_sampler* sampler, sample_batch& batch) {
  std::lock_guard lock{writer->mutex};
  set_perf_ring_running(sampler->ring, false);
  drain_ring(*sampler, batch);
  ring_drained_for_good(*sampler);
  close_perf_ring(sampler->ring);
  sampler->sampled_by_ring.store(false);
}

void writer_thread_ended(sample_writer* writer) noexcept {
  // Woken only when it is left with no live thread (it may retire now); otherwise its next pass
  // (within 50 ms) delivers what is left: a wake-up per ended thread costs more than the thread
  // itself in a program that churns them. Posted before the count drops: a writer that retires
  // is gone once the count is 0.
  if (writer->live_threads.load(std::memory_order_acquire) == 1) sem_post(&writer->wake);
  writer->live_threads.fetch_sub(1, std::memory_order_acq_rel);
}

void hand_over_full_buffer(sample_writer* writer, sample_buffer* buffer) noexcept {
  writer->full.push(buffer);
  sem_post(&writer->wake);
}

void stop_writers_and_drain() {
  if (!globals) return;
  std::vector<sample_writer*> writers;
  {
    std::lock_guard lock{globals->mutex};
    globals->stopping = true;  // no writer retires from here on: the list stays valid
    writers = globals->writers;
  }
  for (auto* writer : writers) {
    writer->stopping.store(true, std::memory_order_release);
    sem_post(&writer->wake);
  }
  // Every writer thread leaves `running` when it is done: a stopped one, and also one that
  // retired just before `stopping`, which is off the list but may still be delivering its spill
  // file's last records. The database must not close under it, or that thread's samples are lost
  // (all of a thread that ended last, seen here: 260 of 1,100 samples). Bounded: a writer in the
  // middle of a large insert finishes it first; one that does not is met by the final pass below
  // under its mutex.
  wait_until([] { return globals->running.load(std::memory_order_acquire) == 0; }, std::chrono::seconds{5});
  for (auto* writer : writers) writer_pass(*writer, true);
}

int running_writers() noexcept { return globals ? globals->running.load() : 0; }

writer_counts writers_counts() noexcept {
  return {counts.ring_samples.load(), counts.ring_unwound_by_tables.load(),
          counts.ring_lost.load(),    counts.ring_lost_ns.load(),
          counts.cut_stacks.load(),   counts.chained_stacks.load()};
}

problem writers_problem() {
  if (!globals) return {};
  std::lock_guard lock{globals->mutex};
  return globals->first_problem;
}

void writers_lock_for_fork() {
  if (globals) globals->mutex.lock();
}
void writers_unlock_after_fork_in_parent() {
  if (globals) globals->mutex.unlock();
}
void writers_forget_after_fork_in_child() noexcept {
  globals = nullptr;  // the parent's writers (and their spill files' offsets) are not the child's
}

}  // namespace kairos::runtime
