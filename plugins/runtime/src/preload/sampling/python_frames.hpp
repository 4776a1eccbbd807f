#pragma once
// CPython's own frames in the samples (docs/runtime.md, "Python frames"): the signal handler reads
// the sampled thread's interpreter frames (its thread state's frame chain) as it takes the native
// stack, and the writer splices them in place of the `_PyEval_EvalFrameDefault` frames that run
// them, so a stack reads main.py's main, solver.py's solve, numpy's C code, the BLAS kernel.
//
// The handler only copies (code object, instruction) pairs, a few loads a frame: straight from a
// chain that starts in the live part of the thread's data stack, else through process_vm_readv,
// which fails instead of faulting (python_frames.cpp says why the innermost frame decides). Names,
// files and lines are read later, by the writer, through process_vm_readv too.
//
// Python frames take synthetic addresses (python_frame_address_base and up), one per function and
// line, which the sink names through python_frame_name(): the rest of the data path sees
// addresses, as for native frames.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kairos::runtime {

inline constexpr std::size_t python_stack_depth = 32;
// Above every user-space address (x86-64 and AArch64 keep them below 2^48).
inline constexpr std::uint64_t python_frame_address_base = std::uint64_t{1} << 62;

// What the handler copies from one thread's frame chain, innermost first.
struct python_frame_capture {
  struct frame {
    std::uint64_t code;  // the PyCodeObject
    // Its qualified name (the str object's address) and first line: a code object freed since, its
    // address reused by another, is told apart.
    std::uint64_t qualname;
    std::uint32_t instruction;  // index of the last started code unit; top bit: the frame entered the eval loop
    std::int32_t first_line;
  };
  std::uint16_t count;
  bool torn;  // a frame failed its checks: the frames read so far (innermost) are kept
  frame frames[python_stack_depth];
};
inline constexpr std::uint32_t python_entry_flag = 0x8000'0000u;

// Where CPython keeps what the walk reads, per minor version: facts of its headers
// (Include/cpython/pystate.h, Include/internal/pycore_frame.h, Include/cpython/code.h,
// Include/cpython/unicodeobject.h), checked against them by the test
// `python_frames: layouts match the interpreter's headers` wherever those headers are installed.
struct python_layout {
  unsigned minor;
  std::size_t tstate_thread_id;
  std::size_t tstate_cframe;         // 3.11, 3.12: the thread state's _PyCFrame (0: none)
  std::size_t cframe_current_frame;  // in that _PyCFrame
  std::size_t tstate_current_frame;  // 3.13: the frame, in the thread state itself
  std::size_t tstate_datastack_chunk, tstate_datastack_top;
  std::size_t frame_code, frame_previous, frame_instruction, frame_owner;
  std::size_t frame_is_entry;  // 3.11; later versions mark entries with a C-stack shim frame
  int owner_cstack;            // the shim frames' owner (-1: none)
  std::size_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_instructions;
  std::size_t ascii_header, compact_header;  // sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject)
};
// The layout read for CPython 3.<minor> (nullptr: that version's frames are not read).
const python_layout* python_layout_for(unsigned minor) noexcept;

struct python_frames_status {
  bool found = false;   // an interpreter whose frames kairos reads
  std::string version;  // "3.11.2"; empty when no Python is loaded
  std::string note;     // why frames are not read although Python is loaded ("" otherwise)
};

// At sampling start: finds a CPython 3.11-3.13 loaded in the process (`found`: its frames can be
// read). `wanted`: KAIROS_SAMPLING_PYTHON. Reading starts with start_reading_python_frames().
python_frames_status find_python(bool wanted);
// Whether the CPython found has an interpreter: from the first step of Py_Initialize (before any
// Python code runs) to the end of Py_Finalize. A program that links libpython and never starts it
// has none. Any thread, any time after find_python (a pointer read).
bool python_interpreter_exists() noexcept;
// The handler reads Python frames from now on (after find_python found them readable).
void start_reading_python_frames() noexcept;
// Whether the handler reads Python frames: such threads are sampled with a signal, since a ring's
// samples are read after the thread moved on.
bool python_frames_active() noexcept;
// Signal handler: the calling thread's interpreter frames (count 0: none).
void capture_python_frames(python_frame_capture& capture) noexcept;
// Writer: `native` (lookup addresses, leaf first; `native_cut`: the unwinder stopped at its depth)
// with each eval-loop frame replaced by the Python frames it runs, into `out` (at most
// `capacity`). Returns the count written.
std::size_t splice_python_frames(const python_frame_capture& capture, const std::uint64_t* native,
                                 std::size_t native_count, bool native_cut, std::uint64_t* out, std::size_t capacity);
// The line of code unit `instruction` in a 3.11+ location table (co_linetable); 0: none.
std::uint32_t python_line_of(std::string_view table, std::uint32_t first_line, std::uint32_t instruction);

// The frame standing for an eval loop entering or leaving the Python frame it runs.
inline constexpr std::string_view python_call_overhead = "<python call: entering or leaving a frame>";

struct python_frame_name {
  std::string function;  // "Solver.solve (solver.py)"
  std::string file;      // the code object's file name, as Python has it
  std::uint32_t line = 0;
};
// The sink: a synthetic address's name (false: not a Python frame's address).
bool python_frame_named(std::uint64_t address, python_frame_name& name);

struct python_frames_totals {
  std::uint64_t samples = 0;      // samples that held Python frames
  std::uint64_t unmatched = 0;    // of those: eval-loop frames and Python entry frames did not pair up
  std::uint64_t torn = 0;         // a frame failed its checks (a push or pop interrupted)
  std::uint64_t unreadable = 0;   // code objects gone before the writer read them
  std::uint64_t read_safely = 0;  // walks that began outside the live data stack (read_memory)
};
python_frames_totals python_frames_counts() noexcept;

}  // namespace kairos::runtime
