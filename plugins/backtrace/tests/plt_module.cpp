// A loadable module that calls libm through its PLT (symbol_names_tests.cpp), built with lazy and
// immediate binding, with and without IBT's .plt.sec: hypot by a call (a .plt or .plt.sec entry),
// cbrt by a call and by its address (then the linker makes one .plt.got entry, through cbrt's GOT
// slot).
#include <cmath>

extern "C" [[gnu::visibility("default")]] double kairos_plt_module_work(double x) {
  double (*volatile taken)(double) = static_cast<double (*)(double)>(&::cbrt);
  return ::hypot(x, 2.0) + ::cbrt(x) + taken(x);
}
