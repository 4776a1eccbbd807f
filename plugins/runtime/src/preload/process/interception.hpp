#pragma once
// How kairos wraps functions of the program: the one file that knows. Today: symbol interposition
// (libkairos.so is preloaded, so its exported pthread_create, exec*, _exit and sigmask functions
// are found before libc's, and the originals are found with dlsym(RTLD_NEXT)). Moving to
// kairos::gotcha (GOT patching) changes this file and interposition.cpp only: the wrappers call
// the hooks in lifecycle.hpp.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

namespace kairos::runtime::interception {

using pthread_create_function = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using execve_function = int (*)(const char*, char* const[], char* const[]);
using fexecve_function = int (*)(int, char* const[], char* const[]);
using sigmask_function = int (*)(int, const sigset_t*, sigset_t*);
using exit_function = void (*)(int);
using close_function = int (*)(int);
using close_range_function = int (*)(unsigned, unsigned, int);
using closefrom_function = void (*)(int);
using wait4_function = pid_t (*)(pid_t, int*, int, rusage*);

struct originals {
  pthread_create_function pthread_create = nullptr;
  execve_function execve = nullptr;
  execve_function execvpe = nullptr;
  fexecve_function fexecve = nullptr;
  sigmask_function pthread_sigmask = nullptr;
  sigmask_function sigprocmask = nullptr;
  exit_function exit_now = nullptr;  // _exit
  close_function close = nullptr;
  close_range_function close_range = nullptr;  // glibc 2.34 and later
  closefrom_function closefrom = nullptr;
  wait4_function wait4 = nullptr;  // wait, waitpid, wait3 and wait4 all go through it
};

// Resolved on first use (wrappers may run before libkairos.so's constructor).
const originals& original_functions() noexcept;

}  // namespace kairos::runtime::interception
