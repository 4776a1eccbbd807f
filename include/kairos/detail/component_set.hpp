#pragma once
// The one place that does type-list algebra on a bundle's components, with Boost.Hana:
// flatten nested bundles, drop components unavailable in this build, remove duplicates, and collect
// the distinct caches the members share.
#include <tuple>
#include <type_traits>

#include <boost/hana/append.hpp>
#include <boost/hana/bool.hpp>
#include <boost/hana/contains.hpp>
#include <boost/hana/filter.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>

#include <kairos/component_traits.hpp>

namespace kairos::detail {
namespace hana = boost::hana;

// A bundle is anything exposing its members as `component_types = std::tuple<...>`.
template <class T>
concept bundle_type = requires {
  typename T::component_types;
};

template <class Component>
constexpr auto expand(hana::basic_type<Component>);

template <class... Components>
constexpr auto expand_all(hana::basic_type<std::tuple<Components...>>) {
  return hana::flatten(hana::make_tuple(expand(hana::type_c<Components>)...));
}

template <class Component>
constexpr auto expand(hana::basic_type<Component>) {
  if constexpr (bundle_type<Component>)
    return expand_all(hana::type_c<typename Component::component_types>);
  else
    return hana::tuple_t<Component>;
}

constexpr auto without_duplicates = [](auto types) {
  return hana::fold_left(types, hana::tuple_t<>, [](auto kept, auto type) {
    if constexpr (decltype(hana::contains(kept, type))::value)
      return kept;
    else
      return hana::append(kept, type);
  });
};

template <class... Components>
constexpr auto normalize() {
  auto flat = expand_all(hana::type_c<std::tuple<Components...>>);
  auto buildable = hana::filter(
      flat, [](auto type) { return hana::bool_c<is_available_at_build_v<typename decltype(type)::type>>; });
  return without_duplicates(buildable);
}

template <class... Components>
constexpr auto caches_of(hana::basic_type<std::tuple<Components...>>) {
  auto cached = hana::filter(hana::tuple_t<Components...>,
                             [](auto type) { return hana::bool_c<uses_cache<typename decltype(type)::type>>; });
  return without_duplicates(
      hana::transform(cached, [](auto type) { return hana::type_c<typename decltype(type)::type::cache_type>; }));
}

template <class Types>
using as_std_tuple = typename decltype(hana::unpack(Types{}, hana::template_<std::tuple>))::type;

}  // namespace kairos::detail

namespace kairos {

// std::tuple of the components a bundle of `Components...` holds, in declaration order.
template <class... Components>
using component_set_t = detail::as_std_tuple<decltype(detail::normalize<Components...>())>;

// std::tuple of the distinct caches that the members of `ComponentTuple` share.
template <class ComponentTuple>
using cache_set_t = detail::as_std_tuple<decltype(detail::caches_of(boost::hana::type_c<ComponentTuple>))>;

}  // namespace kairos
