#pragma once
// Static facts about a component: its name, unit, description and availability, with defaults for
// components that do not declare them.
#include <string>
#include <string_view>

#include <kairos/type_name.hpp>

namespace kairos {

// Whether a component can exist in this build. A plugin whose dependency is absent declares
// `static constexpr bool available_at_build = false;`; a user may also specialize this trait.
template <class Component>
struct is_available_at_build : std::bool_constant<true> {};

template <class Component>
requires requires { Component::available_at_build; }
struct is_available_at_build<Component> : std::bool_constant<Component::available_at_build> {};

template <class Component>
inline constexpr bool is_available_at_build_v = is_available_at_build<Component>::value;

template <class Component>
std::string_view label_of() {
  if constexpr (requires { Component::label(); })
    return Component::label();
  else
    return short_type_name<Component>();
}

template <class Component>
std::string_view description_of() {
  if constexpr (requires { Component::description(); })
    return Component::description();
  else
    return {};
}

template <class Component>
std::string_view unit_of() {
  if constexpr (requires { Component::unit(); })
    return Component::unit();
  else
    return {};
}

// Whether the component can measure here, now (a PMU, a device, a permission).
template <class Component>
bool available_now() {
  if constexpr (!is_available_at_build_v<Component>)
    return false;
  else if constexpr (requires { Component::available(); })
    return Component::available();
  else
    return true;
}

template <class Component>
std::string unavailable_reason_of() {
  if constexpr (requires { Component::unavailable_reason(); })
    return std::string{Component::unavailable_reason()};
  else if (available_now<Component>())
    return {};
  else
    return std::string{label_of<Component>()} + " is not available in this build";
}

// Components that share one reading per operation (several getrusage fields, say) name the
// reading's type; a bundle reads it once and hands it to each of them.
template <class Component>
concept uses_cache = requires {
  typename Component::cache_type;
};

}  // namespace kairos
