// A C++ program that embeds CPython (linked with libpython), for python_frames_tests.py: its
// Python functions must show in the samples as they do under python3 itself.
#include <Python.h>

#include <cstdio>

int main() {
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
  std::puts(status == 0 ? "embedded ok" : "embedded failed");
  return status == 0 ? 0 : 1;
}
