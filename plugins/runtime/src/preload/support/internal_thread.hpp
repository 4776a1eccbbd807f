#pragma once
// Starting one of kairos's own threads (service, control, writers), written once: detached, every
// signal blocked (it inherits the mask, so neither the program's signals nor kairos's sampling
// signal ever land there), and created under the re-entry guard so the pthread_create wrapper
// registers it as kairos's own thread. Returns pthread_create's answer: 0, or why it refused
// (EAGAIN: RLIMIT_NPROC or memory); the caller says what goes without the thread.
#include <cstddef>

namespace kairos::runtime {

int start_internal_thread(void* (*routine)(void*), void* argument, std::size_t stack_bytes = 0);

}  // namespace kairos::runtime
