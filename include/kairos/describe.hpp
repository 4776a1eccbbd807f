#pragma once
// Which members each operation of a bundle reaches, and how: the aid for finding a misspelt
// member (`strat()` is never called) or an argument list that no member accepts.
//
//   std::cout << kairos::describe<kairos::component_tuple<foo, bar, spam>, int>();
#include <array>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <kairos/component_traits.hpp>
#include <kairos/operations.hpp>
#include <kairos/type_name.hpp>

namespace kairos {

struct bundle_description {
  struct call {
    std::string_view operation;
    std::string_view component;
    std::string reached;  // "start(int)", "start()", or empty when not reached
  };
  std::string arguments;    // "(int)"
  std::vector<std::string_view> components;
  std::vector<call> calls;  // for each operation, for each component in declaration order

  // "start(int)", "start()" or "not reached".
  std::string reach(std::string_view component, std::string_view operation) const {
    for (const auto& entry : calls)
      if (entry.component == component && entry.operation == operation)
        return entry.reached.empty() ? "not reached" : entry.reached;
    return "no such component or operation";
  }

  // One component's operations, a line each: "start: not reached", "stop: stop()".
  std::string explain(std::string_view component) const {
    std::string lines;
    for (const auto& entry : calls)
      if (entry.component == component)
        lines += fmt::format("{}: {}\n", entry.operation,
                             entry.reached.empty() ? "not reached" : entry.reached);
    return lines;
  }

  // A table: an operation a row, a component a column.
  std::string table() const {
    std::vector<std::size_t> widths;
    for (auto component : components) widths.push_back(std::max<std::size_t>(component.size(), 11));
    for (std::size_t i = 0; i < calls.size(); ++i)
      widths[i % components.size()] =
          std::max(widths[i % components.size()], calls[i].reached.size());
    std::string text = fmt::format("bundle called with {}\n{:<10}", arguments, "operation");
    for (std::size_t c = 0; c < components.size(); ++c)
      text += fmt::format("  {:<{}}", components[c], widths[c]);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto column = i % components.size();
      if (column == 0) text += fmt::format("\n{:<10}", calls[i].operation);
      text += fmt::format("  {:<{}}", calls[i].reached.empty() ? "not reached" : calls[i].reached,
                          widths[column]);
    }
    return text + "\n";
  }

  friend std::ostream& operator<<(std::ostream& out, const bundle_description& description) {
    return out << description.table();
  }
};

namespace detail {

template <class... Args>
std::string argument_list() {
  std::string text = "(";
  ((text += (text.size() > 1 ? ", " : "") + std::string{type_name<Args>()}), ...);
  return text + ")";
}

template <class Operation, class Component, class... Args>
std::string call_signature() {
  switch (reach_of<Operation, Component, Args...>()) {
    case reach::with_arguments: return std::string{Operation::name} + argument_list<Args...>();
    case reach::without_arguments: return std::string{Operation::name} + "()";
    case reach::none: break;
  }
  return {};
}

template <class Operation, class Component, class... Args>
std::string reached_call() {
  // Members that share a cache receive it in place of the caller's arguments.
  if constexpr (Operation::reads_measurement && uses_cache<Component>)
    return call_signature<Operation, Component, const typename Component::cache_type>();
  else
    return call_signature<Operation, Component, Args...>();
}

template <class Operation, class... Args, class... Components>
void describe_operation(bundle_description& description, std::tuple<Components...>*) {
  (description.calls.push_back({Operation::name, label_of<Components>(),
                                reached_call<Operation, Components, Args...>()}),
   ...);
}

template <class... Components>
void list_components(bundle_description& description, std::tuple<Components...>*) {
  (description.components.push_back(label_of<Components>()), ...);
}

}  // namespace detail

template <class Bundle, class... Args>
bundle_description describe() {
  using members = typename Bundle::component_types*;
  bundle_description description{detail::argument_list<Args...>(), {}, {}};
  detail::list_components(description, members{});
  [&]<class... Operations>(std::tuple<Operations...>*) {
    (detail::describe_operation<Operations, Args...>(description, members{}), ...);
  }(static_cast<std::tuple<op::record, op::start, op::stop, op::sample, op::audit, op::mark,
                           op::store, op::get>*>(nullptr));
  return description;
}

}  // namespace kairos
