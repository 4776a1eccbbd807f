/* The offsets python_frames.cpp reads, from the headers of the Python the tests run
 * (python_frames_tests.cpp compares them with kairos's table). C, not C++: CPython's internal
 * headers are C. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <stddef.h>

#include "python_header_layout.h"

void python_header_layout(struct header_layout* out) {
  out->minor = PY_MINOR_VERSION;
  out->tstate_thread_id = offsetof(PyThreadState, thread_id);
#if PY_VERSION_HEX >= 0x030d0000
  out->tstate_cframe = 0;
  out->cframe_current_frame = 0;
  out->tstate_current_frame = offsetof(PyThreadState, current_frame);
  out->frame_code = offsetof(_PyInterpreterFrame, f_executable);
  out->frame_instruction = offsetof(_PyInterpreterFrame, instr_ptr);
#else
  out->tstate_cframe = offsetof(PyThreadState, cframe);
  out->cframe_current_frame = offsetof(_PyCFrame, current_frame);
  out->tstate_current_frame = 0;
  out->frame_code = offsetof(_PyInterpreterFrame, f_code);
  out->frame_instruction = offsetof(_PyInterpreterFrame, prev_instr);
#endif
#if PY_VERSION_HEX >= 0x030c0000
  out->frame_is_entry = 0;
  out->owner_cstack = FRAME_OWNED_BY_CSTACK;
#else
  out->frame_is_entry = offsetof(_PyInterpreterFrame, is_entry);
  out->owner_cstack = -1;
#endif
  out->tstate_datastack_chunk = offsetof(PyThreadState, datastack_chunk);
  out->frame_previous = offsetof(_PyInterpreterFrame, previous);
  out->frame_owner = offsetof(_PyInterpreterFrame, owner);
  out->code_filename = offsetof(PyCodeObject, co_filename);
  out->code_name = offsetof(PyCodeObject, co_name);
  out->code_qualname = offsetof(PyCodeObject, co_qualname);
  out->code_linetable = offsetof(PyCodeObject, co_linetable);
  out->code_firstlineno = offsetof(PyCodeObject, co_firstlineno);
  out->code_instructions = offsetof(PyCodeObject, co_code_adaptive);
  out->ascii_header = sizeof(PyASCIIObject);
  out->compact_header = sizeof(PyCompactUnicodeObject);
  out->stack_chunk_data = offsetof(_PyStackChunk, data);
}
