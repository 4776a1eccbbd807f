#pragma once
// component_tuple: every member always on, stored by value; the cost of hand-written code.
// auto_tuple: the same, started at construction and stopped at destruction.
#include <string_view>

#include <kairos/detail/basic_bundle.hpp>

namespace kairos {

template <class... Components>
class component_tuple : public detail::basic_bundle<detail::always_on, Components...> {
  using base = detail::basic_bundle<detail::always_on, Components...>;

 public:
  using base::base;
};

template <class... Components>
class auto_tuple : public component_tuple<Components...> {
 public:
  explicit auto_tuple(std::string_view label) : component_tuple<Components...>{label} {
    this->start();
  }
  template <detail::temporary_string String> auto_tuple(String&&) = delete;
  auto_tuple(const auto_tuple&) = delete;
  auto_tuple& operator=(const auto_tuple&) = delete;
  ~auto_tuple() { this->stop(); }
};

}  // namespace kairos
