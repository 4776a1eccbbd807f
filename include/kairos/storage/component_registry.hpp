#pragma once
// Every component type that records into storage gets a small dense id and one entry describing
// it for reports: label, unit, description, the names of its values, whether it is additive.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <kairos/component_traits.hpp>

namespace kairos {

struct component_info {
  std::string label;
  std::string unit;
  std::string description;
  std::vector<std::string> value_labels;  // one per recorded value; {label} for a scalar
  // A sum of its children's values makes sense (times, counts), so "self" = total - children.
  // Not so for a high-water mark such as peak_rss.
  bool additive = true;

  friend bool operator==(const component_info&, const component_info&) = default;
};

// A component's result as recorded: a number, or a fixed array of numbers.
template <class Result>
inline constexpr std::size_t recorded_value_count = std::is_arithmetic_v<Result> ? 1 : 0;
template <class Element, std::size_t Size>
requires std::is_arithmetic_v<Element>
inline constexpr std::size_t recorded_value_count<std::array<Element, Size>> = Size;

template <class Component>
concept recordable = requires(const Component& component) {
  {component.get()};
}
&&recorded_value_count<std::decay_t<decltype(std::declval<const Component&>().get())>> > 0;

template <class Component>
requires recordable<Component>
inline constexpr std::size_t value_count_of =
    recorded_value_count<std::decay_t<decltype(std::declval<const Component&>().get())>>;

class component_registry {
 public:
  // Never destroyed: reports written at exit (atexit handlers registered before the first
  // component) still read it.
  static component_registry& instance() {
    static auto* registry = new component_registry;
    return *registry;
  }

  std::uint32_t add(component_info info) {
    std::lock_guard lock{mutex_};
    for (std::uint32_t id = 0; id < components_.size(); ++id)
      if (components_[id].label == info.label) return id;
    components_.push_back(std::move(info));
    return static_cast<std::uint32_t>(components_.size() - 1);
  }

  std::vector<component_info> all() const {
    std::lock_guard lock{mutex_};
    return components_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<component_info> components_;
};

template <class Component>
component_info info_of() {
  component_info info{std::string{label_of<Component>()},
                      std::string{unit_of<Component>()},
                      std::string{description_of<Component>()},
                      {},
                      true};
  if constexpr (requires { Component::value_labels(); }) {
    for (auto value_label : Component::value_labels()) info.value_labels.emplace_back(value_label);
  } else {
    info.value_labels.push_back(info.label);
  }
  if constexpr (requires { Component::additive; }) info.additive = Component::additive;
  return info;
}

// The component's id, registered on first use (one guarded load afterwards).
template <class Component>
std::uint32_t component_id() {
  static const std::uint32_t id = component_registry::instance().add(info_of<Component>());
  return id;
}

}  // namespace kairos
