#pragma once
// The process's mappings and their protections, read from /proc/self/maps, and the one way the
// patcher writes a slot: directly when the page is writable, else by making the page writable
// for the store and restoring its protection right after (RELRO pages).
#include <cstdint>
#include <vector>

namespace kairos::gotcha_patcher::detail {

class memory_map {
 public:
  // Reads /proc/self/maps; an unreadable file leaves the map empty (every write then fails).
  void load();
  bool loaded() const noexcept { return loaded_; }
  // PROT_* bits of the mapping holding `address`, or -1 if none does.
  int protection_of(std::uintptr_t address) const noexcept;

 private:
  struct region {
    std::uintptr_t begin, end;
    int protection;
  };
  std::vector<region> regions_;
  bool loaded_ = false;
};

struct slot_write {
  void** slot;
  void* value;
};

// Applies `writes` (sorted by address here) inside one object whose RELRO range is
// [relro_begin, relro_end). Returns how many were written.
std::size_t apply_writes(std::vector<slot_write>& writes, std::uintptr_t relro_begin, std::uintptr_t relro_end,
                         memory_map& map);

}  // namespace kairos::gotcha_patcher::detail
