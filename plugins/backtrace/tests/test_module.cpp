// A small loadable module for the backtrace tests: dlopen/dlclose churn in the stress test, and
// symbolization of an address inside a module built with -g and inside the same module stripped.
#include <cstdint>

namespace {
// Not exported: only .symtab or DWARF can name it.
[[gnu::noinline]] int hidden_work(int value) {
  volatile int result = value * 3 + 1;  // test_module.cpp: the line the file:line test expects
  return result;
}
}  // namespace

extern "C" {
// The address of a non-exported function inside this module.
[[gnu::visibility("default")]] std::uintptr_t kairos_test_module_hidden_address() {
  return reinterpret_cast<std::uintptr_t>(&hidden_work) + 4;
}
[[gnu::visibility("default")]] int kairos_test_module_work(int value) { return hidden_work(value); }
}
