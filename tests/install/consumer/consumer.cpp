// A program outside the kairos tree, built against the installed package.
#include <kairos/kairos.hpp>

int main() {
  kairos::component_tuple<kairos::wall_clock, kairos::peak_rss> bundle{"consumer"};
  bundle.start();
  bundle.stop();
  return bundle.laps() == 1 ? 0 : 1;
}
