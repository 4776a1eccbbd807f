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

#include <fmt/core.h>

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
  std::string arguments;  // "(int)"
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
        lines += fmt::format("{}: {}\n", entry.operation, entry.reached.empty() ? "not reached" : entry.reached);
    return lines;
  }

  // A table: an operation a row, a component a column.
  std::string table() const {
    std::vector<std::size_t> widths;
    for (auto component : components) widths.push_back(component.size() > 11 ? component.size() : 11);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      auto& width = widths[i % components.size()];
      if (calls[i].reached.size() > width) width = calls[i].reached.size();
    }
    std::string text = fmt::format("bundle called with {}\n{:<10}", arguments, "operation");
    for (std::size_t c = 0; c < components.size(); ++c) text += fmt::format("  {:<{}}", components[c], widths[c]);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto column = i % components.size();
      if (column == 0) text += fmt::format("\n{:<10}", calls[i].operation);
      text += fmt::format("  {:<{}}", calls[i].reached.empty() ? "not reached" : calls[i].reached, widths[column]);
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

// How one operation reaches one member, decided while compiling. describe() keeps one of these
// per member and operation and builds the text in plain functions (reached_text, add_calls):
// string code instantiated for every member and operation made describe() cost its caller's file
// 0.25 s.
struct reach_entry {
  std::string_view operation;
  reach how = reach::none;
  // Members that share a cache receive it in place of the caller's arguments; nullptr for others.
  std::string (*cache_arguments)() = nullptr;
};

template <class Operation, class Component, class... Args>
constexpr reach_entry reach_entry_of() {
  if constexpr (Operation::reads_measurement && uses_cache<Component>) {
    using cache = const typename Component::cache_type;
    return {Operation::name, reach_of<Operation, Component, cache>(), &argument_list<cache>};
  } else {
    return {Operation::name, reach_of<Operation, Component, Args...>()};
  }
}

template <class Operation, class... Args, class... Components>
constexpr std::array<reach_entry, sizeof...(Components)> operation_entries(std::tuple<Components...>*) {
  return {reach_entry_of<Operation, Components, Args...>()...};
}

// A constant: a bundle's description instantiates no code per member and operation.
template <class Operation, class Members, class... Args>
inline constexpr auto reach_entries = operation_entries<Operation, Args...>(static_cast<Members*>(nullptr));

// "start(int)", "start()", or empty when not reached.
inline std::string reached_text(const reach_entry& entry, const std::string& caller_arguments) {
  switch (entry.how) {
    case reach::with_arguments:
      return std::string{entry.operation} +
             (entry.cache_arguments != nullptr ? entry.cache_arguments() : caller_arguments);
    case reach::without_arguments:
      return std::string{entry.operation} + "()";
    case reach::none:
      break;
  }
  return {};
}

// One operation's row of calls: its entries are in the order of description.components.
inline void add_calls(bundle_description& description, const reach_entry* entries) {
  for (std::size_t column = 0; column < description.components.size(); ++column)
    description.calls.push_back({entries[column].operation, description.components[column],
                                 reached_text(entries[column], description.arguments)});
}

template <class... Components>
void list_components(bundle_description& description, std::tuple<Components...>*) {
  (description.components.push_back(label_of<Components>()), ...);
}

}  // namespace detail

template <class Bundle, class... Args>
bundle_description describe() {
  using members = typename Bundle::component_types;
  bundle_description description{detail::argument_list<Args...>(), {}, {}};
  detail::list_components(description, static_cast<members*>(nullptr));
  [&]<class... Operations>(std::tuple<Operations...>*) {
    (detail::add_calls(description, detail::reach_entries<Operations, members, Args...>.data()), ...);
  }(static_cast<std::tuple<op::record, op::start, op::stop, op::sample, op::audit, op::mark, op::store, op::get>*>(
      nullptr));
  return description;
}

}  // namespace kairos
