#include "preload/sampling/python_frames.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace kairos::runtime {
namespace {

constexpr std::size_t none = 0;
constexpr python_layout layouts[] = {
    {.minor = 11,
     .tstate_thread_id = 152,
     .tstate_cframe = 56,
     .cframe_current_frame = 8,
     .tstate_current_frame = none,
     .tstate_datastack_chunk = 296,
     .tstate_datastack_top = 304,
     .frame_code = 32,
     .frame_previous = 48,
     .frame_instruction = 56,
     .frame_owner = 69,
     .frame_is_entry = 68,
     .owner_cstack = -1,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_linetable = 136,
     .code_firstlineno = 72,
     .code_instructions = 184,
     .ascii_header = 48,
     .compact_header = 72},
    {.minor = 12,
     .tstate_thread_id = 136,
     .tstate_cframe = 56,
     .cframe_current_frame = 0,
     .tstate_current_frame = none,
     .tstate_datastack_chunk = 232,
     .tstate_datastack_top = 240,
     .frame_code = 0,
     .frame_previous = 8,
     .frame_instruction = 56,
     .frame_owner = 70,
     .frame_is_entry = none,
     .owner_cstack = 3,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_linetable = 136,
     .code_firstlineno = 68,
     .code_instructions = 192,
     .ascii_header = 40,
     .compact_header = 56},
    {.minor = 13,
     .tstate_thread_id = 152,
     .tstate_cframe = none,
     .cframe_current_frame = none,
     .tstate_current_frame = 72,
     .tstate_datastack_chunk = 232,
     .tstate_datastack_top = 240,
     .frame_code = 0,
     .frame_previous = 8,
     .frame_instruction = 56,
     .frame_owner = 70,
     .frame_is_entry = none,
     .owner_cstack = 3,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_linetable = 136,
     .code_firstlineno = 68,
     .code_instructions = 200,
     .ascii_header = 40,
     .compact_header = 56},
};
constexpr std::size_t object_type = 8;        // PyObject.ob_type
constexpr std::size_t object_size = 16;       // PyVarObject.ob_size, PyASCIIObject.length
constexpr std::size_t bytes_data = 32;        // PyBytesObject.ob_sval
constexpr std::size_t unicode_state = 32;     // PyASCIIObject.state
constexpr std::size_t stack_chunk_top = 16;   // _PyStackChunk.top: slots in use, saved as the next chunk is pushed
constexpr std::size_t stack_chunk_data = 24;  // _PyStackChunk.data
constexpr std::size_t max_chunks_checked = 16;

using this_thread_state_function = void* (*)();
using interpreter_head_function = void* (*)();

struct python_globals {
  // Written once before `active` is published; read by handlers and writers after.
  const python_layout* layout = nullptr;
  this_thread_state_function this_thread_state = nullptr;
  interpreter_head_function interpreter_head = nullptr;  // PyInterpreterState_Head
  std::uintptr_t code_type = 0, str_type = 0, bytes_type = 0;
  std::uintptr_t eval_begin = 0, eval_end = 0;  // _PyEval_EvalFrameDefault
  std::string version;
  std::atomic<bool> active{false};
  std::atomic<std::uint64_t> samples{0}, unmatched{0}, torn{0}, unreadable{0}, read_safely{0};

