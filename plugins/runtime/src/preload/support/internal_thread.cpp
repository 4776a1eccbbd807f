#include "preload/support/internal_thread.hpp"

#include <pthread.h>
#include <signal.h>

#include "preload/support/reentry_guard.hpp"

namespace kairos::runtime {

int start_internal_thread(void* (*routine)(void*), void* argument, std::size_t stack_bytes) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  if (stack_bytes) pthread_attr_setstacksize(&attributes, stack_bytes);
  pthread_t thread;
  int result = 0;
  {
    reentry_guard guard;
    result = pthread_create(&thread, &attributes, routine, argument);
  }
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace kairos::runtime
