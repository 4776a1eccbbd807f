#pragma once
// How kairos wraps functions of the program: the one file that knows. Today: symbol interposition
// (libkairos.so is preloaded, so its exported pthread_create/exec* are found before libc's, and the
// originals are found with dlsym(RTLD_NEXT)). Moving to kairos::gotcha (GOT patching) changes this
// file and interposition.cpp only: the rest of the runtime calls original_functions() and
// implements the hooks in lifecycle.hpp.
#include <link.h>
#include <pthread.h>

#include <cstddef>

namespace kairos::runtime::interception {

using pthread_create_function = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using execve_function = int (*)(const char*, char* const[], char* const[]);
using fexecve_function = int (*)(int, char* const[], char* const[]);

using dlopen_function = void* (*)(const char*, int);
using dlmopen_function = void* (*)(long, const char*, int);
using dlclose_function = int (*)(void*);
using dl_iterate_phdr_function = int (*)(int (*)(struct ::dl_phdr_info*, std::size_t, void*), void*);

struct originals {
  pthread_create_function pthread_create = nullptr;
  execve_function execve = nullptr;
  execve_function execvpe = nullptr;
  fexecve_function fexecve = nullptr;
  // The dynamic loader's entry points that take its locks: wrapped to hold kairos::dl_guard, so a
  // sample landing inside them unwinds with libgcc instead of libunwind (see docs/plugins/backtrace.md).
  dlopen_function dlopen = nullptr;
  dlmopen_function dlmopen = nullptr;
  dlclose_function dlclose = nullptr;
  dl_iterate_phdr_function dl_iterate_phdr = nullptr;
};

// Resolved on first use (wrappers may run before libkairos.so's constructor); the constructor
// resolves them too, so that the signal handler's unwinder never triggers the resolution.
const originals& original_functions() noexcept;

}  // namespace kairos::runtime::interception