  // Writers (several threads) and the sink.
  std::mutex mutex;
  struct code_entry {
    std::uint64_t qualname = 0;  // what the sample saw: an address reused by another code object differs
    std::int32_t first_line_seen = 0;
    bool readable = false;
    std::string function, file;
    std::uint32_t first_line = 0;
    std::string line_table;
  };
  std::unordered_map<std::uint64_t, code_entry> codes;
  std::unordered_map<std::string, std::uint64_t> ids;  // file, function and line: its address
  std::vector<python_frame_name> names;                // by address - python_frame_address_base
};
python_globals* globals = new python_globals;  // never destroyed: handlers may run until the end

template <class T>
T load(std::uintptr_t address) noexcept {
  return *reinterpret_cast<const T*>(address);
}

bool plausible(std::uintptr_t pointer) noexcept {
  return pointer >= 4096 && pointer % 8 == 0 && pointer < (std::uintptr_t{1} << 47);
}

// --- the handler ---------------------------------------------------------------------------

// Reads this process's memory without faulting: memory freed since the pointer was written fails
// the call (a system call: only where a pointer cannot be trusted).
bool read_memory(std::uint64_t address, void* out, std::size_t size) noexcept {
  if (!plausible(address & ~std::uint64_t{7})) return false;
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

// The live part of each chunk of the thread's data stack, where its frames lie: the newest up to
// the stack's top, each older one up to the top it had when the next was pushed.
struct chunk_span {
  std::uintptr_t begin, end;
};
std::size_t live_chunks(std::uintptr_t state, const python_layout& layout, chunk_span* spans) noexcept {
  std::size_t count = 0;
  auto top = load<std::uintptr_t>(state + layout.tstate_datastack_top);
  for (auto chunk = load<std::uintptr_t>(state + layout.tstate_datastack_chunk);
       plausible(chunk) && count < max_chunks_checked; chunk = load<std::uintptr_t>(chunk)) {
    const auto data = chunk + stack_chunk_data;
    spans[count++] = {data, std::max(top, data)};
    const auto previous = load<std::uintptr_t>(chunk);
    if (plausible(previous))
      top = previous + stack_chunk_data + load<std::size_t>(previous + stack_chunk_top) * sizeof(void*);
  }
  return count;
}

// What the walk reads of a frame and of its code object, copied in one piece each: straight from
// memory where the chain is trusted, else through read_memory.
constexpr std::size_t frame_bytes = 72;  // through _PyInterpreterFrame.owner in 3.11-3.13
constexpr std::size_t code_bytes = 136;  // through co_qualname

struct frame_reader {
  bool trusted;
  bool copy(std::uintptr_t address, void* out, std::size_t size) const noexcept {
    if (!plausible(address)) return false;
    if (!trusted) return read_memory(address, out, size);
    std::memcpy(out, reinterpret_cast<const void*>(address), size);
    return true;
  }
};

template <class T>
T field(const unsigned char* bytes, std::size_t offset) noexcept {
  T value;
  std::memcpy(&value, bytes + offset, sizeof value);
  return value;
}

}  // namespace

namespace {

// --- the writer: names, files and lines ----------------------------------------------------

template <class T>
bool read_value(std::uint64_t address, T& value) {
  return read_memory(address, &value, sizeof value);
}

void append_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A str object as UTF-8 (compact strings only: what code objects hold).
bool read_text(std::uint64_t object, const python_layout& layout, std::string& out) {
  std::uint64_t length = 0;
  std::uint32_t state = 0;
  if (!read_value(object + object_size, length) || !read_value(object + unicode_state, state)) return false;
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4) || length > 4096) return false;
  const auto data = object + (ascii ? layout.ascii_header : layout.compact_header);
  std::vector<unsigned char> bytes(length * kind);
  if (!bytes.empty() && !read_memory(data, bytes.data(), bytes.size())) return false;
  out.clear();
  for (std::size_t i = 0; i < length; ++i) {
    std::uint32_t c = 0;
    for (unsigned b = 0; b < kind; ++b) c |= std::uint32_t{bytes[i * kind + b]} << (8 * b);
    append_utf8(out, c);
  }
  return true;
}

bool read_bytes(std::uint64_t object, std::string& out) {
  std::int64_t size = 0;
  if (!read_value(object + object_size, size) || size < 0 || size > (1 << 24)) return false;
  out.resize(static_cast<std::size_t>(size));
  return size == 0 || read_memory(object + bytes_data, out.data(), out.size());
}

// An object that is alive and of `type`: a freed one has its first word (the reference count)
// overwritten by the allocator's free-list link, an address far above any count (3.12's immortal
// objects count 2^32 - 1).
bool live_object(std::uint64_t object, std::uint64_t type) {
  std::uint64_t header[2] = {};
  return read_memory(object, header, sizeof header) && header[0] >= 1 && header[0] <= (std::uint64_t{1} << 32) &&
         header[1] == type;
}

// The sampled frame's name, file and line table, if its code object is still the one the sample
// saw. Freed since (a module's top-level code, once run), its memory may still hold its fields, or
// pointers to strings reused by others ("vdot (pickle.py)" was read so): every object is checked
// alive.
bool read_code(const python_frame_capture::frame& frame, python_globals::code_entry& entry) {
  const auto& layout = *globals->layout;
  std::uint64_t qualname = 0, filename = 0, line_table = 0;
  std::int32_t first_line = 0;
  if (!live_object(frame.code, globals->code_type) || !read_value(frame.code + layout.code_qualname, qualname) ||
      qualname != frame.qualname || !read_value(frame.code + layout.code_firstlineno, first_line) ||
      first_line != frame.first_line || !read_value(frame.code + layout.code_filename, filename) ||
      !read_value(frame.code + layout.code_linetable, line_table) || !live_object(qualname, globals->str_type) ||
      !live_object(filename, globals->str_type) || !live_object(line_table, globals->bytes_type))
    return false;
  std::string name;
  if (!read_text(qualname, layout, name) || !read_text(filename, layout, entry.file) ||
      !read_bytes(line_table, entry.line_table))
    return false;
  const auto slash = entry.file.rfind('/');
  entry.function = fmt::format("{} ({})", name, slash == std::string::npos ? entry.file : entry.file.substr(slash + 1));
  entry.first_line = static_cast<std::uint32_t>(std::max(first_line, 0));
  return true;
}

}  // namespace

