// A loadable module whose functions have aliases at one address, made as glibc makes them
// (symbol_names_tests.cpp): which name the symbolizer picks, rule by rule.
#include <cstdint>

#define KAIROS_NOINLINE [[gnu::noinline, gnu::used]]

extern "C" {
// A local implementation with exported aliases, one the short documented name (libm's cbrt:
// local __cbrt, weak cbrt, cbrtf64, cbrtf32x): exported over local, the shortest over fNN names.
KAIROS_NOINLINE static int cube_implementation(int value) asm("__cube");
static int cube_implementation(int value) {
  volatile int result = value * value * value;
  return result;
}
int cube(int) __attribute__((weak, alias("__cube"), nothrow));
int cubef64(int) __attribute__((weak, alias("__cube"), nothrow));
int cubef32x(int) __attribute__((weak, alias("__cube"), nothrow));

// A compatibility version beside the default one (libm's __hypot_finite@GLIBC_2.15 and
// hypot@@GLIBC_2.35): the default name, though the other is shorter.
KAIROS_NOINLINE int twin_implementation(int value) {  // not exported (alias_module.map)
  volatile int result = value + 2;
  return result;
}
asm(".symver twin_implementation, tw@KAIROS_TEST_1");
asm(".symver twin_implementation, twin@@KAIROS_TEST_2");

// A strong internal name and the weak documented one (libc's __write and write, __nanosleep and
// nanosleep): fewer leading underscores, whatever the binding.
KAIROS_NOINLINE int __module_lookup(int value) {
  volatile int result = value - 1;
  return result;
}
int module_lookup(int) __attribute__((weak, alias("__module_lookup"), nothrow));

// Two local names of one length (libc's __memcpy_avx_unaligned_erms and __memmove_...): the
// first in byte order, whatever the table's order.
KAIROS_NOINLINE static int left_copy(int value) asm("__left_copy");
static int left_copy(int value) {
  volatile int result = value * 5;
  return result;
}
static int copy_left(int) asm("__copy_left") __attribute__((alias("__left_copy"), used, nothrow));

// Addresses inside each, for the test.
[[gnu::visibility("default")]] std::uintptr_t kairos_alias_module_cube() {
  return reinterpret_cast<std::uintptr_t>(&cube_implementation) + 1;
}
[[gnu::visibility("default")]] std::uintptr_t kairos_alias_module_twin() {
  return reinterpret_cast<std::uintptr_t>(&twin_implementation) + 1;
}
[[gnu::visibility("default")]] std::uintptr_t kairos_alias_module_lookup() {
  return reinterpret_cast<std::uintptr_t>(&__module_lookup) + 1;
}
[[gnu::visibility("default")]] std::uintptr_t kairos_alias_module_copy() {
  return reinterpret_cast<std::uintptr_t>(&left_copy) + 1;
}
}
