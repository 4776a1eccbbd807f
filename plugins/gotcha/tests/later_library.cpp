// Loaded with dlopen after the wrappers are installed: its slot for kgt_add must be patched too.
#include "target_library.hpp"

extern "C" int kgt_later_add(int a, int b) { return kgt_add(a, b); }
