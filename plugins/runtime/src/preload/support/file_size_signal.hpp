#pragma once
// Writing past RLIMIT_FSIZE (ulimit -f) sends SIGXFSZ to the writing thread, and its default
// action ends the process. kairos's own threads block every signal, so there the write just
// fails with EFBIG; the program's thread that finalizes (exit, _exit, exec) wears this guard
// while kairos writes: SIGXFSZ blocked, and one that kairos's writes raised is taken back before
// the mask is restored, so a full quota costs the outputs, never the program.
#include <signal.h>

namespace kairos::runtime {

class file_size_signal_guard {
 public:
  file_size_signal_guard() noexcept {
    sigset_t file_size;
    sigemptyset(&file_size);
    sigaddset(&file_size, SIGXFSZ);
    sigpending(&pending_before_);
    pthread_sigmask(SIG_BLOCK, &file_size, &previous_);
  }
  ~file_size_signal_guard() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGXFSZ) == 1 && sigismember(&pending_before_, SIGXFSZ) != 1) {
      sigset_t file_size;
      sigemptyset(&file_size);
      sigaddset(&file_size, SIGXFSZ);
      const timespec now{0, 0};
      sigtimedwait(&file_size, nullptr, &now);  // kairos's own: taken back
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  file_size_signal_guard(const file_size_signal_guard&) = delete;
  file_size_signal_guard& operator=(const file_size_signal_guard&) = delete;

 private:
  sigset_t previous_;
  sigset_t pending_before_;
};

}  // namespace kairos::runtime
