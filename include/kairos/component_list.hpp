#pragma once
// component_list: each member switched on or off at run time, by type or by name (for example
// from a setting that names components). Touches no global state.
#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>

#include <kairos/detail/basic_bundle.hpp>

namespace kairos {
namespace detail {

template <std::size_t Size>
struct member_switches {
  std::array<bool, Size> on{};
  constexpr bool is_on(std::size_t index) const noexcept { return on[index]; }
};

template <class ComponentTuple>
struct component_index;

template <class... Components>
struct component_index<std::tuple<Components...>> {
  static constexpr std::array<std::string_view (*)(), sizeof...(Components)> labels{&label_of<Components>...};
  static constexpr std::array<bool (*)(), sizeof...(Components)> available{&available_now<Components>...};
};

}  // namespace detail

template <class... Components>
class component_list
    : public detail::basic_bundle<detail::member_switches<std::tuple_size_v<component_set_t<Components...>>>,
                                  Components...> {
  using base =
      detail::basic_bundle<detail::member_switches<std::tuple_size_v<component_set_t<Components...>>>, Components...>;
  using index = detail::component_index<typename base::component_types>;

 public:
  using typename base::component_types;

  // Every member that can measure here is on.
  explicit component_list(std::string_view label) : base{label} {
    for (std::size_t i = 0; i < base::size; ++i) this->switches_.on[i] = index::available[i]();
  }
  // Only the named members are on; an unknown name throws std::invalid_argument.
  component_list(std::string_view label, std::initializer_list<std::string_view> names) : base{label} {
    for (auto name : names) enable(name);
  }
  template <detail::temporary_string String>
  component_list(String&&) = delete;

  template <class Component>
  bool enable() {
    return set(position<Component>(), true);
  }
  template <class Component>
  void disable() {
    set(position<Component>(), false);
  }
  template <class Component>
  bool enabled() const {
    return this->switches_.on[position<Component>()];
  }

  // Switches a member on by its label; returns false (and stays off) if it cannot measure here.
  bool enable(std::string_view name) { return set(position(name), true); }
  void disable(std::string_view name) { set(position(name), false); }
  bool enabled(std::string_view name) const { return this->switches_.on[position(name)]; }

  static std::array<std::string_view, base::size> names() {
    std::array<std::string_view, base::size> all{};
    for (std::size_t i = 0; i < base::size; ++i) all[i] = index::labels[i]();
    return all;
  }

 private:
  template <class Component>
  static constexpr std::size_t position() {
    constexpr std::size_t found = []<std::size_t... I>(std::index_sequence<I...>) {
      std::size_t index = base::size;
      ((std::is_same_v<Component, std::tuple_element_t<I, component_types>> ? index = I : 0), ...);
      return index;
    }
    (std::make_index_sequence<base::size>{});
    static_assert(found < base::size, "this component is not a member of the list");
    return found;
  }

  std::size_t position(std::string_view name) const {
    for (std::size_t i = 0; i < base::size; ++i)
      if (index::labels[i]() == name) return i;
    std::string known;
    for (auto label : names()) known += (known.empty() ? "" : ", ") + std::string{label};
    throw std::invalid_argument("[kairos] unknown component '" + std::string{name} + "' in bundle '" +
                                std::string{this->label()} + "'; known components: " + known);
  }

  bool set(std::size_t index_of_member, bool on) {
    on = on && index::available[index_of_member]();
    this->switches_.on[index_of_member] = on;
    return on;
  }
};

}  // namespace kairos
