#pragma once
/* What python_header_layout.c reads from CPython's headers (python_frames_tests.cpp). */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct header_layout {
  unsigned minor;
  size_t tstate_thread_id, tstate_cframe, cframe_current_frame, tstate_current_frame, tstate_datastack_chunk;
  size_t frame_code, frame_previous, frame_instruction, frame_owner, frame_is_entry;
  int owner_cstack;
  size_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_instructions;
  size_t ascii_header, compact_header, stack_chunk_data;
};
void python_header_layout(struct header_layout* out);

#ifdef __cplusplus
}
#endif
