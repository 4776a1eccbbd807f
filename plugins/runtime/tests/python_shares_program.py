"""A Python program with known CPU shares, for python_frames_tests.py and
benchmarks/sampling/python_frames.py: three functions, one calling numpy's matrix product (C and BLAS
under Python), each timing its own thread CPU time. It prints that truth on its first line
("name=seconds ... process=seconds") and whether numpy was there on its second."""
import sys
import time

try:
    import numpy
except ImportError:
    numpy = None


def pure_loop(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(2000):
            x += i * i
    return x


def matrix_work(seconds):
    if numpy is None:  # its own loop, so that pure_loop's share stays pure_loop's
        end = time.thread_time() + seconds
        x = 0
        while time.thread_time() < end:
            x = sum(i * i for i in range(1000)) + x % 5
        return x
    a = numpy.random.rand(200, 200)
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        a = (a @ a) / 200.0
    return a


def nested_inner(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x = sum(i * 3 for i in range(500)) + x % 7
    return x


def nested_outer(seconds):
    return nested_inner(seconds)


def main(total):
    spent = {}
    for name, share, work in (("pure_loop", 0.5, pure_loop), ("matrix_work", 0.3, matrix_work),
                              ("nested_outer", 0.2, nested_outer)):
        start = time.thread_time()
        work(total * share)
        spent[name] = time.thread_time() - start
    print(" ".join(f"{name}={seconds:.6f}" for name, seconds in spent.items()), f"process={time.process_time():.6f}")
    print("numpy" if numpy else "no-numpy")


main(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
