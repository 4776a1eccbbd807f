// kairos as NVTX's injection library. NVTX v3 is header-only: a program's first NVTX call loads
// the library NVTX_INJECTION64_PATH names and calls its InitializeInjectionNvtx2 with a function
// that hands out NVTX's export tables; the callbacks table gives, per module, the program's table
// of pointers to its function slots, and kairos stores its own functions there. The types and
// numbers are NVTX's (nvtxDetail/nvtxTypes.h, nvToolsExt.h), declared here.
//
//   push/pop (nvtxRangePush*, nvtxDomainRangePush/Pop)  regions of kind nvtx, a stack a thread
//                                                       and domain, as NVTX keeps its levels
//   start/end (nvtxRangeStart*, nvtxRangeEnd)           annotation_range rows: they need not nest
//   marks (nvtxMark*, nvtxDomainMarkEx)                 regions of no length
//   named domains                                       their ranges named "domain: message"
#include <cstdint>
#include <cwchar>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "preload/annotations/annotated_regions.hpp"
#include "preload/annotations/annotation_ranges.hpp"
#include "preload/annotations/annotations.hpp"
#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {
namespace {

// --- NVTX's types ---------------------------------------------------------------------------------
using nvtx_function = void (*)();
using nvtx_function_table = nvtx_function**;  // table[id]: the program's slot for function `id`
struct nvtx_callbacks_table {
  std::size_t struct_size;
  int (*get_module_function_table)(int module, nvtx_function_table* table, unsigned int* last_id);
};
struct nvtx_version_table {
  std::size_t struct_size;
  std::uint32_t version;
  std::uint32_t reserved;
  void (*set_injection_version)(std::uint32_t version);
};
using nvtx_export_table_getter = const void* (*)(std::uint32_t id);
constexpr std::uint32_t export_callbacks = 1, export_version = 3;
constexpr int module_core = 1, module_core2 = 5;
constexpr std::uint32_t nvtx_api_version = 3;

// nvtxEventAttributes_v2
struct nvtx_event_attributes {
  std::uint16_t version;
  std::uint16_t size;
  std::uint32_t category;
  std::int32_t color_type;
  std::uint32_t color;
  std::int32_t payload_type;
  std::int32_t reserved0;
  std::uint64_t payload;
  std::int32_t message_type;  // 1 ASCII, 2 wide, 3 a registered string
  union {
    const char* ascii;
    const wchar_t* wide;
    const void* registered;
  } message;
};
constexpr std::int32_t message_ascii = 1, message_wide = 2, message_registered = 3;

// Function ids in the core module (NvtxCallbackIdCore) and the second core module (...Core2).
enum core_id : unsigned {
  mark_ex = 1,
  mark_a = 2,
  mark_w = 3,
  range_start_ex = 4,
  range_start_a = 5,
  range_start_w = 6,
  range_end = 7,
  range_push_ex = 8,
  range_push_a = 9,
  range_push_w = 10,
  range_pop = 11,
};
enum core2_id : unsigned {
  domain_mark_ex = 1,
  domain_range_start_ex = 2,
  domain_range_end = 3,
  domain_range_push_ex = 4,
  domain_range_pop = 5,
  domain_register_string_a = 10,
  domain_register_string_w = 11,
  domain_create_a = 12,
  domain_create_w = 13,
};

// --- kairos's side --------------------------------------------------------------------------------

// A domain handle and a registered string handle both point at a string kairos keeps.
struct nvtx_strings {
  std::mutex mutex;
  std::deque<std::string> kept;
};
nvtx_strings* strings = new nvtx_strings;  // never destroyed: handles live as long as the program

const char* keep(std::string text) {
  reentry_guard guard;
  std::lock_guard lock{strings->mutex};
  return strings->kept.emplace_back(std::move(text)).c_str();
}

std::string utf8(const wchar_t* text) {
  std::string out;
  for (; text != nullptr && *text != 0; ++text) {
    const auto c = static_cast<std::uint32_t>(*text);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

// Each thread's text being named (a wide message, a domain's prefix): one buffer, reused.
thread_local std::string* scratch = nullptr;
std::string& scratch_buffer() {
  if (scratch == nullptr) {
    reentry_guard guard;
    scratch = new std::string;
  }
  return *scratch;
}

// A range's name: its message, "domain: message" in a named domain.
const char* name_of(const char* domain, const nvtx_event_attributes* attributes) {
  const char* message = "(unnamed)";
  std::string wide;
  if (attributes != nullptr) {
    if (attributes->message_type == message_ascii && attributes->message.ascii)
      message = attributes->message.ascii;
    else if (attributes->message_type == message_registered && attributes->message.registered)
      message = static_cast<const char*>(attributes->message.registered);
    else if (attributes->message_type == message_wide && attributes->message.wide)
      message = nullptr;
  }
  if (domain == nullptr && message != nullptr) return message;
  reentry_guard guard;
  auto& text = scratch_buffer();
  text.clear();
  if (domain != nullptr) text.append(domain).append(": ");
  if (message != nullptr)
    text.append(message);
  else
    text.append(utf8(attributes->message.wide));
  return text.c_str();
}
const char* wide_name(const wchar_t* message) {
  reentry_guard guard;
  auto& text = scratch_buffer();
  text = utf8(message);
  return text.c_str();
}

// A thread's open push/pop ranges, one stack per domain (nullptr: the default domain).
struct domain_stack {
  const char* domain;
  std::vector<const char*> names;
};
thread_local std::vector<domain_stack>* stacks = nullptr;
std::vector<const char*>& stack_of(const char* domain) {
  if (stacks == nullptr) {
    reentry_guard guard;
    stacks = new std::vector<domain_stack>;
  }
  for (auto& stack : *stacks)
    if (stack.domain == domain) return stack.names;
  reentry_guard guard;
  return stacks->emplace_back(domain_stack{domain, {}}).names;
}

int push(const char* domain, const char* name) {
  if (!nvtx_recording() || inside_kairos) return -1;
  const char* kept = push_annotated_region(name, region_kind::nvtx);
  if (kept == nullptr) return -1;
  auto& stack = stack_of(domain);
  {
    reentry_guard guard;
    stack.push_back(kept);
  }
  return static_cast<int>(stack.size()) - 1;
}
int pop(const char* domain) {
  if (inside_kairos) return -1;
  auto& stack = stack_of(domain);
  if (stack.empty()) return -1;
  pop_annotated_region(stack.back());
  stack.pop_back();
  return static_cast<int>(stack.size());
}
void mark(const char* name) {
  if (!nvtx_recording() || inside_kairos) return;
  const char* kept = push_annotated_region(name, region_kind::nvtx);
  if (kept != nullptr) pop_annotated_region(kept);
}
std::uint64_t start(const char* name) {
  if (!nvtx_recording()) return 0;
  return begin_annotation_range(name, region_kind::nvtx);
}

// The functions NVTX calls in place of its own (one per id above).
void mark_ex_function(const nvtx_event_attributes* attributes) { mark(name_of(nullptr, attributes)); }
void mark_a_function(const char* message) { mark(message); }
void mark_w_function(const wchar_t* message) { mark(wide_name(message)); }
std::uint64_t range_start_ex_function(const nvtx_event_attributes* attributes) {
  return start(name_of(nullptr, attributes));
}
std::uint64_t range_start_a_function(const char* message) { return start(message); }
std::uint64_t range_start_w_function(const wchar_t* message) { return start(wide_name(message)); }
void range_end_function(std::uint64_t id) { end_annotation_range(id); }
int range_push_ex_function(const nvtx_event_attributes* attributes) {
  return push(nullptr, name_of(nullptr, attributes));
}
int range_push_a_function(const char* message) { return push(nullptr, message); }
int range_push_w_function(const wchar_t* message) { return push(nullptr, wide_name(message)); }
int range_pop_function() { return pop(nullptr); }

const char* domain_name(const void* domain) { return static_cast<const char*>(domain); }
void domain_mark_ex_function(const void* domain, const nvtx_event_attributes* attributes) {
  mark(name_of(domain_name(domain), attributes));
}
std::uint64_t domain_range_start_ex_function(const void* domain, const nvtx_event_attributes* attributes) {
  return start(name_of(domain_name(domain), attributes));
}
void domain_range_end_function(const void*, std::uint64_t id) { end_annotation_range(id); }
int domain_range_push_ex_function(const void* domain, const nvtx_event_attributes* attributes) {
  return push(domain_name(domain), name_of(domain_name(domain), attributes));
}
int domain_range_pop_function(const void* domain) { return pop(domain_name(domain)); }
const void* domain_register_string_a_function(const void*, const char* text) { return keep(text ? text : ""); }
const void* domain_register_string_w_function(const void*, const wchar_t* text) { return keep(utf8(text)); }
const void* domain_create_a_function(const char* name) { return keep(name ? name : ""); }
const void* domain_create_w_function(const wchar_t* name) { return keep(utf8(name)); }

template <class Function>
void install(nvtx_function_table table, unsigned int last_id, unsigned int id, Function* function) {
  if (id <= last_id && table[id] != nullptr) *table[id] = reinterpret_cast<nvtx_function>(function);
}

}  // namespace
}  // namespace kairos::runtime

// NVTX's call, once, at the program's first NVTX call: 1 keeps kairos as the tool, 0 declines
// (kairos is off for this process, or KAIROS_ANNOTATIONS leaves NVTX out), and NVTX's calls
// stay no-ops.
extern "C" [[gnu::visibility("default")]] int InitializeInjectionNvtx2(const void* (*get_export_table)(std::uint32_t)) {
  using namespace kairos::runtime;
  if (!nvtx_recording() || get_export_table == nullptr) return 0;
  const auto* callbacks = static_cast<const nvtx_callbacks_table*>(get_export_table(export_callbacks));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(nvtx_callbacks_table)) return 0;
  if (const auto* version = static_cast<const nvtx_version_table*>(get_export_table(export_version));
      version != nullptr && version->struct_size >= sizeof(nvtx_version_table) && version->set_injection_version)
    version->set_injection_version(nvtx_api_version);
  nvtx_function_table table = nullptr;
  unsigned int last_id = 0;
  if (callbacks->get_module_function_table(module_core, &table, &last_id) == 0 || table == nullptr) return 0;
  install(table, last_id, mark_ex, &mark_ex_function);
  install(table, last_id, mark_a, &mark_a_function);
  install(table, last_id, mark_w, &mark_w_function);
  install(table, last_id, range_start_ex, &range_start_ex_function);
  install(table, last_id, range_start_a, &range_start_a_function);
  install(table, last_id, range_start_w, &range_start_w_function);
  install(table, last_id, range_end, &range_end_function);
  install(table, last_id, range_push_ex, &range_push_ex_function);
  install(table, last_id, range_push_a, &range_push_a_function);
  install(table, last_id, range_push_w, &range_push_w_function);
  install(table, last_id, range_pop, &range_pop_function);
  if (callbacks->get_module_function_table(module_core2, &table, &last_id) != 0 && table != nullptr) {
    install(table, last_id, domain_mark_ex, &domain_mark_ex_function);
    install(table, last_id, domain_range_start_ex, &domain_range_start_ex_function);
    install(table, last_id, domain_range_end, &domain_range_end_function);
    install(table, last_id, domain_range_push_ex, &domain_range_push_ex_function);
    install(table, last_id, domain_range_pop, &domain_range_pop_function);
    install(table, last_id, domain_register_string_a, &domain_register_string_a_function);
    install(table, last_id, domain_register_string_w, &domain_register_string_w_function);
    install(table, last_id, domain_create_a, &domain_create_a_function);
    install(table, last_id, domain_create_w, &domain_create_w_function);
  }
  set_nvtx_attached();
  return 1;
}