// The line of a code unit, from a 3.11+ location table (CPython's Objects/locations.md): entries
// of 1-8 code units, each opening with a byte whose top bit is set, bits 3-6 its form and bits
// 0-2 its length less one; varints in 6-bit groups, bit 6 saying another follows. 0: no line.
std::uint32_t python_line_of(std::string_view table, std::uint32_t first_line, std::uint32_t instruction) {
  std::size_t at = 0;
  auto varint = [&]() -> std::uint64_t {
    std::uint64_t value = 0;
    for (unsigned shift = 0; at < table.size() && shift < 64; shift += 6) {
      const auto byte = static_cast<unsigned char>(table[at++]);
      value |= std::uint64_t{byte & 63u} << shift;
      if (!(byte & 64)) break;
    }
    return value;
  };
  auto signed_varint = [&]() -> std::int64_t {
    const auto value = varint();
    return value & 1 ? -static_cast<std::int64_t>(value >> 1) : static_cast<std::int64_t>(value >> 1);
  };
  std::int64_t line = first_line;
  std::uint64_t unit = 0;
  while (at < table.size()) {
    const auto head = static_cast<unsigned char>(table[at++]);
    if (!(head & 0x80)) return 0;
    const unsigned form = (head >> 3) & 15, length = (head & 7) + 1;
    bool located = true;
    if (form == 15) {
      located = false;
    } else if (form == 14) {
      line += signed_varint();
      varint(), varint(), varint();
    } else if (form == 13) {
      line += signed_varint();
    } else if (form >= 10) {
      line += form - 10;
      at += 2;
    } else {
      at += 1;
    }
    unit += length;
    if (instruction < unit) return located && line > 0 ? static_cast<std::uint32_t>(line) : 0;
  }
  return 0;
}

const python_layout* python_layout_for(unsigned minor) noexcept {
  for (const auto& layout : layouts)
    if (layout.minor == minor) return &layout;
  return nullptr;
}

python_frames_status find_python(bool wanted) {
  python_frames_status status;
  if (globals->active.load(std::memory_order_acquire)) {
    status.found = true;
    status.version = globals->version;
    return status;
  }
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  auto* this_thread_state = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  auto* code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  auto* str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  auto* bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  auto* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  auto* interpreter_head = dlsym(RTLD_DEFAULT, "PyInterpreterState_Head");
  if (!this_thread_state) return status;  // no Python here
  if (!version) {
    status.version = "before 3.11";
    status.note = "Python frames are read for CPython 3.11 to 3.13; this one is older: native frames only";
    return status;
  }
  const unsigned major = (*version >> 24) & 0xFF, minor = (*version >> 16) & 0xFF, micro = (*version >> 8) & 0xFF;
  status.version = fmt::format("{}.{}.{}", major, minor, micro);
  if (!wanted) return status;
  const auto* layout = major == 3 ? python_layout_for(minor) : nullptr;
  Dl_info info{};
  void* symbol_entry = nullptr;
  const bool sized = eval && dladdr1(eval, &info, &symbol_entry, RTLD_DL_SYMENT) && symbol_entry &&
                     static_cast<const ElfW(Sym)*>(symbol_entry)->st_size > 0;
  if (!layout || !code_type || !str_type || !bytes_type || !interpreter_head || !sized) {
    status.note =
        fmt::format("Python {}: frames are read for CPython 3.11 to 3.13: native frames only", status.version);
    return status;
  }
  globals->layout = layout;
  globals->this_thread_state = reinterpret_cast<this_thread_state_function>(this_thread_state);
  globals->code_type = reinterpret_cast<std::uintptr_t>(code_type);
  globals->str_type = reinterpret_cast<std::uintptr_t>(str_type);
  globals->bytes_type = reinterpret_cast<std::uintptr_t>(bytes_type);
  globals->eval_begin = reinterpret_cast<std::uintptr_t>(eval);
  globals->eval_end = globals->eval_begin + static_cast<const ElfW(Sym)*>(symbol_entry)->st_size;
  globals->interpreter_head = reinterpret_cast<interpreter_head_function>(interpreter_head);
  globals->version = status.version;
  status.found = true;
  return status;
}

