#pragma once
// Reading one loaded object's dynamic section: which relocations bind a symbol to a slot.
// Internal to libkairos_gotcha; x86-64 only (RELA relocations).
#include <elf.h>
#include <link.h>

#include <cstdint>
#include <string_view>

namespace kairos::gotcha_patcher::detail {

// A relocation that stores a function's address into a pointer-sized slot. The name is a pointer,
// not a string_view, and the version an index: a pass looks at every relocation of every object,
// and measuring each name (strlen) or finding each version cost more than the rest of the walk.
struct function_slot {
  void** address;
  const char* symbol;
  std::uint32_t symbol_index;  // for elf_object::version_of
  unsigned type;               // R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT or R_X86_64_64
};

class elf_object {
 public:
  explicit elf_object(const dl_phdr_info& info);

  bool has_dynamic_section() const noexcept { return symbols_ != nullptr && strings_ != nullptr; }
  ElfW(Addr) base() const noexcept { return base_; }
  std::string_view name() const noexcept { return name_; }
  // Whether `address` lies in one of this object's loaded segments.
  bool contains(const void* address) const noexcept;

  template <class Visit>
  void for_each_function_slot(Visit&& visit) const {
    scan(jump_relocations_, jump_relocations_bytes_, visit);
    scan(relocations_, relocations_bytes_, visit);
  }

  // The version a slot's reference names; empty when it names none.
  std::string_view version_of(std::uint32_t symbol_index) const noexcept;

 private:
  // Turns a d_ptr into an address: glibc relocates most of them in place, the vDSO's it does not.
  template <class T>
  const T* pointer(ElfW(Addr) value) const noexcept {
    return reinterpret_cast<const T*>(value >= base_ ? value : base_ + value);
  }

  template <class Visit>
  void scan(const ElfW(Rela) * first, std::size_t bytes, Visit& visit) const {
    if (first == nullptr) return;
    const std::size_t count = bytes / sizeof(ElfW(Rela));
    for (std::size_t i = 0; i < count; ++i) {
      const ElfW(Rela)& relocation = first[i];
      const unsigned type = ELF64_R_TYPE(relocation.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64) continue;
      // An absolute pointer with an addend points inside something, not at a function's entry.
      if (type == R_X86_64_64 && relocation.r_addend != 0) continue;
      const std::uint32_t index = ELF64_R_SYM(relocation.r_info);
      if (index == 0) continue;
      const ElfW(Sym)& symbol = symbols_[index];
      const unsigned kind = ELF64_ST_TYPE(symbol.st_info);
      if (kind != STT_FUNC && kind != STT_GNU_IFUNC && kind != STT_NOTYPE) continue;
      visit(
          function_slot{reinterpret_cast<void**>(base_ + relocation.r_offset), strings_ + symbol.st_name, index, type});
    }
  }

  ElfW(Addr) base_ = 0;
  std::string_view name_;
  const ElfW(Phdr) * program_headers_ = nullptr;
  std::size_t program_header_count_ = 0;
  const ElfW(Sym) * symbols_ = nullptr;
  const char* strings_ = nullptr;
  const ElfW(Rela) * jump_relocations_ = nullptr;
  std::size_t jump_relocations_bytes_ = 0;
  const ElfW(Rela) * relocations_ = nullptr;
  std::size_t relocations_bytes_ = 0;
  const ElfW(Versym) * version_indices_ = nullptr;
  const ElfW(Verneed) * versions_needed_ = nullptr;
  std::size_t versions_needed_count_ = 0;
  const ElfW(Verdef) * versions_defined_ = nullptr;
  std::size_t versions_defined_count_ = 0;
};

}  // namespace kairos::gotcha_patcher::detail
