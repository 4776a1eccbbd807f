// A C++ program that embeds CPython (linked with libpython), for python_frames_tests.py. With no
// argument it starts the interpreter at once, and its Python functions must show in the samples as
// they do under python3 itself. `late`: it first spins in C++ for 0.4 s of CPU time, then starts
// the interpreter, as a program that starts Python on demand. `never`: it spins in C++ and never
// starts the interpreter, as LAMMPS links libpython and may never use it.
#include <Python.h>
#include <time.h>

#include <cstdio>
#include <cstring>

namespace {

double thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

[[gnu::noinline]] unsigned long native_spin(double seconds) {
  const double end = thread_seconds() + seconds;
  volatile unsigned long x = 0;
  while (thread_seconds() < end)
    for (unsigned long i = 0; i < 1000; ++i) x = x + i;
  return x;
}

int run_python() {
  Py_Initialize();
  const int status = PyRun_SimpleString(R"(
import time

def embedded_spin(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(1000):
            x += i
    return x

def embedded_entry():
    return embedded_spin(0.8)

embedded_entry()
)");
  Py_Finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int status = 0;
  if (std::strcmp(mode, "never") == 0) {
    native_spin(0.8);
  } else {
    if (std::strcmp(mode, "late") == 0) native_spin(0.4);
    status = run_python();
  }
  std::puts(status == 0 ? "embedded ok" : "embedded failed");
  return status == 0 ? 0 : 1;
}