bool python_interpreter_exists() noexcept {
  return globals->interpreter_head && globals->interpreter_head() != nullptr;
}

void start_reading_python_frames() noexcept {
  if (globals->layout) globals->active.store(true, std::memory_order_release);
}

bool python_frames_active() noexcept { return globals->active.load(std::memory_order_acquire); }

void capture_python_frames(python_frame_capture& capture) noexcept {
  capture.count = 0;
  capture.torn = false;
  if (!globals->active.load(std::memory_order_acquire)) return;
  const auto& layout = *globals->layout;
  // The thread's own state (its thread-specific slot: no lock), checked to be this thread's.
  const auto state = reinterpret_cast<std::uintptr_t>(globals->this_thread_state());
  if (!plausible(state) || load<unsigned long>(state + layout.tstate_thread_id) != pthread_self()) return;
  std::uintptr_t frame = 0;
  if (layout.tstate_cframe != none) {
    const auto cframe = load<std::uintptr_t>(state + layout.tstate_cframe);
    if (!plausible(cframe)) return;
    frame = load<std::uintptr_t>(cframe + layout.cframe_current_frame);
  } else {
    frame = load<std::uintptr_t>(state + layout.tstate_current_frame);
  }
  if (frame == 0) return;
  // The innermost frame is the one pointer that may be stale: an eval loop publishes its _PyCFrame
  // before it sets the frame it runs (3.11, 3.12: the field is then whatever the stack held), and a
  // frame being popped is still current. A frame in the live part of the data stack is sound, and
  // so is every frame its chain links. Any other start (a generator's frame, or a stale pointer) is
  // walked through read_memory, which fails instead of faulting.
  chunk_span chunks[max_chunks_checked];
  const auto chunk_count = live_chunks(state, layout, chunks);
  const frame_reader reader{std::any_of(chunks, chunks + chunk_count, [&](const chunk_span& span) {
    return frame >= span.begin && frame + frame_bytes <= span.end;
  })};
  unsigned char frame_data[frame_bytes], code_data[code_bytes];
  for (int steps = 0; frame != 0 && capture.count < python_stack_depth && steps < 4 * int{python_stack_depth};
       ++steps) {
    if (!reader.copy(frame, frame_data, frame_bytes)) {
      capture.torn = true;
      break;
    }
    const auto owner = field<std::int8_t>(frame_data, layout.frame_owner);
    const auto previous = field<std::uintptr_t>(frame_data, layout.frame_previous);
    if (layout.owner_cstack >= 0 && owner == layout.owner_cstack) {
      // A shim: the frame read before it is where this eval loop was entered.
      if (capture.count > 0) capture.frames[capture.count - 1].instruction |= python_entry_flag;
      frame = previous;
      continue;
    }
    const auto code = field<std::uintptr_t>(frame_data, layout.frame_code);
    if (!reader.copy(code, code_data, code_bytes) ||
        field<std::uintptr_t>(code_data, object_type) != globals->code_type) {
      capture.torn = true;
      break;
    }
    const auto first_unit = code + layout.code_instructions;
    const auto instruction = field<std::uintptr_t>(frame_data, layout.frame_instruction);
    // A frame not yet started points one unit before its first (3.11, 3.12).
    const std::uint64_t unit = instruction >= first_unit ? (instruction - first_unit) / 2 : 0;
    if (unit >= python_entry_flag) {
      capture.torn = true;
      break;
    }
    auto& out = capture.frames[capture.count++];
    out.code = code;
    out.instruction = static_cast<std::uint32_t>(unit);
    if (layout.frame_is_entry != none && field<bool>(frame_data, layout.frame_is_entry))
      out.instruction |= python_entry_flag;
    out.qualname = field<std::uintptr_t>(code_data, layout.code_qualname);
    out.first_line = field<std::int32_t>(code_data, layout.code_firstlineno);
    frame = previous;
  }
  if (capture.count > 0) globals->samples.fetch_add(1, std::memory_order_relaxed);
  if (capture.torn) globals->torn.fetch_add(1, std::memory_order_relaxed);
  if (!reader.trusted) globals->read_safely.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Under the mutex: the synthetic address of a name.
std::uint64_t address_named(std::string function, std::string file, std::uint32_t line) {
  auto key = fmt::format("{}\n{}\n{}", file, function, line);
  const auto [found, inserted] = globals->ids.try_emplace(std::move(key), globals->names.size());
  if (inserted) globals->names.push_back({std::move(function), std::move(file), line});
  return python_frame_address_base + found->second;
}

// Under the mutex: the synthetic address of one frame.
std::uint64_t address_of(const python_frame_capture::frame& frame) {
  auto& entry = globals->codes[frame.code];
  if (entry.qualname != frame.qualname || entry.first_line_seen != frame.first_line || entry.function.empty()) {
    entry = {};
    entry.qualname = frame.qualname;
    entry.first_line_seen = frame.first_line;
    entry.readable = read_code(frame, entry);
    if (!entry.readable) {
      entry.function = "<python frame, code object gone>";
      globals->unreadable.fetch_add(1, std::memory_order_relaxed);
    }
  }
  const auto line =
      entry.readable ? python_line_of(entry.line_table, entry.first_line, frame.instruction & ~python_entry_flag) : 0;
  return address_named(entry.function, entry.file, line);
}

}  // namespace

