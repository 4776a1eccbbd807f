#include "elf_object.hpp"

namespace kairos::gotcha_patcher::detail {

elf_object::elf_object(const dl_phdr_info& info)
    : base_{info.dlpi_addr},
      name_{info.dlpi_name != nullptr ? info.dlpi_name : ""},
      program_headers_{info.dlpi_phdr},
      program_header_count_{info.dlpi_phnum} {
  const ElfW(Dyn)* dynamic = nullptr;
  for (std::size_t i = 0; i < program_header_count_; ++i)
    if (program_headers_[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(base_ + program_headers_[i].p_vaddr);
  if (dynamic == nullptr) return;

  bool relocations_are_rela = true;
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    switch (entry->d_tag) {
      case DT_SYMTAB:
        symbols_ = pointer<ElfW(Sym)>(entry->d_un.d_ptr);
        break;
      case DT_STRTAB:
        strings_ = pointer<char>(entry->d_un.d_ptr);
        break;
      case DT_JMPREL:
        jump_relocations_ = pointer<ElfW(Rela)>(entry->d_un.d_ptr);
        break;
      case DT_PLTRELSZ:
        jump_relocations_bytes_ = entry->d_un.d_val;
        break;
      case DT_PLTREL:
        relocations_are_rela = entry->d_un.d_val == DT_RELA;
        break;
      case DT_RELA:
        relocations_ = pointer<ElfW(Rela)>(entry->d_un.d_ptr);
        break;
      case DT_RELASZ:
        relocations_bytes_ = entry->d_un.d_val;
        break;
      case DT_VERSYM:
        version_indices_ = pointer<ElfW(Versym)>(entry->d_un.d_ptr);
        break;
      case DT_VERNEED:
        versions_needed_ = pointer<ElfW(Verneed)>(entry->d_un.d_ptr);
        break;
      case DT_VERNEEDNUM:
        versions_needed_count_ = entry->d_un.d_val;
        break;
      case DT_VERDEF:
        versions_defined_ = pointer<ElfW(Verdef)>(entry->d_un.d_ptr);
        break;
      case DT_VERDEFNUM:
        versions_defined_count_ = entry->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (!relocations_are_rela) jump_relocations_ = nullptr;  // REL is not used on x86-64
}

bool elf_object::contains(const void* address) const noexcept {
  const auto value = reinterpret_cast<ElfW(Addr)>(address);
  for (std::size_t i = 0; i < program_header_count_; ++i) {
    const ElfW(Phdr)& header = program_headers_[i];
    if (header.p_type != PT_LOAD) continue;
    const ElfW(Addr) begin = base_ + header.p_vaddr;
    if (value >= begin && value < begin + header.p_memsz) return true;
  }
  return false;
}

std::string_view elf_object::version_of(std::uint32_t symbol_index) const noexcept {
  if (version_indices_ == nullptr) return {};
  const unsigned index = version_indices_[symbol_index] & 0x7fff;
  if (index <= 1) return {};  // local or global: no version named
  // A reference to another object's symbol names its version in the "needed" list...
  const auto* needed = versions_needed_;
  for (std::size_t i = 0; needed != nullptr && i < versions_needed_count_; ++i) {
    const auto* auxiliary =
        reinterpret_cast<const ElfW(Vernaux)*>(reinterpret_cast<const char*>(needed) + needed->vn_aux);
    for (std::size_t j = 0; j < needed->vn_cnt; ++j) {
      if (auxiliary->vna_other == index) return strings_ + auxiliary->vna_name;
      auxiliary =
          reinterpret_cast<const ElfW(Vernaux)*>(reinterpret_cast<const char*>(auxiliary) + auxiliary->vna_next);
    }
    if (needed->vn_next == 0) break;
    needed = reinterpret_cast<const ElfW(Verneed)*>(reinterpret_cast<const char*>(needed) + needed->vn_next);
  }
  // ...a symbol the object defines itself names it in the "defined" list.
  const auto* defined = versions_defined_;
  for (std::size_t i = 0; defined != nullptr && i < versions_defined_count_; ++i) {
    if (defined->vd_ndx == index) {
      const auto* auxiliary =
          reinterpret_cast<const ElfW(Verdaux)*>(reinterpret_cast<const char*>(defined) + defined->vd_aux);
      return strings_ + auxiliary->vda_name;
    }
    if (defined->vd_next == 0) break;
    defined = reinterpret_cast<const ElfW(Verdef)*>(reinterpret_cast<const char*>(defined) + defined->vd_next);
  }
  return {};
}

}  // namespace kairos::gotcha_patcher::detail
