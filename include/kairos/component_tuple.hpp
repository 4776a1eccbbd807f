#pragma once
// component_tuple: every member always on, held by value; the cost of hand-written code.
// It touches no global state: see <kairos/auto_tuple.hpp> for bundles that record into storage.
#include <string_view>

#include <kairos/detail/basic_bundle.hpp>

namespace kairos {

template <class... Components>
class component_tuple : public detail::basic_bundle<detail::always_on, Components...> {
  using base = detail::basic_bundle<detail::always_on, Components...>;

 public:
  using base::base;
};

}  // namespace kairos