std::size_t splice_python_frames(const python_frame_capture& capture, const std::uint64_t* native,
                                 std::size_t native_count, bool native_cut, std::uint64_t* out, std::size_t capacity) {
  // The Python frames in segments, one per eval loop, innermost first: a segment ends at the frame
  // that entered its loop.
  struct segment {
    std::size_t begin, end;
  };
  segment segments[python_stack_depth];
  std::size_t segment_count = 0, begin = 0;
  for (std::size_t i = 0; i < capture.count; ++i)
    if (capture.frames[i].instruction & python_entry_flag) {
      segments[segment_count++] = {begin, i + 1};
      begin = i + 1;
    }
  if (begin < capture.count) segments[segment_count++] = {begin, capture.count};
  auto eval_loop = [](std::uint64_t address) { return address >= globals->eval_begin && address < globals->eval_end; };
  const auto loops = static_cast<std::size_t>(std::count_if(native, native + native_count, eval_loop));
  // Paired from the outermost loop inwards: the innermost end is where a call may be half made (a
  // loop entered whose frame is not linked yet, one returning whose frame is unlinked). A stack cut
  // at the unwinder's depth has lost its outer loops: paired from the innermost then.
  const auto shift =
      static_cast<std::ptrdiff_t>(native_cut ? 0 : segment_count) - static_cast<std::ptrdiff_t>(native_cut ? 0 : loops);
  if (segment_count != loops && !native_cut && !capture.torn)
    globals->unmatched.fetch_add(1, std::memory_order_relaxed);
  std::size_t written = 0, loop = 0;
  std::lock_guard lock{globals->mutex};
  for (std::size_t i = 0; i < native_count && written < capacity; ++i) {
    if (!eval_loop(native[i])) {
      out[written++] = native[i];
      continue;
    }
    const auto last = static_cast<std::ptrdiff_t>(loop) + shift;
    // The innermost loop also takes the segments inside every paired one (none left out).
    const auto first = loop == 0 ? std::ptrdiff_t{0} : last;
    ++loop;
    if (last < 0 || last >= static_cast<std::ptrdiff_t>(segment_count)) {
      // The innermost loop alone without a frame, below loops with theirs: it is entering or
      // leaving the frame it runs (3.12 and 3.13 unlink a generator's frame at its yield, before
      // the loop returns), the interpreter's own work for a call. Any other: kept as it is.
      const bool entering_or_leaving = loop == 1 && last == -1 && segment_count > 0 && !native_cut && !capture.torn;
      out[written++] = entering_or_leaving ? address_named(std::string{python_call_overhead}, "", 0) : native[i];
      continue;
    }
    for (auto s = first; s <= last; ++s)
      for (auto f = segments[s].begin; f < segments[s].end && written < capacity; ++f)
        out[written++] = address_of(capture.frames[f]);
  }
  return written;
}

bool python_frame_named(std::uint64_t address, python_frame_name& name) {
  if (address < python_frame_address_base) return false;
  std::lock_guard lock{globals->mutex};
  const auto index = address - python_frame_address_base;
  if (index >= globals->names.size()) return false;
  name = globals->names[index];
  return true;
}

python_frames_totals python_frames_counts() noexcept {
  return {globals->samples.load(), globals->unmatched.load(), globals->torn.load(), globals->unreadable.load(),
          globals->read_safely.load()};
}

}  // namespace kairos::runtime
