#include "memory_map.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace kairos::gotcha_patcher::detail {

void memory_map::load() {
  loaded_ = true;
  regions_.clear();
  const int descriptor = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return;
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t got = ::read(descriptor, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(descriptor);
  // Each line: "begin-end rwxp offset dev inode path".
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t line_end = text.find('\n', at);
    if (line_end == std::string::npos) line_end = text.size();
    const char* line = text.data() + at;
    char* after = nullptr;
    const auto begin = std::strtoull(line, &after, 16);
    const auto end = std::strtoull(after + 1, &after, 16);
    const char* permissions = after + 1;
    int protection = 0;
    if (permissions[0] == 'r') protection |= PROT_READ;
    if (permissions[1] == 'w') protection |= PROT_WRITE;
    if (permissions[2] == 'x') protection |= PROT_EXEC;
    regions_.push_back({begin, end, protection});
    at = line_end + 1;
  }
}

int memory_map::protection_of(std::uintptr_t address) const noexcept {
  for (const region& r : regions_)
    if (address >= r.begin && address < r.end) return r.protection;
  return -1;
}

namespace {

void store(void** slot, void* value) { __atomic_store_n(slot, value, __ATOMIC_RELEASE); }

// A store that fails instead of faulting: for a RELRO page still writable when /proc/self/maps
// was read, which the loader may be protecting at this moment (an object dlopen'ed meanwhile).
bool store_without_fault(void** slot, void* value) {
  iovec local{&value, sizeof value};
  iovec remote{slot, sizeof value};
  const ssize_t written = ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0);
  if (written == static_cast<ssize_t>(sizeof value)) return true;
  if (written < 0 && (errno == ENOSYS || errno == EPERM)) {
    store(slot, value);  // no way to probe: the map said writable, trust it
    return true;
  }
  return false;
}

}  // namespace

std::size_t apply_writes(std::vector<slot_write>& writes, std::uintptr_t relro_begin, std::uintptr_t relro_end,
                         memory_map& map) {
  if (writes.empty()) return 0;
  if (!map.loaded()) map.load();
  std::sort(writes.begin(), writes.end(), [](const slot_write& a, const slot_write& b) { return a.slot < b.slot; });
  const auto page_size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::size_t written = 0;
  for (std::size_t i = 0; i < writes.size();) {
    const auto address = reinterpret_cast<std::uintptr_t>(writes[i].slot);
    const std::uintptr_t page = address & ~(page_size - 1);
    std::size_t last = i;  // the writes on this page: [i, last]
    while (last + 1 < writes.size() &&
           (reinterpret_cast<std::uintptr_t>(writes[last + 1].slot) & ~(page_size - 1)) == page)
      ++last;
    const int protection = map.protection_of(address);
    const bool in_relro = address >= relro_begin && address < relro_end;
    if (protection < 0) {
      // not mapped: nothing to do
    } else if ((protection & PROT_WRITE) && !in_relro) {
      for (std::size_t k = i; k <= last; ++k, ++written) store(writes[k].slot, writes[k].value);
    } else if (protection & PROT_WRITE) {
      for (std::size_t k = i; k <= last; ++k) written += store_without_fault(writes[k].slot, writes[k].value) ? 1 : 0;
    } else if (in_relro) {
      // Writable only for the stores, then back to what the loader set.
      void* start = reinterpret_cast<void*>(page);
      if (::mprotect(start, page_size, protection | PROT_WRITE) == 0) {
        for (std::size_t k = i; k <= last; ++k, ++written) store(writes[k].slot, writes[k].value);
        ::mprotect(start, page_size, protection);
      }
    }
    // A read-only page outside RELRO would be a text relocation: left alone.
    i = last + 1;
  }
  return written;
}

}  // namespace kairos::gotcha_patcher::detail
