// The library whose functions the tests wrap. Built three ways (lazy binding, full RELRO,
// -fno-plt) together with the test program.
#include "target_library.hpp"

extern "C" {

int kgt_add(int a, int b) { return a + b; }

void kgt_store(int* destination, int value) { *destination = value; }

// Recursion through the library's own PLT/GOT slot for kgt_countdown (semantic interposition is
// on by default; a direct self-call could be turned into a loop, a call from another one cannot).
int kgt_countdown_step(int n);
int kgt_countdown(int n) { return n <= 0 ? 0 : 1 + kgt_countdown_step(n - 1); }
int kgt_countdown_step(int n) { return kgt_countdown(n); }

int kgt_add_inside_library(int a, int b) { return kgt_add(a, b); }

int kgt_called_by_nobody(int a) { return a; }
}
