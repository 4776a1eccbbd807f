#include "preload/sampling/perf_ring.hpp"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>

#if defined(__x86_64__)
#include <asm/perf_regs.h>
#endif

#include <kairos/plugins/backtrace.hpp>

#include "preload/windows/window_state.hpp"

namespace kairos::runtime {
namespace {

// The top of the user stack copied at each sample (perf record's default), for the frames only
// unwind tables can follow (code built without frame pointers). Beyond it the kernel's
// frame-pointer chain goes on, as far as frame pointers do (perf_event_max_stack entries).
constexpr std::uint32_t stack_copy_bytes = 8192;
constexpr std::size_t default_chain_entries = 127;  // the kernel's perf_event_max_stack default
// A sample weighs the CPU time since the previous one, but never more than this many periods: what
// lies beyond was seen by no sample (lost, throttled), and is counted as lost, not charged to one
// stack. Consecutive samples of a task-clock event lie one period apart, give or take the timer's
// slack.
constexpr std::int64_t heaviest_sample_periods = 2;
// Data pages for 250 ms of samples: the writer drains rings every 10 ms, but a pass that delivers
// to the database (symbolizing a JIT's new addresses) or a loaded machine keeps it away longer,
// and shorter rings lost a quarter of a JIT's samples on a loaded machine. 1 MiB a
// thread at the default 300 Hz, at most 2 MiB (about 220 ms at 1 kHz, 22 ms at 10 kHz). The pages
// are locked memory, so every thread's ring is no larger than its rate needs. Halved while the
// kernel refuses (a user's perf_event_mlock_kb, 516 KiB by default, bounds all of a user's rings).
constexpr std::int64_t ring_holds_ns = 250'000'000;
constexpr std::size_t largest_ring_pages = 512, smallest_ring_pages = 16;

// The longest user chain the kernel gives (/proc/sys/kernel/perf_event_max_stack).
std::size_t chain_entries_limit() {
  static const std::size_t limit = [] {
    std::size_t value = default_chain_entries;
    if (FILE* file = std::fopen("/proc/sys/kernel/perf_event_max_stack", "re")) {
      unsigned long read = 0;
      if (std::fscanf(file, "%lu", &read) == 1 && read > 0) value = read;
      std::fclose(file);
    }
    return value;
  }();
  return limit;
}

std::size_t ring_pages(std::int64_t period_ns, long page_size) {
  const auto samples = static_cast<std::size_t>(ring_holds_ns / std::max<std::int64_t>(period_ns, 1) + 1);
  const std::size_t record = stack_copy_bytes + 128 + 8 * (std::min<std::size_t>(chain_entries_limit(), 512) + 2);
  const std::size_t wanted = samples * record / static_cast<std::size_t>(page_size) + 1;
  std::size_t pages = smallest_ring_pages;  // a power of two, as the kernel requires
  while (pages < wanted && pages < largest_ring_pages) pages *= 2;
  return pages;
}

#if defined(__x86_64__)
constexpr std::uint64_t registers_wanted =
    (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP);
#endif

int open_ring_event(pid_t tid, std::int64_t period_ns, bool include_kernel) {
#if defined(__x86_64__)
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_TASK_CLOCK;
  attributes.sample_period = static_cast<std::uint64_t>(period_ns);
  attributes.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN |
                           PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  attributes.exclude_callchain_kernel = 1;  // the user part alone: the kernel's frames are the call's
  attributes.read_format = 0;               // PERF_SAMPLE_READ: the count alone
  attributes.sample_regs_user = registers_wanted;
  attributes.sample_stack_user = stack_copy_bytes;
  attributes.disabled = 1;
  attributes.exclude_hv = 1;
  // A sample in the kernel carries the user registers of the system call's entry: its time is
  // charged to the call, and no signal is ever sent.
  attributes.exclude_kernel = include_kernel ? 0 : 1;
  attributes.use_clockid = 1;
  attributes.clockid = CLOCK_MONOTONIC;  // the database's clock
  // Nobody waits on the ring: no wake-up until it is nearly full.
  attributes.watermark = 1;
  attributes.wakeup_watermark = 1u << 30;
  return static_cast<int>(syscall(SYS_perf_event_open, &attributes, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
#else
  (void)tid;
  (void)period_ns;
  (void)include_kernel;
  errno = ENOSYS;  // the registers wanted are named per architecture
  return -1;
#endif
}

// The window a sample taken at `time_ns` belongs to: drained up to 10 ms later, the window open
// now may not be its own. One taken between a window's close and its ring's disabling is the
// closing window's.
std::int32_t window_at(std::int64_t time_ns) {
  if (!windows_govern()) return current_window();
  std::int32_t found = -1;
  for_each_window_between(time_ns, time_ns, [&](const window_span& span) { found = span.ordinal; });
  if (found < 0)
    for_each_window_between(time_ns - 1'000'000'000, time_ns, [&](const window_span& span) {
      if (span.open_ns <= time_ns) found = span.ordinal;
    });
  return found < 0 ? current_window() : found;
}

template <typename T>
T read_at(const unsigned char* at) noexcept {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

bool open_perf_ring(perf_ring& ring, pid_t tid, std::int64_t period_ns) {
  ring.counts_kernel = true;
  int fd = open_ring_event(tid, period_ns, true);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    // perf_event_paranoid 2 for a user: user mode only, so a system call's time weighs on the
    // thread's next sample (docs/runtime.md); still the only way to see this thread at all.
    ring.counts_kernel = false;
    fd = open_ring_event(tid, period_ns, false);
  }
  if (fd < 0) return false;
  ring.period_ns = period_ns;
  const long page = sysconf(_SC_PAGESIZE);
  for (std::size_t pages = ring_pages(period_ns, page); pages >= smallest_ring_pages; pages /= 2) {
    const std::size_t size = (pages + 1) * static_cast<std::size_t>(page);
    void* mapping = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) continue;
    ring.mapping = mapping;
    ring.mapping_size = size;
    break;
  }
  if (!ring.mapping) {
    const int error = errno;
    close(fd);
    errno = error;
    return false;
  }
  ring.event.adopt(fd);
  ring.last_count = 0;
  ring.unseen_since_sample = false;
  return true;
}

void set_perf_ring_running(perf_ring& ring, bool running) noexcept {
  if (ring.event.still_ours()) ioctl(ring.event.get(), running ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

// Never disables the event first: a fork child closes its copies, and an ioctl on an inherited
// descriptor would stop the parent's event (the stress test's forks did).
void close_perf_ring(perf_ring& ring) noexcept {
  ring.event.close_if_ours();
  if (ring.mapping) munmap(ring.mapping, ring.mapping_size);
  ring.mapping = nullptr;
  ring.mapping_size = 0;
}

std::int64_t perf_ring_tail_ns(const perf_ring& ring) noexcept {
  std::uint64_t count = 0;
  if (!ring.event.still_ours() || read(ring.event.get(), &count, sizeof count) != sizeof count) return 0;
  return count > ring.last_count ? static_cast<std::int64_t>(count - ring.last_count) : 0;
}

namespace {

#if defined(__x86_64__)
// A PERF_RECORD_SAMPLE's fields, as the ring's sample_type lays them out after the header.
struct ring_sample {
  std::uint64_t time_ns = 0, count = 0;
  // The user chain: the interrupted ip and the return addresses, context markers left out.
  std::uint64_t chain[sample_stack_depth + 1];
  std::size_t chain_length = 0;
  bool chain_whole = false;
  bool has_registers = false;  // the kernel could read the user context
  std::uint64_t bp = 0, sp = 0, ip = 0;
  const unsigned char* stack = nullptr;  // the copy of the user stack
  std::uint64_t stack_bytes = 0;
};

ring_sample read_sample(const unsigned char* at) {
  ring_sample sample;
  at += 8;  // pid, tid: the ring's own thread
  sample.time_ns = read_at<std::uint64_t>(at);
  sample.count = read_at<std::uint64_t>(at + 8);
  at += 16;
  const auto chain_size = read_at<std::uint64_t>(at);
  const unsigned char* chain_at = at + 8;
  at = chain_at + 8 * chain_size;
  for (std::uint64_t i = 0; i < chain_size && sample.chain_length < std::size(sample.chain); ++i)
    if (const auto entry = read_at<std::uint64_t>(chain_at + 8 * i); entry < PERF_CONTEXT_MAX)
      sample.chain[sample.chain_length++] = entry;
  sample.chain_whole = sample.chain_length < std::size(sample.chain);
  sample.has_registers = read_at<std::uint64_t>(at) != PERF_SAMPLE_REGS_ABI_NONE;
  at += 8;
  if (sample.has_registers) {  // in register-number order
    sample.bp = read_at<std::uint64_t>(at);
    sample.sp = read_at<std::uint64_t>(at + 8);
    sample.ip = read_at<std::uint64_t>(at + 16);
    at += 24;
  }
  const auto copied = read_at<std::uint64_t>(at);
  sample.stack = at + 8;
  const auto dynamic_size = copied ? read_at<std::uint64_t>(sample.stack + copied) : 0;
  sample.stack_bytes = std::min(copied, dynamic_size);
  return sample;
}

// The sample's weight, then its stack walked over the copy of the user stack (the kernel's chain
// where the copy ends), into a row of the batch.
void add_sample(perf_ring& ring, thread_record* thread, const ring_sample& read, sample_batch& batch,
                ring_drain& drained) {
  // A ring that counts user mode only skips its overflows in the kernel: there the gap is a
  // system call's time, which its next sample, at the call's site, carries (docs/runtime.md).
  const auto elapsed = static_cast<std::int64_t>(read.count - ring.last_count);
  const auto heaviest = !ring.counts_kernel        ? elapsed
                        : ring.unseen_since_sample ? ring.period_ns
                                                   : heaviest_sample_periods * ring.period_ns;
  const auto weight = std::min(elapsed, heaviest);
  drained.lost_ns += elapsed - weight;
  ring.unseen_since_sample = false;
  ring.last_count = read.count;
  auto& sample = batch.emplace_back();
  sample.thread = thread;
  sample.time_ns = static_cast<std::int64_t>(read.time_ns);
  sample.weight_ns = weight;
  ring.weights_ns += elapsed;  // the kept weight and the lost time: coverage's weights
  sample.thread_cpu_ns = ring.cpu_at_open_ns + static_cast<std::int64_t>(read.count);
  sample.source = sample_source::cpu_time;
  sample.window = window_at(sample.time_ns);
  // One slot kept for the mark of a cut stack.
  constexpr int walk_capacity = static_cast<int>(sample_stack_depth) - 1;
  std::uintptr_t frames[sample_stack_depth];
  const auto walk = kairos::walk_copied_stack(read.ip, read.sp, read.bp, read.stack, read.stack_bytes, frames,
                                              walk_capacity, read.chain, read.chain_length,
                                              read.chain_whole ? chain_entries_limit() : read.chain_length);
  const int count_walked = walk.count > 0 ? walk.count : 1;
  if (walk.count == 0) frames[0] = read.ip;
  sample.frame_count = static_cast<std::uint16_t>(count_walked);
  sample.addresses[0] = frames[0];                                             // the interrupted instruction itself
  for (int i = 1; i < count_walked; ++i) sample.addresses[i] = frames[i] - 1;  // inside the call
  if (walk.truncated || walk.count == 0) {
    sample.addresses[sample.frame_count++] = cut_stack_address;
    ++drained.cut_stacks;
  }
  ++drained.samples;
  if (walk.count > 0) ++drained.unwound_by_tables;
  if (walk.chained > 0) ++drained.chained_stacks;
}
#endif

}  // namespace

ring_drain drain_perf_ring(perf_ring& ring, thread_record* thread, sample_batch& batch) {
  ring_drain drained;
  if (!ring.mapping) return drained;
  auto* page = static_cast<perf_event_mmap_page*>(ring.mapping);
  const std::uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  std::uint64_t tail = page->data_tail;
  const auto* data = static_cast<const unsigned char*>(ring.mapping) + page->data_offset;
  const std::uint64_t size = page->data_size;
  while (tail + sizeof(perf_event_header) <= head) {
    // A record may wrap around the ring's end: then it is copied out whole first.
    auto copy_out = [&](std::uint64_t length) -> const unsigned char* {
      const std::uint64_t start = tail % size;
      if (start + length <= size) return data + start;
      ring.record.resize(length);
      const std::uint64_t first = size - start;
      std::memcpy(ring.record.data(), data + start, first);
      std::memcpy(ring.record.data() + first, data, length - first);
      return ring.record.data();
    };
    const auto header = read_at<perf_event_header>(copy_out(sizeof(perf_event_header)));
    if (header.size < sizeof header || tail + header.size > head) break;
    const unsigned char* record = copy_out(header.size);
    tail += header.size;
    if (header.type == PERF_RECORD_LOST) {
      drained.lost += read_at<std::uint64_t>(record + sizeof header + 8);  // after the event id
      ring.unseen_since_sample = true;
      continue;
    }
    if (header.type == PERF_RECORD_THROTTLE) ring.unseen_since_sample = true;
    if (header.type != PERF_RECORD_SAMPLE) continue;
#if defined(__x86_64__)
    const ring_sample read = read_sample(record + sizeof header);
    // No user context (the kernel could not read it): no stack to charge its time to.
    if (!read.has_registers || read.ip == 0) {
      ring.unseen_since_sample = true;
      continue;
    }
    add_sample(ring, thread, read, batch, drained);
#endif
  }
  __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
  return drained;
}

}  // namespace kairos::runtime
