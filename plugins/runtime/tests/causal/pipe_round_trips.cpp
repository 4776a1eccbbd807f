// A causal toy whose threads wait for each other only through a pipe and a socket pair
// (docs/causal.md, "Pipes and socket pairs"): a client thread makes a request (3 units of work, in
// make_request), writes it into a pipe and waits in recv for the reply; a server thread waits in
// read for a request, serves it (2 units, in serve_request) and sends the reply through a socket
// pair. A progress point per round trip. They take turns, so a round lasts 5 units: speeding make_request
// up by 25% gains 15%, by 50% 30%; speeding serve_request up by 50% gains 20%.
//
// In a producer-consumer pipeline the critical thread never waits on the pipe, so whether its
// wake-ups are credited barely shows; here each thread waits on the other every round, and a
// waiter that paid the delays its waker had paid already would hide every speedup (a prediction
// near 0).
//
//   pipe_round_trips SECONDS [REQUEST_FACTOR [SERVE_FACTOR [seen|hidden [WAIT]]]]
// "hidden" makes the pipe and the socket pair with raw system calls, which kairos does not see:
// their wake-ups are then not credited (the comparison in docs/causal.md, and the tests' check
// that only descriptors made by pipe() and socketpair() count). WAIT is where a thread waits for
// the other: in read and recv (the default), or in poll, ppoll, select, pselect or epoll_wait
// before it reads; then its reads and writes are raw system calls, so that the waits are the only
// calls on these descriptors kairos can credit.
// Prints the round trips per second on stdout, then per CPU second of its threads together (they
// take turns: no thread is busy throughout; causal/toy.hpp).
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "toy.hpp"

namespace {

constexpr long iterations_per_unit = 2'000'000;  // about 2.5 ms here: a round spans several sample periods

double request_factor = 1, serve_factor = 1;
std::chrono::steady_clock::time_point deadline;
int request_pipe[2];   // client -> server
int reply_sockets[2];  // server [1] -> client [0]
long round_trips = 0;
const char* wait_call = "read";
unsigned long sink = 0;

// Each keeps its frame (no tail call), so that a function-scope experiment finds it on the stack.
[[gnu::noinline]] unsigned long make_request() {
  auto result = causal_toy::work(3 * request_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}
[[gnu::noinline]] unsigned long serve_request(unsigned long request) {
  auto result = request ^ causal_toy::work(2 * serve_factor, iterations_per_unit);
  asm volatile("" : "+r"(result));
  return result;
}

// Waits until `fd` is readable with WAIT's call (`instance`: the thread's epoll instance). These
// calls are never restarted after a signal handler (the profiler's samples), so EINTR is retried.
bool wait_readable(int fd, int instance) {
  const auto is = [](const char* name) { return std::strcmp(wait_call, name) == 0; };
  for (;;) {
    pollfd polled{fd, POLLIN, 0};
    fd_set reading;
    FD_ZERO(&reading);
    FD_SET(fd, &reading);
    epoll_event event{};
    const int ready = is("poll")      ? poll(&polled, 1, -1)
                      : is("ppoll")   ? ppoll(&polled, 1, nullptr, nullptr)
                      : is("select")  ? select(fd + 1, &reading, nullptr, nullptr, nullptr)
                      : is("pselect") ? pselect(fd + 1, &reading, nullptr, nullptr, nullptr, nullptr)
                                      : epoll_wait(instance, &event, 1, -1);
    if (ready != -1 || errno != EINTR) return ready == 1;
  }
}

// An epoll instance watching `fd` for reading, in WAIT's epoll mode (else -1).
int epoll_instance(int fd) {
  if (std::strcmp(wait_call, "epoll") != 0) return -1;
  const int instance = epoll_create1(0);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  epoll_ctl(instance, EPOLL_CTL_ADD, fd, &event);
  return instance;
}

bool transfer_all(bool receive, int fd, unsigned long& value, int instance = -1) {
  auto* bytes = reinterpret_cast<char*>(&value);
  const bool raw = std::strcmp(wait_call, "read") != 0;
  if (receive && raw && !wait_readable(fd, instance)) return false;
  for (std::size_t done = 0; done < sizeof value;) {
    const auto moved = raw       ? (receive ? syscall(SYS_read, fd, bytes + done, sizeof value - done)
                                            : syscall(SYS_write, fd, bytes + done, sizeof value - done))
                       : receive ? (fd == reply_sockets[0] ? recv(fd, bytes + done, sizeof value - done, 0)
                                                           : read(fd, bytes + done, sizeof value - done))
                                 : (fd == reply_sockets[1] ? send(fd, bytes + done, sizeof value - done, 0)
                                                           : write(fd, bytes + done, sizeof value - done));
    if (moved <= 0) return false;
    done += static_cast<std::size_t>(moved);
  }
  return true;
}

void* client(void*) {
  const int instance = epoll_instance(reply_sockets[0]);
  while (std::chrono::steady_clock::now() < deadline) {
    unsigned long request = make_request();
    if (!transfer_all(false, request_pipe[1], request)) break;
    unsigned long reply = 0;
    if (!transfer_all(true, reply_sockets[0], reply, instance)) break;
    sink += reply;
    ++round_trips;
    mark_progress("round trip");
  }
  close(request_pipe[1]);  // the server reads the end of the requests
  causal_toy::note_thread_cpu();
  return nullptr;
}

void* server(void*) {
  const int instance = epoll_instance(request_pipe[0]);
  unsigned long request = 0;
  while (transfer_all(true, request_pipe[0], request, instance)) {
    unsigned long reply = serve_request(request);
    if (!transfer_all(false, reply_sockets[1], reply)) break;
  }
  causal_toy::note_thread_cpu();
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: %s SECONDS [REQUEST_FACTOR [SERVE_FACTOR [seen|hidden [read|poll|ppoll|select|pselect|epoll]]]]\n",
        argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  if (argc > 2) request_factor = std::atof(argv[2]);
  if (argc > 3) serve_factor = std::atof(argv[3]);
  const bool hidden = argc > 4 && std::strcmp(argv[4], "hidden") == 0;
  if (argc > 5) wait_call = argv[5];
  const char* waits[] = {"read", "poll", "ppoll", "select", "pselect", "epoll"};
  if (std::none_of(std::begin(waits), std::end(waits),
                   [](const char* name) { return std::strcmp(wait_call, name) == 0; })) {
    std::fprintf(stderr, "pipe_round_trips: no wait '%s' (read, poll, ppoll, select, pselect or epoll)\n", wait_call);
    return 2;
  }
  const bool made = hidden ? syscall(SYS_pipe2, request_pipe, 0) == 0 &&
                                 syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, reply_sockets) == 0
                           : pipe(request_pipe) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, reply_sockets) == 0;
  if (!made) {
    std::perror("pipe_round_trips");
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  pthread_t c, s;
  pthread_create(&s, nullptr, server, nullptr);
  pthread_create(&c, nullptr, client, nullptr);
  pthread_join(c, nullptr);
  pthread_join(s, nullptr);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("round trips per second: %.3f (%ld round trips, checksum %lu)\n", round_trips / elapsed, round_trips,
              sink & 1);
  causal_toy::print_cpu_rates_of_turns("round trips", round_trips);
  return 0;
}
