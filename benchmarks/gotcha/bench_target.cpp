// The function every benchmark calls and wraps.
extern "C" int bench_target(int x) { return x * 3 + 1; }
