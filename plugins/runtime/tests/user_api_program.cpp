// A program that uses the user API, for the end-to-end tests. It runs the same with or without
// kairos; its output says what it did so the test compares runs.
//   user_api_program nested            3 x outer{ 2 x inner } on the main thread
//   user_api_program threads N         N short-lived threads, each pushing "thread_work" twice
//   user_api_program exit-from-thread  regions, then exit(7) from a second thread while main waits
//   user_api_program wait-for-signal   a region, then sleeps until killed (prints "ready")
//   user_api_program mismatch          pops the wrong name, then goes on
//   user_api_program fork              forks a child that pushes a region and exits
//   user_api_program disabled-thread   a thread that disables itself pushes nothing
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <kairos/user.h>

namespace {

int nested() {
  for (int i = 0; i < 3; ++i) {
    kairos::scoped_region outer{"outer"};
    for (int j = 0; j < 2; ++j) {
      kairos_push_region("inner");
      kairos_pop_region("inner");
    }
  }
  std::printf("nested done, active=%d\n", kairos_is_active());
  return 0;
}

int threads(int count) {
  for (int started = 0; started < count;) {
    std::vector<std::thread> batch;
    for (int i = 0; i < 64 && started < count; ++i, ++started)
      batch.emplace_back([] {
        for (int k = 0; k < 2; ++k) {
          kairos::scoped_region region{"thread_work"};
        }
      });
    for (auto& thread : batch) thread.join();
  }
  std::printf("%d threads done\n", count);
  return 0;
}

int exit_from_thread() {
  kairos_push_region("before_exit");
  kairos_pop_region("before_exit");
  std::thread exiter{[] {
    kairos::scoped_region region{"exiting_thread"};
    std::fflush(stdout);
    std::exit(7);
  }};
  exiter.join();  // never returns: exit() ends the process
  return 0;
}

int wait_for_signal() {
  kairos_push_region("waiting");
  std::printf("ready\n");
  std::fflush(stdout);
  for (int i = 0; i < 600; ++i) usleep(50'000);
  kairos_pop_region("waiting");
  return 0;
}

int mismatch() {
  kairos_push_region("a");
  kairos_pop_region("b");  // reported, ignored
  kairos_pop_region("a");
  kairos_pop_region("a");  // nothing open: reported, ignored
  std::printf("mismatch survived\n");
  return 0;
}

int fork_child() {
  kairos::scoped_region region{"parent_region"};
  // A second thread is alive at the fork: the child must not list it as its own.
  std::atomic<bool> done{false};
  std::thread bystander{[&done] {
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }};
  const pid_t child = fork();
  if (child == 0) {
    kairos_push_region("child_region");
    kairos_pop_region("child_region");
    std::printf("child active=%d\n", kairos_is_active());
    std::fflush(stdout);
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  done.store(true);
  bystander.join();
  std::printf("parent saw child exit %d\n", WEXITSTATUS(status));
  return 0;
}

// Region names are bytes: invalid UTF-8, control characters, a 1 MiB name, well-formed UTF-8,
// markup.
int odd_names() {
  const std::string huge(1 << 20, 'n');
  for (const std::string& name :
       {std::string{"\xff\xfe not utf-8"}, std::string{"line\nbreak\ttab"}, huge,
        std::string{"caf\xc3\xa9 \xe2\x88\x91"}, std::string{"</script><b>\"markup\" & 'quotes'</b>"}}) {
    kairos_push_region(name.c_str());
    kairos_pop_region(name.c_str());
  }
  std::printf("odd names done\n");
  return 0;
}

int disabled_thread() {
  std::thread quiet{[] {
    kairos_disable_thread();
    kairos::scoped_region region{"hidden"};
  }};
  quiet.join();
  kairos_stop();
  { kairos::scoped_region region{"stopped"}; }
  kairos_start();
  { kairos::scoped_region region{"visible"}; }
  std::printf("disabled-thread done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "nested";
  if (mode == "nested") return nested();
  if (mode == "threads") return threads(argc > 2 ? std::atoi(argv[2]) : 100);
  if (mode == "exit-from-thread") return exit_from_thread();
  if (mode == "wait-for-signal") return wait_for_signal();
  if (mode == "mismatch") return mismatch();
  if (mode == "fork") return fork_child();
  if (mode == "disabled-thread") return disabled_thread();
  if (mode == "odd-names") return odd_names();
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
