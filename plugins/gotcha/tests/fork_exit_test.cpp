// The seed's function-wrapper example as a component: fork and exit replaced by a struct that
// receives the original function pointer and decides how to call it.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include <doctest/doctest.h>

#include <kairos/plugins/gotcha.hpp>

namespace {

// What the runtime does around fork and exit, reduced to flags the test can see.
struct collection_state {
  static inline std::atomic<bool> enabled{true};
  static inline std::atomic<int> finalized{0};
  static inline int exit_marker_fd = -1;
  static inline std::string_view fork_symbol;  // the exit wrapper writes one byte here
};

struct function_wrapper {
  pid_t operator()(const kairos::gotcha_data& data, pid_t (*real_fork)()) {
    collection_state::fork_symbol = data.symbol;
    collection_state::enabled = false;  // nothing is collected across fork
    const pid_t pid = real_fork();
    if (pid != 0) collection_state::enabled = true;  // only the parent collects again
    return pid;
  }
  void operator()(const kairos::gotcha_data&, void (*real_exit)(int), int exit_code) {
    collection_state::finalized.fetch_add(1);  // "finalize" before truly exiting
    if (collection_state::exit_marker_fd >= 0) {
      const char marker = 'F';
      (void)!::write(collection_state::exit_marker_fd, &marker, 1);
    }
    real_exit(exit_code);
  }
};

using fork_and_exit = kairos::gotcha<2, function_wrapper>;

}  // namespace

TEST_CASE("wrapped fork: the child sees collection off, the parent sees it back on") {
  REQUIRE(fork_and_exit::wrap<0, pid_t()>("fork").ok());
  const pid_t pid = fork();
  if (pid == 0) {
    // The child reports through its exit status: 10 when collection stayed off.
    _exit(collection_state::enabled ? 11 : 10);
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  fork_and_exit::unwrap_all();
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 10);
  CHECK(collection_state::enabled);
  CHECK(collection_state::fork_symbol == "fork");
}

TEST_CASE("wrapped exit: the wrapper finalizes, then the real exit keeps the exit code") {
  int marker_pipe[2];
  REQUIRE(pipe(marker_pipe) == 0);
  const pid_t pid = ::fork();  // before wrapping: a plain fork
  if (pid == 0) {
    ::close(marker_pipe[0]);
    collection_state::exit_marker_fd = marker_pipe[1];
    if (!fork_and_exit::wrap<1, void(int)>("exit").ok()) _exit(99);
    std::exit(42);
  }
  REQUIRE(pid > 0);
  ::close(marker_pipe[1]);
  char marker = 0;
  const ssize_t got = ::read(marker_pipe[0], &marker, 1);
  ::close(marker_pipe[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
  CHECK(got == 1);
  CHECK(marker == 'F');
}
