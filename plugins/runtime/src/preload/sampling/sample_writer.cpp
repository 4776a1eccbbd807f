#include "preload/sampling/sample_writer.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "preload/profile_database.hpp"
#include "preload/reentry_guard.hpp"
#include "preload/sampling/sampler.hpp"
#include "preload/thread_registry.hpp"

namespace kairos::runtime {

sample_buffer* map_sample_buffer(thread_sampler* owner) noexcept {
  void* memory = mmap(nullptr, sizeof(sample_buffer), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  auto* buffer = new (memory) sample_buffer;  // only the header is written: pages stay untouched
  buffer->owner = owner;
  return buffer;
}

void unmap_sample_buffer(sample_buffer* buffer) noexcept {
  if (buffer) munmap(buffer, sizeof(sample_buffer));
}

struct sample_writer {
  full_buffer_stack full;
  sem_t wake;
  std::mutex mutex;  // its threads, and one pass at a time
  std::vector<thread_sampler*> threads;
  int spill_fd = -1;
  off_t spilled = 0;
  off_t ingested = 0;
  std::int64_t last_ingest_ns = 0;
  std::atomic<bool> stopping{false};
  std::atomic<bool> thread_done{false};
  bool thread_running = false;
};

namespace {

constexpr std::int64_t pass_interval_ns = 50'000'000;
constexpr std::size_t ingest_batch = 4096;

struct writer_globals {
  std::mutex mutex;
  std::vector<sample_writer*> writers;
  std::size_t threads_assigned = 0;
  int threads_per_writer = 8;
  bool temporary_files = true;
  std::int64_t flush_interval_ns = 1'000'000'000;
};
writer_globals* globals = nullptr;

// A record in a spill file: this header, then `frame_count` addresses.
struct spill_header {
  thread_record* thread;
  std::int64_t time_ns, weight_ns, thread_cpu_ns;
  std::uint16_t frame_count;
  sample_source source;
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

void copy_out(sample_buffer& buffer, std::uint32_t end, std::vector<pending_sample>& batch) {
  for (std::uint32_t i = buffer.consumed; i < end; ++i) {
    const auto& record = buffer.records[i];
    auto& sample = batch.emplace_back();
    sample.thread = buffer.owner->thread;
    sample.time_ns = record.time_ns;
    sample.weight_ns = record.weight_ns;
    sample.thread_cpu_ns = record.thread_cpu_ns;
    sample.source = record.source;
    sample.frame_count = static_cast<std::uint16_t>(record.stack.size());
    for (std::size_t f = 0; f < record.stack.size(); ++f) sample.addresses[f] = record.stack.lookup_address(f);
  }
  buffer.consumed = end;
}

void drain_committed(sample_buffer& buffer, std::vector<pending_sample>& batch) {
  copy_out(buffer, buffer.committed.load(std::memory_order_acquire), batch);
}

// A full buffer, consumed to the end, goes back to its thread as a spare.
void give_back(sample_buffer& buffer) {
  buffer.consumed = 0;
  buffer.committed.store(0, std::memory_order_relaxed);
  buffer.state.store(sample_buffer::free_state, std::memory_order_release);
}

bool spill(sample_writer& writer, const std::vector<pending_sample>& batch) {
  std::vector<char> bytes;
  bytes.reserve(batch.size() * (sizeof(spill_header) + 16 * sizeof(std::uint64_t)));
  for (const auto& sample : batch) {
    spill_header header{sample.thread, sample.time_ns, sample.weight_ns, sample.thread_cpu_ns,
                        sample.frame_count, sample.source};
    const auto* h = reinterpret_cast<const char*>(&header);
    bytes.insert(bytes.end(), h, h + sizeof header);
    const auto* a = reinterpret_cast<const char*>(sample.addresses);
    bytes.insert(bytes.end(), a, a + sample.frame_count * sizeof(std::uint64_t));
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = pwrite(writer.spill_fd, bytes.data() + done, bytes.size() - done, writer.spilled + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  writer.spilled += static_cast<off_t>(done);
  return true;
}

void ingest_spill_file(sample_writer& writer) {
  std::vector<pending_sample> batch;
  std::vector<char> chunk(1 << 20);
  while (writer.ingested < writer.spilled) {
    const auto want = std::min<off_t>(static_cast<off_t>(chunk.size()), writer.spilled - writer.ingested);
    const auto n = pread(writer.spill_fd, chunk.data(), static_cast<std::size_t>(want), writer.ingested);
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
      sample.frame_count = header.frame_count;
      std::memcpy(sample.addresses, chunk.data() + position + sizeof header,
                  header.frame_count * sizeof(std::uint64_t));
      position += size;
      if (batch.size() >= ingest_batch) {
        database_add_samples(batch);
        batch.clear();
      }
    }
    if (position == 0) break;  // a record larger than the chunk cannot happen; stop rather than spin
    writer.ingested += static_cast<off_t>(position);
  }
  database_add_samples(batch);
}

void writer_pass(sample_writer& writer, bool final_pass) {
  std::lock_guard lock{writer.mutex};  // the final pass may meet a writer that did not stop in time
  std::vector<pending_sample> batch;
  {
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
    for (std::size_t i = 0; i < writer.threads.size(); ++i) {
      auto* sampler = writer.threads[i];
      for (auto* buffer : sampler->buffers)
        if (buffer && (final_pass || finished[i] ||
                       buffer->state.load(std::memory_order_acquire) == sample_buffer::filling_state))
          drain_committed(*buffer, batch);
      if (finished[i]) {  // its thread ended: nothing can write here any more
        for (auto* buffer : sampler->buffers) unmap_sample_buffer(buffer);
        delete sampler;
      } else {
        kept.push_back(sampler);
      }
    }
    writer.threads.swap(kept);
  }
  if (writer.spill_fd >= 0 && !batch.empty() && !spill(writer, batch)) {
    close(writer.spill_fd);  // the disk is full or gone: straight into the database from now on
    writer.spill_fd = -1;
  }
  if (writer.spill_fd < 0) database_add_samples(batch);
  const auto now = steady_now_ns();
  if (writer.spill_fd >= 0 && (final_pass || now - writer.last_ingest_ns >= globals->flush_interval_ns)) {
    ingest_spill_file(writer);
    writer.last_ingest_ns = now;
  }
}

void* writer_main(void* argument) {
  reentry_guard guard;
  auto& writer = *static_cast<sample_writer*>(argument);
  pthread_setname_np(pthread_self(), "kairos-writer");
  while (!writer.stopping.load(std::memory_order_acquire)) {
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += pass_interval_ns;
    if (deadline.tv_nsec >= 1'000'000'000) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1'000'000'000;
    }
    sem_timedwait(&writer.wake, &deadline);
    if (writer.stopping.load(std::memory_order_acquire)) break;
    try {
      writer_pass(writer, false);
    } catch (...) {
      // A database error must never end the program; the final pass reports what is missing.
    }
  }
  writer.thread_done.store(true, std::memory_order_release);
  return nullptr;
}

sample_writer* create_writer() {
  auto* writer = new sample_writer;
  sem_init(&writer->wake, 0, 0);
  if (globals->temporary_files) writer->spill_fd = open_spill_file();
  writer->last_ingest_ns = steady_now_ns();
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);  // no signal ever lands on a writer
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  {
    reentry_guard guard;  // created inside kairos: registered as kairos's own thread
    writer->thread_running = pthread_create(&thread, &attributes, &writer_main, writer) == 0;
  }
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return writer;
}

}  // namespace

void configure_writers(int threads_per_writer, bool temporary_files, std::int64_t flush_interval_ns) {
  if (!globals) globals = new writer_globals;
  globals->threads_per_writer = threads_per_writer > 0 ? threads_per_writer : 1;
  globals->temporary_files = temporary_files;
  globals->flush_interval_ns = flush_interval_ns;
}

sample_writer* assign_writer(thread_sampler* sampler) {
  if (!globals) globals = new writer_globals;
  sample_writer* writer = nullptr;
  {
    std::lock_guard lock{globals->mutex};
    const auto index = globals->threads_assigned++ / static_cast<std::size_t>(globals->threads_per_writer);
    while (globals->writers.size() <= index) globals->writers.push_back(create_writer());
    writer = globals->writers[index];
  }
  std::lock_guard lock{writer->mutex};
  writer->threads.push_back(sampler);
  return writer;
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
    writers = globals->writers;
  }
  for (auto* writer : writers) {
    writer->stopping.store(true, std::memory_order_release);
    sem_post(&writer->wake);
  }
  for (auto* writer : writers) {
    // Bounded: a writer in the middle of a large insert finishes it first.
    for (int waited = 0; writer->thread_running && !writer->thread_done.load() && waited < 5000; ++waited)
      usleep(1000);
    try {
      writer_pass(*writer, true);
    } catch (...) {
    }
  }
}

void writers_lock_for_fork() {
  if (globals) globals->mutex.lock();
}
void writers_unlock_after_fork_in_parent() {
  if (globals) globals->mutex.unlock();
}

void forget_writers_after_fork() {
  globals = nullptr;  // the parent's writers (and their spill files' offsets) are not ours
}

}  // namespace kairos::runtime
