#include "preload/support/own_frames.hpp"

#include <dlfcn.h>
#include <link.h>

#include <kairos/plugins/gotcha/call_through.hpp>

namespace kairos::runtime {
namespace {

struct own_ranges {
  code_range code;     // libkairos.so's instructions
  code_range through;  // kairos_call_through's, inside `code`
};

own_ranges find_ranges() noexcept {
  own_ranges found;
  found.code.begin = reinterpret_cast<std::uintptr_t>(&find_ranges);  // a point inside, until the segment is found
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* context) {
        auto& range = *static_cast<code_range*>(context);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_X)) continue;
          const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
          if (range.begin >= begin && range.begin < begin + segment.p_memsz) {
            range = {begin, begin + segment.p_memsz};
            return 1;
          }
        }
        return 0;
      },
      &found.code);
  if (found.code.end == 0) found.code = {};
  const auto through = gotcha_patcher::call_through_range();
  found.through = {reinterpret_cast<std::uintptr_t>(through.begin), reinterpret_cast<std::uintptr_t>(through.end)};
  return found;
}

const own_ranges& ranges() noexcept {
  static const own_ranges found = find_ranges();
  return found;
}

}  // namespace

code_range own_code() noexcept { return ranges().code; }

const std::string& own_module_path() {
  static const std::string path = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&find_ranges), &info) != 0 && info.dli_fname
               ? std::string{info.dli_fname}
               : std::string{"libkairos.so"};
  }();
  return path;
}

folded_stack fold_own_frames(std::uint64_t* addresses, std::size_t count) noexcept {
  const auto& [code, through] = ranges();
  const auto own = [&](std::size_t i) { return code.holds(addresses[i]); };
  std::size_t innermost_own = 0;
  while (innermost_own < count && !own(innermost_own)) ++innermost_own;
  if (innermost_own == count) return {count, false};

  // kairos's own work starts at its outermost frame that is the leaf or called code outside
  // kairos, other than the frame kairos_call_through called (which passes the call on).
  std::size_t own_work_from = count;
  for (std::size_t i = count; i-- > innermost_own;) {
    if (!own(i) || (i > 0 && own(i - 1))) continue;
    const bool passes_on = i > 0 && i + 1 < count && through.holds(addresses[i + 1]);
    if (passes_on) continue;
    own_work_from = i;
    break;
  }
  std::size_t kept = 0, next = 0;
  if (own_work_from < count) {
    addresses[kept++] = own_work_frame_address;
    next = own_work_from + 1;
  }
  for (; next < count; ++next)
    if (!own(next)) addresses[kept++] = addresses[next];
  return {kept, own_work_from < count};
}

}  // namespace kairos::runtime
