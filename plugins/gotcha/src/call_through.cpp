// kairos_call_through (call_through.hpp): calls invoke(call) from a frame of its own, whose bounds
// are the two hidden labels. A frame-pointer frame, with its CFI, so every unwinder walks through it (the
// unwind tables, libgcc, a frame-pointer walk); the call is never a tail call.
#include <kairos/plugins/gotcha/call_through.hpp>

asm(R"(
  .text
  .p2align 4
  .globl kairos_call_through
  .type kairos_call_through, @function
  .globl kairos_call_through_begin
  .hidden kairos_call_through_begin
kairos_call_through:
kairos_call_through_begin:
  .cfi_startproc
  endbr64
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size kairos_call_through, .-kairos_call_through
  .globl kairos_call_through_end
  .hidden kairos_call_through_end
kairos_call_through_end:
)");

extern "C" {
[[gnu::visibility("hidden")]] extern const char kairos_call_through_begin[];
[[gnu::visibility("hidden")]] extern const char kairos_call_through_end[];
}

namespace kairos::gotcha_patcher {

call_through_code call_through_range() noexcept { return {kairos_call_through_begin, kairos_call_through_end}; }

}  // namespace kairos::gotcha_patcher
