#pragma once
// scoped<Bundle>: starts the bundle when constructed and stops it when destroyed.
//   kairos::scoped<kairos::component_tuple<kairos::wall_clock>> region{"solve"};   // no storage
// (kairos::auto_tuple, in <kairos/auto_tuple.hpp>, is the stored form.)
#include <initializer_list>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kairos {

template <class Bundle>
class scoped : public Bundle {
 public:
  template <class... Args>
  explicit scoped(Args&&... args) : Bundle(std::forward<Args>(args)...) {
    this->start();
  }
  // component_list's "only these names on" form, which a braced list cannot deduce through Args.
  scoped(std::string_view label, std::initializer_list<std::string_view> names) requires
      std::is_constructible_v<Bundle, std::string_view, std::initializer_list<std::string_view>>
      : Bundle(label, names) {
    this->start();
  }
  scoped(const scoped&) = delete;
  scoped& operator=(const scoped&) = delete;
  ~scoped() { this->stop(); }
};

}  // namespace kairos
